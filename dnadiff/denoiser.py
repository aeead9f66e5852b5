"""The denoiser contract, as types (the bottom layer: objectives, samplers, guidance, fine-tuning and the
model all speak it, and it imports nothing of theirs, not even torch at run time).

    denoiser(x_t: Long[B, L], t: Float[B]) -> logits Float[B, L, V]     raw logits; samplers apply SUBS
    denoiser.time_conditioned -> bool                                    False: the output ignores t

`Denoiser` is that protocol; `IncrementalDenoiser` adds cached decoding for causal models (the
`autoregressive` sampler feeds one token at a time instead of re-running the prefix):

    cache = denoiser.allocate_cache(batch_size, max_length)    # None: this denoiser cannot
    logits = denoiser.step(input_ids: Long[B], cache)          # Float[B, V] for the NEXT position

A bare function `(x_t, t) -> logits` is a denoiser too: `as_denoiser` gives it the declared default,
time-conditioned (a function may read t, so the output cache stays off for it). Wrappers derive from
`DenoiserWrapper`, which forwards `time_conditioned` and the incremental API of the wrapped denoiser;
a wrapper that changes the whole-sequence output (strand averaging, classifier-free guidance) sets
`forwards_steps = False`, since `step` would bypass what it does. `CountingDenoiser` is the one call
counter: the sampling loop and the guided methods wrap the model in it and read `calls` / `rows`.

A denoiser is a chain of layers (wrappers over the model's denoiser over the network); `chain_of` walks it and
`network_capabilities` reads what the chain declares (causal or not, attention mask, KV cache, guidance): block
diffusion chooses its layout and cache from it, plaid finds its network through it (diffusion/plaid_net.py).
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Protocol, runtime_checkable

if TYPE_CHECKING:
    from torch import Tensor


@runtime_checkable
class Denoiser(Protocol):
    """`(x_t: Long[B, L], t: Float[B]) -> logits Float[B, L, V]` with `time_conditioned`."""

    time_conditioned: bool

    def __call__(self, x_t: Tensor, t: Tensor) -> Tensor: ...


@runtime_checkable
class IncrementalDenoiser(Denoiser, Protocol):
    """A denoiser that may decode one position at a time (causal backbones that offer a cache)."""

    def allocate_cache(self, batch_size: int, max_length: int) -> Any | None: ...

    def step(self, input_ids: Tensor, cache: Any) -> Tensor: ...


@dataclass(frozen=True)
class BackboneCapabilities:
    """The optional capabilities a backbone (or a denoiser, or a module of one) declares, each by the class that
    has it: time conditioning (`Backbone.time_conditioned`), class labels (`ClassConditional.num_classes` > 0:
    labels, CFG; `takes_labels`: labels read by the network itself, no label embedding in front), a `cond`
    vector (`config.cond_dim` > 0), causal incremental decoding (`is_causal` with `allocate_cache` / `step`;
    `step_many`: a parallel pass over several tokens, Mamba's; a `step` taking `cond`), soft input
    (`takes_embeddings`: `inputs_embeds` instead of ids; `forward_soft(onehot, t)`: a denoiser fed the relaxed
    one-hot itself; `forward_onehot(w)`: a token lookup linear in a one-hot, RCPS's embedding), a longest input
    (`config.l_max` or `config.max_seq_len`). Block diffusion's (diffusion/bd3lm.py): an attention mask, position ids
    and a KV cache in forward (`takes_attn_mask`, the DiT's; `new_kv_cache()` makes the empty cache); a CFG wrapper's
    second model (`uncond`, samplers/wrappers.py Guided). Plaid's (diffusion/plaid_net.py): `plaid_predict`, and the
    layers it reaches its network through (`relays_network`: the call counter, a FunctionDenoiser, SuppressTokens'
    `banned` ids, an unlabelled model denoiser). Read by `capabilities_of`, the one place that looks (and, down a
    denoiser's chain, `network_capabilities`); nothing else probes a backbone or denoiser for them."""

    time_conditioned: bool = False
    num_classes: int = 0
    takes_labels: bool = False
    cond_dim: int = 0
    is_causal: bool = False
    incremental: bool = False  # allocate_cache and step exist (the cache may still be None: see the denoiser)
    step_many: bool = False
    step_takes_cond: bool = False
    takes_embeddings: bool = False
    forward_soft: bool = False
    forward_onehot: bool = False
    max_length: int | None = None  # the longest input (HyenaDNA's config.l_max, an imported max_seq_len); None: any
    declares_causal: bool = False  # is_causal declared at all (a bare function says nothing: NetworkCapabilities)
    takes_attn_mask: bool | None = None  # attn_mask / position_ids / kv_cache in forward (DiT); None: says nothing
    kv_cache: bool = False  # new_kv_cache(): the empty KV cache of such a network (DiT's DiTKVCache)
    guided: bool = False  # a CFG wrapper: two models (cond, uncond), so two caches
    plaid: bool = False  # plaid_predict(z, gamma, t, self_cond): a Plaid network
    suppressed: tuple[int, ...] = ()  # the token ids a SuppressTokens wrapper bans (its `banned`)
    relays_network: bool = False  # passes the wrapped network's logits on (plaid may reach through it; see above)

    @property
    def conditional(self) -> bool:
        return self.num_classes > 0


def _takes(method: Any, name: str) -> bool:
    """Whether a callable has a parameter `name` (a signature Python cannot read: no)."""
    if not callable(method):
        return False
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def capabilities_of(obj: Any) -> BackboneCapabilities:
    """The one place the optional capabilities of a backbone, denoiser or module are read (undeclared: absent)."""
    step = getattr(obj, "step", None)
    config = getattr(obj, "config", None)
    causal, attn_mask, banned = getattr(obj, "is_causal", None), getattr(obj, "takes_attn_mask", None), None
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported (none imported here)
    if torch is not None and isinstance(getattr(obj, "banned", None), torch.Tensor):  # SuppressTokens' ids
        banned = tuple(int(i) for i in obj.banned)
    model_denoiser = hasattr(obj, "backbone") and hasattr(obj, "time_input")  # model.py BackboneDenoiser
    return BackboneCapabilities(
        time_conditioned=bool(getattr(obj, "time_conditioned", False)),
        num_classes=int(getattr(obj, "num_classes", 0) or 0),
        takes_labels=bool(getattr(obj, "takes_labels", False)),
        cond_dim=int(getattr(config, "cond_dim", 0) or 0),
        is_causal=bool(causal),
        incremental=callable(getattr(obj, "allocate_cache", None)) and callable(step),
        step_many=callable(getattr(obj, "step_many", None)),
        step_takes_cond=_takes(step, "cond"),
        takes_embeddings=bool(getattr(obj, "takes_embeddings", False)),
        forward_soft=callable(getattr(obj, "forward_soft", None)),
        forward_onehot=callable(getattr(obj, "forward_onehot", None)),
        max_length=getattr(config, "l_max", None) or getattr(config, "max_seq_len", None),
        declares_causal=causal is not None,
        takes_attn_mask=None if attn_mask is None else bool(attn_mask),
        kv_cache=callable(getattr(obj, "new_kv_cache", None)),
        guided=getattr(obj, "uncond", None) is not None,
        plaid=callable(getattr(obj, "plaid_predict", None)),
        suppressed=banned or (),
        relays_network=(isinstance(obj, (CountingDenoiser, FunctionDenoiser)) or banned is not None
                        or (model_denoiser and getattr(obj, "labels", None) is None)),
    )


def chain_of(denoiser: Any, depth: int = 16) -> Iterator[Any]:
    """Each layer of a denoiser, outermost first: the denoiser, then what each layer wraps (a wrapper's `.denoiser`,
    else a model denoiser's or a network's `.backbone`, else a FunctionDenoiser's `.fn`), at most `depth` layers."""
    obj = denoiser
    for _ in range(depth):
        yield obj
        inner = getattr(obj, "denoiser", None) or getattr(obj, "backbone", None)
        if inner is None and isinstance(obj, FunctionDenoiser):
            inner = obj.fn
        if inner is None:
            return
        obj = inner


@dataclass(frozen=True)
class NetworkCapabilities:
    """What a denoiser's chain declares for block diffusion, each from the first layer that declares it:
    `is_causal` None when no layer says (a plain function: the stream layout, diffusion/bd3lm.py);
    `new_kv_cache` the network's empty KV cache factory (DiT), None without one; `guided`: a CFG wrapper
    is in the chain (two models: no shared cache)."""

    is_causal: bool | None = None
    takes_attn_mask: bool = False
    new_kv_cache: Callable[[], Any] | None = None
    guided: bool = False


def network_capabilities(denoiser: Any) -> NetworkCapabilities:
    """The capabilities of the network under a denoiser, down `chain_of` (through wrappers and the model's denoiser)."""
    causal, attn_mask, new_kv_cache, guided = None, None, None, False
    for layer in chain_of(denoiser):
        caps = capabilities_of(layer)
        if causal is None and caps.declares_causal:
            causal = caps.is_causal
        if attn_mask is None:
            attn_mask = caps.takes_attn_mask
        if new_kv_cache is None and caps.kv_cache:
            new_kv_cache = layer.new_kv_cache
        guided = guided or caps.guided
    return NetworkCapabilities(causal, bool(attn_mask), new_kv_cache, guided)


class FunctionDenoiser:
    """A bare callable `(x_t, t) -> logits` as a `Denoiser` with a declared `time_conditioned`."""

    def __init__(self, fn: Callable[[Tensor, Tensor], Tensor], time_conditioned: bool = True):
        self.fn = fn
        self.time_conditioned = bool(time_conditioned)

    def __call__(self, x_t: Tensor, t: Tensor) -> Tensor:
        return self.fn(x_t, t)


def as_denoiser(fn: Denoiser | Callable[[Tensor, Tensor], Tensor]) -> Denoiser:
    """`fn` itself when it declares `time_conditioned`, else `fn` as a time-conditioned FunctionDenoiser."""
    return fn if isinstance(fn, Denoiser) else FunctionDenoiser(fn)


class DenoiserWrapper:
    """Base of the denoiser wrappers: `self.denoiser` (set by the subclass, through `as_denoiser` when it
    may be a bare function) is the wrapped one; `time_conditioned`, `allocate_cache` and `step` forward to
    it. `forwards_steps = False`: no incremental decoding through this wrapper (allocate_cache -> None)."""

    denoiser: Denoiser
    forwards_steps: ClassVar[bool] = True

    @property
    def time_conditioned(self) -> bool:
        return bool(self.denoiser.time_conditioned)

    def allocate_cache(self, batch_size: int, max_length: int) -> Any | None:
        if not self.forwards_steps or not isinstance(self.denoiser, IncrementalDenoiser):
            return None
        return self.denoiser.allocate_cache(batch_size, max_length)

    def step(self, input_ids: Tensor, cache: Any) -> Tensor:
        return self.denoiser.step(input_ids, cache)

    def step_many(self, input_ids: Tensor, cache: Any, update: bool = True) -> Tensor:
        return steps_of(self.denoiser, input_ids, cache, update)


def fork_cache(cache: Any) -> Any:
    """A copy of a decoding cache (dicts, lists, tuples of tensors and numbers) that the original never sees."""
    if hasattr(cache, "clone"):
        return cache.clone()
    if isinstance(cache, dict):
        return {k: fork_cache(v) for k, v in cache.items()}
    if isinstance(cache, (list, tuple)):
        return type(cache)(fork_cache(v) for v in cache)
    return cache


def step_tokens(step: Callable[[Tensor, Any], Tensor], input_ids: Tensor, cache: Any, update: bool = True) -> Tensor:
    """Logits Float[B, n, V] after each of input_ids Long[B, n] by n `step` calls (on a fork of the cache when
    `update` is False, so the cache stays as it was)."""
    import torch

    state = cache if update else fork_cache(cache)
    return torch.stack([step(input_ids[:, j], state) for j in range(input_ids.shape[1])], dim=1)


def steps_of(denoiser: Any, input_ids: Tensor, cache: Any, update: bool = True) -> Tensor:
    """`step_many` of an incremental denoiser: its own (a backbone's parallel pass, e.g. Mamba's) when it has one,
    else one `step` per token. Block diffusion feeds stretches of tokens this way (samplers/block.py)."""
    if capabilities_of(denoiser).step_many:
        return denoiser.step_many(input_ids, cache, update)
    return step_tokens(denoiser.step, input_ids, cache, update)


class CountingDenoiser(DenoiserWrapper):
    """Counts the calls of the wrapped denoiser (the NFE), incremental `step` calls included, and the
    rows (sequences) pushed through it, summed over calls (guidance reports both)."""

    def __init__(self, denoiser: Denoiser | Callable[[Tensor, Tensor], Tensor],
                 on_call: Callable[[], None] | None = None):
        self.denoiser = as_denoiser(denoiser)
        self.calls = 0
        self.rows = 0
        self.on_call = on_call  # run after each call (dnadiff.sample's progress)

    def __call__(self, x_t: Tensor, t: Tensor) -> Tensor:
        out = self.denoiser(x_t, t)
        self._count(x_t)
        return out

    def step(self, input_ids: Tensor, cache: Any) -> Tensor:
        out = self.denoiser.step(input_ids, cache)
        self._count(input_ids)
        return out

    def _count(self, rows: Tensor) -> None:
        self.calls += 1
        self.rows += int(rows.shape[0])
        if self.on_call is not None:
            self.on_call()


__all__ = ["BackboneCapabilities", "CountingDenoiser", "Denoiser", "DenoiserWrapper", "FunctionDenoiser",
           "IncrementalDenoiser", "NetworkCapabilities", "as_denoiser", "capabilities_of", "chain_of", "fork_cache",
           "network_capabilities", "step_tokens", "steps_of"]
