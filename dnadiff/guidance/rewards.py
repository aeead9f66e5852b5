"""Rewards for guided design: any callable `x: Long[B, L] -> Float[B]` (higher is better).

    reward = build_reward("gc")                      # GC fraction
    reward = build_reward("gc:0.42")                 # -|GC - 0.42| (closeness to a target GC)
    reward = build_reward("motif:TATAAA")            # occurrences on both strands (overlaps count)
    reward = build_reward("classifier:DIR", target="coding")   # log p(y = coding | x), finetuned classifier
    reward = build_reward("mypkg.rewards:score")     # a user function x -> Float[B] (or list of floats)

Token ids are the DNA tokenizer's (A, C, G, T = 7, 8, 9, 10); positions holding the mask id (still
to be generated) count as no base: the built-ins are then partial scores, which is what the
methods that score noisy states (classifier guidance) see. `rc_averaged(reward, complement)`
averages r(x) and r(rc(x)) (the RC-symmetric variant).

A reward may also define `soft(onehot: Float[B, L, V]) -> Float[B]`, differentiable and equal to
the reward at one-hot inputs: the gradient variant of classifier guidance uses it (first-order
Taylor expansion, Nisonoff et al. 2024, arXiv 2406.01572, §4.1). `calls` counts the sequences scored.
"""

from __future__ import annotations

import importlib
import math
import os
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from dnadiff.backbones.rcps import reverse_complement_ids
from dnadiff.errors import DnadiffError
from dnadiff.heads.saved import load_classifier_dir
from dnadiff.registry import Registry
from dnadiff.tokenizers.dna import DNATokenizer

TOK = DNATokenizer()
# name -> Reward class; each parses its own `name:arg` spec in `from_spec` (a new reward: one class
# here, or any `module:function` of the user's, which needs no registration)
REWARDS = Registry("reward")  # the rewards of this module


@dataclass(frozen=True)
class RewardCapabilities:
    """What a reward offers beyond `reward(x: Long[B, L]) -> Float[B]`, declared by its class (a `Reward`) or by
    any user object that has it, and read by `reward_capabilities`, the one place that looks: `name` (None:
    undeclared), a differentiable `soft(onehot)` (gradient guidance, saliency, DRAKES), `takes_time` (called as
    reward(x, t)), `noise_aware` (valid on masked states), a row counter `calls`, a strength `unit` (> 0)."""

    name: str | None = None
    soft: bool = False
    takes_time: bool = False
    noise_aware: bool = False
    counts_calls: bool = False
    unit: float | None = None


def reward_capabilities(reward: Callable) -> RewardCapabilities:
    """The one place a reward's optional capabilities are read (undeclared: absent)."""
    unit = getattr(reward, "unit", None)
    return RewardCapabilities(
        name=getattr(reward, "name", None),
        soft=callable(getattr(reward, "soft", None)),
        takes_time=bool(getattr(reward, "takes_time", False)),
        noise_aware=bool(getattr(reward, "noise_aware", False)),
        counts_calls=getattr(reward, "calls", None) is not None,
        unit=float(unit) if isinstance(unit, (int, float)) and unit > 0 else None,
    )


class Reward:
    """Base: `__call__(x) -> Float[B]` counts rows scored in `calls`; subclasses define `score`."""

    name = "reward"
    noise_aware = False  # True: trained on masked inputs (valid on noisy states x_t)
    spec_help = ""  # how its command-line spec is written, e.g. "gc | gc:TARGET"
    takes_target = False  # whether --target applies (a classifier's class)

    @classmethod
    def from_spec(cls, spec: str, arg: str | None, target=None, device="cpu") -> "Reward":
        """The reward of the spec `NAME` (arg None) or `NAME:arg`; one-line errors for bad specs."""
        raise NotImplementedError

    def __init__(self):
        self.calls = 0

    def strength_unit(self, length: int) -> float | None:
        """What one base substitution can change this reward by (`reward_unit`); None: unknown."""
        return None

    def soft_problem(self) -> str | None:
        """Why this reward's `soft(onehot)` cannot score relaxed input here (None: it can)."""
        return None

    def __call__(self, x: Tensor) -> Tensor:
        self.calls += int(x.shape[0])
        return self.score(x).double()

    def score(self, x: Tensor) -> Tensor:
        raise NotImplementedError


@REWARDS.register("gc")
class GC(Reward):
    """GC fraction over the L positions (target None), or -|GC - target| (closeness)."""

    spec_help = "gc | gc:TARGET"

    @classmethod
    def from_spec(cls, spec, arg, target=None, device="cpu"):
        if arg is None:
            return cls()
        try:
            value = float(arg)
        except ValueError:
            raise DnadiffError(f"--reward {spec}: the GC target must be a number in [0, 1]") from None
        if not (0.0 <= value <= 1.0) or math.isnan(value):
            raise DnadiffError(f"--reward {spec}: the GC target must be in [0, 1]")
        return cls(value)

    def __init__(self, target: float | None = None):
        super().__init__()
        self.target = target
        self.name = "gc" if target is None else f"gc:{target:g}"

    def strength_unit(self, length: int) -> float:
        return 1.0 / max(1, int(length))  # a fraction of L bases

    def score(self, x: Tensor) -> Tensor:
        gc = ((x == TOK.c_id) | (x == TOK.g_id)).double().mean(dim=1)  # (B,)
        return gc if self.target is None else -(gc - self.target).abs()

    def soft(self, onehot: Tensor) -> Tensor:
        gc = (onehot[..., TOK.c_id] + onehot[..., TOK.g_id]).mean(dim=1)
        return gc if self.target is None else -(gc - self.target).abs()


@REWARDS.register("motif")
class Motif(Reward):
    """Number of occurrences of `motif` on the forward strand plus those of its reverse complement
    (a palindromic motif counts twice per site: it sits on both strands)."""

    spec_help = "motif:SEQ"

    @classmethod
    def from_spec(cls, spec, arg, target=None, device="cpu"):
        if not arg:
            raise DnadiffError(f"--reward {spec}: give the motif, e.g. motif:TATAAA")
        return cls(arg.upper())

    def __init__(self, motif: str):
        super().__init__()
        self.name = f"motif:{motif}"
        ids = TOK.encode(motif, where="motif")
        if any(i not in TOK.nucleotide_ids for i in ids):
            raise DnadiffError(f"--reward motif:{motif}: only A, C, G, T are allowed in a motif")
        self.fwd = torch.tensor(ids)
        self.rev = torch.tensor(TOK.reverse_complement(ids))

    def strength_unit(self, length: int) -> float:
        return 1.0  # one occurrence

    def _count(self, x: Tensor, m: Tensor) -> Tensor:
        k = m.numel()
        if x.shape[1] < k:
            return torch.zeros(x.shape[0], dtype=torch.float64, device=x.device)
        win = x.unfold(1, k, 1)  # (B, L-k+1, k)
        return (win == m.to(x.device)).all(-1).double().sum(1)

    def score(self, x: Tensor) -> Tensor:
        return self._count(x, self.fwd) + self._count(x, self.rev)

    def soft(self, onehot: Tensor) -> Tensor:
        def count(m):
            k = m.numel()
            if onehot.shape[1] < k:
                return onehot.new_zeros(onehot.shape[0])
            probs = onehot[:, :, m.to(onehot.device)]  # (B, L, k): prob of the motif base j at each position
            idx = (torch.arange(onehot.shape[1] - k + 1, device=onehot.device)[:, None]
                   + torch.arange(k, device=onehot.device))
            j = torch.arange(k, device=onehot.device)
            return probs[:, idx, j].prod(-1).sum(-1)  # multilinear: equals the count at one-hot inputs

        return count(self.fwd) + count(self.rev)


class Function(Reward):
    """A user entry point `module:function`, called on Long[B, L] token ids."""

    def __init__(self, spec: str, fn: Callable):
        super().__init__()
        self.name, self.fn = spec, fn

    def score(self, x: Tensor) -> Tensor:
        out = torch.as_tensor(self.fn(x), dtype=torch.float64, device=x.device).reshape(-1)
        if out.shape[0] != x.shape[0]:
            raise DnadiffError(f"reward {self.name}: returned {out.shape[0]} values for {x.shape[0]} sequences")
        return out


@REWARDS.register("classifier")
class Classifier(Reward):
    """log p(y = target | x) of a fine-tuned classifier directory (`dnadiff finetune` OUT/classifier)."""

    spec_help = "classifier:DIR"
    takes_target = True

    @classmethod
    def from_spec(cls, spec, arg, target=None, device="cpu"):
        if not arg:
            raise DnadiffError(f"--reward {spec}: give the classifier directory, e.g. classifier:runs/ft/classifier")
        return cls(arg, target, device=device)

    def __init__(self, path: str, target: str | int | None, device: str | torch.device = "cpu", batch_size: int = 256):
        super().__init__()

        self.model, self.meta = load_classifier_dir(path, map_location=device)
        classes = [str(c) for c in self.meta.get("classes", [])]
        self.noise_aware = bool(self.meta.get("noisy", False))
        if target is None:
            target = classes[-1] if classes else 1  # binary benchmarks: the positive class is the last
        if isinstance(target, str) and not target.lstrip("-").isdigit():
            from dnadiff.data.class_names import class_position, known_names

            position = class_position(target, classes)  # a spelling or its alias (hESC / hESCT0)
            if position is None:
                raise DnadiffError(f"--target {target!r}: classifier {path} knows the classes {known_names(classes)}")
            target = position
        self.target = int(target)
        if not 0 <= self.target < int(self.meta["num_classes"]):
            raise DnadiffError(f"--target {target}: class index out of range 0..{int(self.meta['num_classes']) - 1}")
        self.name = (f"classifier:{os.path.basename(os.path.normpath(path))}"
                     f"[{classes[self.target] if classes else self.target}]")
        self.batch_size = int(batch_size)
        self.device = torch.device(device)

    def strength_unit(self, length: int) -> float:
        return 1.0  # nats of log-probability

    def soft_problem(self) -> str | None:
        if self.model.conjoin == "ps":
            return f"{self.name}: an RCPS (conjoin ps) classifier cannot take soft one-hot input"
        try:
            self._token_embedding()
        except DnadiffError as exc:
            return str(exc)
        return None

    def _token_embedding(self):
        for name, mod in self.model.backbone.named_modules():
            if isinstance(mod, torch.nn.Embedding) and "label" not in name and mod.num_embeddings >= TOK.vocab_size:
                return mod
        raise DnadiffError(f"{self.name}: no token embedding found; cg_grad cannot differentiate this classifier")

    def soft(self, onehot: Tensor) -> Tensor:
        """log p(target | onehot): the token embedding lookup replaced by onehot @ E (differentiable),
        strands averaged as the classifier does (post-hoc conjoining)."""
        if self.model.conjoin == "ps":
            raise DnadiffError(f"{self.name}: cg_grad does not support RCPS (conjoin ps) classifiers; use cg")
        emb = self._token_embedding()

        def strand(oh: Tensor) -> Tensor:
            ids = oh.argmax(-1).to(self.device)
            weights = torch.nn.functional.pad(oh, (0, emb.num_embeddings - oh.shape[-1])).to(self.device)

            def hook(module, inputs, output):
                if inputs[0] is ids:  # the backbone's lookup of these ids: make it linear in the one-hot
                    return (weights.to(module.weight.dtype) @ module.weight).to(output.dtype)
                return output

            handle = emb.register_forward_hook(hook)
            try:
                logits = self.model.strand_logits(ids)  # (B, C)
            finally:
                handle.remove()
            return logits.double().to(oh.device)

        logits = strand(onehot)
        if self.model.conjoin == "ph":  # logits averaged over the strands, as the classifier's forward
            perm = torch.as_tensor(TOK.complement_map(onehot.shape[-1]), device=onehot.device)
            logits = 0.5 * (logits + strand(onehot.flip(1)[..., perm]))
        return logits.log_softmax(-1)[:, self.target]

    @torch.no_grad()
    def score(self, x: Tensor) -> Tensor:
        outs = []
        for i in range(0, x.shape[0], self.batch_size):
            logits = self.model(x[i : i + self.batch_size].to(self.device)).double()  # (b, C)
            outs.append(logits.log_softmax(-1)[:, self.target].to(x.device))
        return torch.cat(outs)


class RCAveraged(Reward):
    """½ (r(x) + r(rc(x))): the reward of the RC-symmetric variants (mask ids stay masks)."""

    def __init__(self, reward: Callable, complement_ids=None):
        super().__init__()
        self.inner = reward
        declared = reward_capabilities(reward)
        self.name = f"rc({declared.name or 'reward'})"
        self.complement = torch.as_tensor(complement_ids if complement_ids is not None else TOK.complement_map())
        self.noise_aware = declared.noise_aware
        if declared.soft:
            self.soft = self._soft

    def score(self, x: Tensor) -> Tensor:
        rc = reverse_complement_ids(x, self.complement.to(x.device))
        return 0.5 * (self.inner(x).double() + self.inner(rc).double())

    def _soft(self, onehot: Tensor) -> Tensor:
        perm = self.complement.to(onehot.device)[: onehot.shape[-1]]
        return 0.5 * (self.inner.soft(onehot) + self.inner.soft(onehot.flip(1)[..., perm]))


def reward_unit(reward: Callable, length: int) -> float | None:
    """What one base substitution can change the reward by, the scale guidance strengths are set
    from (`dnadiff design`'s defaults): 1/L for gc and gc:T (a fraction of L bases), 1 for motif
    (one occurrence) and classifier (nats of log-probability); None when unknown (module:function).
    A tilt exp(r / unit) then weighs one better base by a factor e, where exp(r / 1) on a GC
    fraction would move nothing (a 200-bp GC differs by 0.005 per base)."""
    inner = reward.inner if isinstance(reward, RCAveraged) else reward
    declared = inner.strength_unit(length) if isinstance(inner, Reward) else None
    if declared is not None:
        return declared
    return reward_capabilities(inner).unit


def soft_support(reward: Callable) -> str | None:
    """None when `reward.soft(onehot)` can score relaxed one-hot input (gc, gc:T, motif, classifier
    without RCPS conjoining, their RC averages, user objects defining `soft`), else the reason."""
    inner = reward.inner if isinstance(reward, RCAveraged) else reward
    declared = reward_capabilities(reward)
    if not declared.soft:
        return f"{declared.name or 'the reward'} takes token ids only (it defines no soft(onehot))"
    return inner.soft_problem() if isinstance(inner, Reward) else None


def rc_averaged(reward: Callable, complement_ids=None) -> RCAveraged:
    return RCAveraged(reward, complement_ids)


def load_entry_point(spec: str) -> Callable:
    module, _, attr = spec.partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise DnadiffError(f"--reward {spec}: cannot import module {module!r} ({exc})") from None
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise DnadiffError(f"--reward {spec}: module {module!r} has no function {attr!r}")
    return fn


def reward_specs() -> str:
    """'classifier:DIR | gc | gc:TARGET | motif:SEQ | module:function': the specs the registry knows."""
    return " | ".join([*(REWARDS.get(n).spec_help for n in REWARDS.names()), "module:function"])


def build_reward(spec: str, target: str | int | None = None, device: str | torch.device = "cpu") -> Reward:
    """A Reward from its command-line spec (see the module docstring); one-line errors for bad specs."""
    spec = (spec or "").strip()
    kind, sep, arg = spec.partition(":")
    if not spec:
        raise DnadiffError(f"--reward: empty spec; use {reward_specs()}")
    cls = REWARDS.get(kind) if kind in REWARDS else None
    if target is not None and not (cls is not None and cls.takes_target):
        raise DnadiffError(f"--target applies to --reward classifier:DIR only, not {spec!r}")
    if cls is not None:
        return cls.from_spec(spec, arg if sep else None, target=target, device=device)
    if sep and kind and arg and all(p.isidentifier() for p in kind.split(".")) and arg.isidentifier():
        return Function(spec, load_entry_point(spec))
    raise DnadiffError(f"--reward {spec!r}: unknown reward; use {reward_specs()}")


__all__ = ["Reward", "RewardCapabilities", "reward_capabilities", "GC", "Motif", "Function", "Classifier",
           "RCAveraged", "rc_averaged", "build_reward", "reward_unit", "soft_support", "REWARDS", "reward_specs"]
