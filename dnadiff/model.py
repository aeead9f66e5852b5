"""A trained model as users hold it: backbone + tokenizer + schedule + objective, rebuilt from a config.

    model = dnadiff.load("runs/tiny_dna_mdlm/model")
    x = model.generate(num=4, length=256, sampler="ancestral", steps=128)      # Long[4, 256]
    out = model.nll(x0, attention_mask)                                       # LossOutput

`model.denoiser(x_t, t)` is the callable that objectives and samplers take; it forwards the time
only to time-conditioned backbones, as σ(t) = -log α(t) (`model.time_input: sigma`, the MDLM
reference's `sigma` conditioning) or as t itself (`time_input: t`, model directories saved before
the field existed). Backbones never see the schedule: the conversion happens here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor, nn

from dnadiff import modelio
from dnadiff.config import RunConfig
from dnadiff.denoiser import CountingDenoiser, DenoiserWrapper, as_denoiser, capabilities_of, step_tokens, steps_of
from dnadiff.diffusion import OBJECTIVES, build_objective, build_schedule
from dnadiff.diffusion.subs import NEG_INF
from dnadiff.errors import DnadiffError
from dnadiff.modelio.model_dir import resolve_time_input
from dnadiff.samplers import SAMPLERS, guided
from dnadiff.samplers import rc_symmetric as _rc
from dnadiff.samplers.base import Sampler
from dnadiff.sampling import resolve_sampler


def sigma_of(schedule, t: Tensor) -> Tensor:
    """σ(t) = -log α(t) = -log1p(-(1 - α)), in float64 from the cancellation-free 1 - α; returned in t's
    dtype. 1 - α is kept below 1 - 1e-9 so that a schedule with α(1) = 0 (eps = 0) gives a finite
    σ(1) ≈ 20.7 rather than inf (the reference never meets it: its eps is 1e-3, σ(1) = 6.9)."""
    m = schedule.mask_prob(t.double()).clamp(0.0, 1.0 - 1e-9)
    return (-torch.log1p(-m)).to(t.dtype)


class BackboneDenoiser(nn.Module):
    """The model's denoiser: denoiser(x_t: Long[B, L], t: Float[B]) -> logits Float[B, L, V] over a backbone,
    meeting the `Denoiser` protocol (dnadiff/denoiser.py, the one class of that name) and its
    `IncrementalDenoiser` form (allocate_cache -> None when the backbone cannot). `model.Denoiser` is an
    old name of this class, kept for imports.

    time_input "sigma" (with a schedule): a time-conditioned backbone gets σ(t); "t": t itself."""

    def __init__(self, backbone: nn.Module, labels: Tensor | int | None = None, schedule=None,
                 time_input: str = "t"):
        super().__init__()
        if time_input not in ("sigma", "t"):
            raise DnadiffError(f"time_input must be sigma or t, got {time_input!r}")
        if time_input == "sigma" and schedule is None:
            raise DnadiffError("a denoiser fed sigma needs the schedule")
        self.backbone = backbone
        self.capabilities = capabilities_of(backbone)  # what it declares, read once (dnadiff/denoiser.py)
        self.labels = labels  # class-conditional backbones: Long[B], one int, or None (= null label)
        self.schedule = schedule
        self.time_input = time_input

    @property
    def time_conditioned(self) -> bool:
        return self.capabilities.time_conditioned

    def forward(self, x_t: Tensor, t: Tensor | None = None, attention_mask: Tensor | None = None, **arch) -> Tensor:
        """`attention_mask` (optional, right-padded batch): the backbone ignores the pads, so a row's
        logits do not depend on the batch's padding (backbones/base.py). `arch`: architecture options of
        backbones that take them (DiT's attn_mask, position_ids, kv_cache: block diffusion)."""
        t_in = None
        if self.time_conditioned and t is not None:
            t_in = sigma_of(self.schedule, torch.as_tensor(t, device=x_t.device)) if self.time_input == "sigma" else t
        kw = {**arch} if attention_mask is None else {"attention_mask": attention_mask, **arch}
        if self.capabilities.conditional:
            return self.backbone(x_t, t_in, labels=self.labels, **kw)
        return self.backbone(x_t, t_in, **kw)

    # incremental decoding (causal backbones that offer it; see dnadiff/samplers/autoregressive.py)
    def allocate_cache(self, batch_size: int, max_length: int):
        caps = self.capabilities
        if not caps.incremental or not caps.is_causal or caps.time_conditioned:
            return None
        # class-conditional (ClassConditional): None unless its step takes labels
        return self.backbone.allocate_cache(batch_size, max_length)

    def step(self, input_ids: Tensor, cache) -> Tensor:
        if self.capabilities.conditional:
            return self.backbone.step(input_ids, cache, labels=self.labels)
        return self.backbone.step(input_ids, cache)

    def step_many(self, input_ids: Tensor, cache, update: bool = True) -> Tensor:
        """Float[B, n, V] after each of n tokens (dnadiff/denoiser.py `steps_of`): the backbone's parallel pass
        when it has one (Mamba), else one step per token."""
        if self.capabilities.step_many and not self.capabilities.conditional:
            return self.backbone.step_many(input_ids, cache, update)
        return step_tokens(self.step, input_ids, cache, update)


class SuppressTokens(DenoiserWrapper, nn.Module):
    """Denoiser wrapper that gives `banned_ids` a large negative logit (never generated); forwards
    `time_conditioned` and incremental decoding (`step` output suppressed too).

    DNA models never generate specials or N (N is not scored in training, so its logit is
    untrained); text models never generate [PAD]."""

    def __init__(self, denoiser: nn.Module, banned_ids: list[int]):
        nn.Module.__init__(self)
        self.denoiser = as_denoiser(denoiser)
        self.banned = torch.tensor(sorted(set(banned_ids)), dtype=torch.long)

    def _suppress(self, logits: Tensor) -> Tensor:
        logits = logits.clone()
        logits[..., self.banned.to(logits.device)] = NEG_INF
        return logits

    def forward(self, x_t: Tensor, t: Tensor | None = None, **kw) -> Tensor:
        return self._suppress(self.denoiser(x_t, t, **kw))  # kw: attention_mask when the caller has one

    def step(self, input_ids: Tensor, cache) -> Tensor:
        return self._suppress(self.denoiser.step(input_ids, cache))  # (B, V)

    def step_many(self, input_ids: Tensor, cache, update: bool = True) -> Tensor:
        return self._suppress(steps_of(self.denoiser, input_ids, cache, update))  # (B, n, V)


def objective_kwargs(cfg: RunConfig, tokenizer) -> dict[str, Any]:
    """Keyword arguments of build_objective for a run config and its tokenizer (the objective declares them)."""
    return OBJECTIVES.get(cfg.objective.name).kwargs_for(cfg, tokenizer)


def build_objective_for(cfg: RunConfig, tokenizer):
    schedule = build_schedule(cfg.schedule.name, eps=cfg.schedule.eps)
    return schedule, build_objective(cfg.objective.name, schedule=schedule, **objective_kwargs(cfg, tokenizer))


class ModelSpec:
    """A model without its network: config + tokenizer + schedule + objective, all that choosing and building a
    sampler reads (dnadiff/sampling.py `resolve_sampler`): `dnadiff sample` resolves its sampler from this before
    any weights load (commands/request.py `Request.model_spec`)."""

    def __init__(self, config: RunConfig, tokenizer):
        self.config = config
        self.tokenizer = tokenizer
        self.schedule, self.objective = build_objective_for(config, tokenizer)

    @property
    def is_autoregressive(self) -> bool:
        return bool(self.objective.autoregressive)

    def sampler_defaults(self, name: str) -> dict[str, Any]:
        """Options a sampler gets from this model (its `defaults_from`: the training t_min as the
        smallest time; AR's free first token among the real tokens)."""
        cls = SAMPLERS.get(name) if name in SAMPLERS else Sampler
        return cls.defaults_from(self)

    @property
    def sampling_eps(self) -> float:
        """Smallest sampling time: the training t_min recorded in the model directory."""
        t_min = float(self.config.objective.t_min or 0.0)
        return t_min if t_min > 0 else 1e-5


class DiffusionModel(ModelSpec):
    """Backbone + tokenizer + schedule + objective (plain PyTorch; no Lightning)."""

    def __init__(self, config: RunConfig, backbone: nn.Module, tokenizer):
        super().__init__(config, tokenizer)
        self.backbone = backbone
        self.time_input = resolve_time_input(config.model.time_input)
        self.denoiser = self.make_denoiser()
        if backbone.vocab_size != tokenizer.vocab_size:
            raise DnadiffError(
                f"model vocab_size {backbone.vocab_size} does not match the tokenizer's {tokenizer.vocab_size}"
            )

    def make_denoiser(self, labels: Tensor | int | None = None) -> BackboneDenoiser:
        """The denoiser over this model's backbone (with class labels for a class-conditional one)."""
        return BackboneDenoiser(self.backbone, labels=labels, schedule=self.schedule, time_input=self.time_input)

    @property
    def max_length(self) -> int | None:
        """The longest sequence the network takes (HyenaDNA's `l_max`, an imported config's `max_seq_len`);
        None: any length. Samplers that declare `any_length` go past it (windows)."""
        return capabilities_of(self.backbone).max_length

    def to(self, device) -> "DiffusionModel":
        self.backbone.to(device)
        return self

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    def save_pretrained(self, path) -> "Path":
        """Write this model as a dnadiff model directory (config.json + model.safetensors ...):
        an imported official checkpoint becomes a plain dnadiff directory."""
        return modelio.save(self, path)

    def push_to_hub(self, repo_id: str, **kwargs: Any):
        """Upload to the Hugging Face Hub (modelio.push, modelio/push.py: private, token, commit_message, revision)."""
        return modelio.push(self, repo_id, **kwargs)

    @torch.no_grad()
    def nll(self, x0: Tensor, attention_mask: Tensor | None = None, generator: torch.Generator | None = None):
        """The objective's bound (or exact NLL for AR) on a batch: LossOutput(loss, nll[B], num_tokens[B])."""
        was_training = self.backbone.training
        self.backbone.eval()
        try:
            x0 = x0.to(self.device)
            mask = attention_mask.to(self.device) if attention_mask is not None else None
            return self.objective.loss(self.denoiser, x0, mask, generator=generator)
        finally:
            self.backbone.train(was_training)

    @torch.no_grad()
    def generate(
        self,
        num: int,
        length: int,
        sampler: str | None = None,
        steps: int | None = None,
        template: Tensor | None = None,
        generator: torch.Generator | None = None,
        return_sampler: bool = False,
        label: int | str | None = None,
        guidance: float = 0.0,
        rc_symmetric: bool = False,
        on_call: Callable[..., None] | None = None,
        **options: Any,
    ):
        """Sample `num` sequences of `length` tokens -> Long[num, length] (and the sampler if asked).
        `sampler`: a registered name (built with `steps` and `options`), or an object already built with
        the sampler call `generate(denoiser, schedule, mask_id, shape, template, generator)` (a Sampler,
        a guidance method of dnadiff/guidance/).

        Class-conditional models: `label` (index or class name) and a classifier-free guidance
        scale (0 = plain conditional sampling; no label = the unconditional model). `on_call()` runs after
        every call of the denoiser the sampler is given (dnadiff.sample's progress)."""
        was_training = self.backbone.training
        self.backbone.eval()
        try:
            return self._generate(num, length, sampler, steps, template, generator, return_sampler, label, guidance,
                                  rc_symmetric, on_call, options)
        finally:
            self.backbone.train(was_training)

    def _generate(self, num, length, sampler, steps, template, generator, return_sampler, label, guidance,
                  rc_symmetric, on_call, options):
        smp = resolve_sampler(self, sampler, steps, **options)  # a built one (dnadiff.sample, design) as it is
        # uniform noise (udlm) guides at the posterior level (D-CFG): the sampler gets the unconditional model
        posterior_cfg = label is not None and guidance != 0.0 and smp.posterior_cfg  # declared by the sampler
        denoiser = self.conditional_denoiser(label, 0.0 if posterior_cfg else guidance)
        uncond = self.conditional_denoiser(None) if posterior_cfg else None
        if rc_symmetric:
            if self.is_autoregressive or getattr(self.tokenizer, "kind", "dna") != "dna":
                raise DnadiffError("RC-symmetric sampling needs a bidirectional DNA model")

            denoiser = _rc(denoiser, self.tokenizer.complement_map(), mask_id=self.tokenizer.mask_id)
            uncond = uncond if uncond is None else _rc(uncond, self.tokenizer.complement_map(),
                                                       mask_id=self.tokenizer.mask_id)
        if uncond is not None:
            smp.with_cfg(SuppressTokens(uncond, self.banned_ids()), 1.0 + guidance)
        # Samplers put their state where the template and generator live: keep both on the model's device.
        if template is None:
            template = torch.full((num, length), self.tokenizer.mask_id, dtype=torch.long)
        if isinstance(generator, torch.Generator) and torch.device(generator.device).type != self.device.type:
            generator = torch.Generator(device=self.device).manual_seed(generator.initial_seed())
        template = template.to(self.device)
        denoiser = SuppressTokens(denoiser, self.banned_ids())
        if on_call is not None:  # the run's one call counter (dnadiff/sampling.py: progress, statistics)
            denoiser = CountingDenoiser(denoiser, on_call=on_call)
        x = smp.generate(denoiser, self.schedule, self.tokenizer.mask_id, (num, length), template=template,
                         generator=generator)
        return (x, smp) if return_sampler else x

    def build_sampler(self, sampler: str | None = None, steps: int | None = None, **options: Any):
        """The sampler for this model (dnadiff/sampling.py `resolve_sampler`: the one place a name becomes a
        sampler): `sampler` (default: the objective's, e.g. `autoregressive` for AR models, else the
        config's) with the config's options, then `options`, then this model's defaults."""
        return resolve_sampler(self, sampler, steps, **options)

    def conditional_denoiser(self, label: int | str | None, guidance: float = 0.0):
        num_classes = self.denoiser.capabilities.num_classes
        if not num_classes:
            if label is not None:
                raise DnadiffError("this model is not class-conditional (trained without labels)")
            return self.denoiser
        if label is None:
            return self.make_denoiser(labels=None)
        names = list(self.config.model.class_names)
        if isinstance(label, str) and not label.lstrip("-").isdigit():
            from dnadiff.data.class_names import class_position, known_names

            position = class_position(label, names)  # hESC or hESCT0, whichever the model recorded
            if position is None:
                raise DnadiffError(f"unknown class {label!r}; this model knows: {known_names(names)}")
            label = position
        label = int(label)
        if not 0 <= label < num_classes:
            raise DnadiffError(f"class index {label} out of range 0..{num_classes - 1}")
        cond = self.make_denoiser(labels=label)
        if guidance == 0.0:
            return cond

        return guided(cond, self.make_denoiser(labels=None), guidance, mask_id=self.tokenizer.mask_id)

    def banned_ids(self) -> list[int]:
        """Token ids a sampler must never produce (the tokenizer's `never_sampled_ids`)."""
        return list(self.tokenizer.never_sampled_ids)

    def decode(self, ids: Tensor) -> list[str]:
        return [self.tokenizer.decode(row) for row in ids]

    def backbone_config(self) -> dict[str, Any]:
        return dataclasses.asdict(self.backbone.config)


Denoiser = BackboneDenoiser  # the old name (tests and users import it); the protocol is dnadiff.denoiser.Denoiser

__all__ = ["BackboneDenoiser", "DiffusionModel", "ModelSpec", "SuppressTokens", "build_objective_for", "sigma_of"]
