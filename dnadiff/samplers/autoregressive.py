"""`autoregressive`: left-to-right sampling for AR models (causal backbones trained with `ar`).

Same call and loop as the diffusion samplers (base.py); `schedule` is unused and `mask_id` marks
the free positions of the template (fixed tokens are kept: prefix conditioning). Step i fills
position i. With `bos_id` (models trained with the `ar` objective's [BOS] context, diffusion/ar.py)
the model reads [BOS] + the sequence, so input position i predicts token i and the first token is
drawn from p(x_0 | [BOS]). Without it, position i-1's logits predict token i; the `ar` objective
then never modelled position 0 (it is context), so a free first token is drawn uniformly from
`first_token_ids` (e.g. the four bases; `DiffusionModel.generate` passes the tokenizer's); give a
prefix to condition it instead.

Decoding cache (`use_cache=True`, default): when the denoiser offers the incremental API
(`allocate_cache(batch_size, max_length)` and `step(input_ids: Long[B], cache) -> Float[B, V]`,
implemented by the causal backbones: Mamba's recurrent conv + SSM state, HyenaDNA's and DiT's
caches), each step feeds only the new token(s) instead of re-running the prefix: O(1) (Mamba) or
O(L) (Hyena, DiT) work per token instead of O(L) / O(L²). `model_output` advances the cache held
in `state.extra["cache"]` (the only mutable part of the state: a buffer, like a KV cache). NFE
counts network evaluations: full forwards, or single-token `step` calls. Without the API (or
with `use_cache=False`) every step re-runs the whole sequence; both give the same tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.denoiser import IncrementalDenoiser
from dnadiff.diffusion.ar import ar_inputs
from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import SAMPLERS, Sampler, SamplerState, StepRandom, shape_probs


@SAMPLERS.register("autoregressive")
class AutoregressiveSampler(Sampler):
    """`build_sampler("autoregressive", first_token_ids=[7, 8, 9, 10], use_cache=True)`; `steps` unused."""

    name = "autoregressive"
    has_steps = False
    has_time = False
    autoregressive = True
    guidable = False
    model_options = ("first_token_ids",)

    @classmethod
    def defaults_from(cls, model) -> dict:
        """A free first token among the real tokens; the objective's context token."""
        return {"first_token_ids": list(model.tokenizer.content_ids), "bos_id": model.objective.bos_id}

    def __init__(self, steps: int = 1, *, first_token_ids: list[int] | None = None, use_cache: bool = True,
                 bos_id: int | None = None, **options):
        super().__init__(1, **options)
        if self.cache:
            raise DnadiffError("sampler 'autoregressive': the cache option is for masked diffusion samplers "
                               "(decoding reuses its state through use_cache)")
        self.first_token_ids = None if first_token_ids is None else [int(i) for i in first_token_ids]
        self.use_cache = bool(use_cache)
        self.bos_id = None if bos_id is None else int(bos_id)

    def init_state(self, denoiser, schedule, mask_id: int, x: Tensor) -> SamplerState:
        B, L = x.shape
        cache = None
        if self.use_cache:
            cache = denoiser.allocate_cache(B, L) if isinstance(denoiser, IncrementalDenoiser) else None
        return SamplerState(x=x, fixed=x != mask_id, mask_id=int(mask_id), t=torch.zeros(B, device=x.device),
                            extra={"cache": cache, "fed": 0})

    def max_steps(self, state: SamplerState) -> int:
        return state.x.shape[1]

    def model_time(self, state: SamplerState) -> Tensor | None:
        i = state.step
        if (i == 0 and self.bos_id is None) or bool(state.fixed[:, i].all()):
            return None
        return state.t

    def model_output(self, denoiser, state: SamplerState, t: Tensor) -> Tensor:
        """Float[B, V]: logits for position state.step given tokens [0, step)."""
        i, cache, x = state.step, state.extra["cache"], state.x
        if self.bos_id is not None:  # the model reads [BOS] + x (L tokens, as in training)
            x = ar_inputs(x, self.bos_id)  # (B, L)
            i = i + 1  # input position i predicts token i: feed inputs [0, i]
        if cache is None:
            logits = self.denoise_call(denoiser, x, t)[:, i - 1]  # (B, V): the whole prefix re-run
        else:
            while state.extra["fed"] < i:  # feed the tokens the cache has not seen (fixed ones included)
                logits = denoiser.step(x[:, state.extra["fed"]], cache)  # (B, V)
                state.extra["fed"] += 1
        for hook in self.guidance:
            logits = hook(state, logits)
        return logits

    def step(self, state: SamplerState, logits: Tensor | None, rng: StepRandom) -> SamplerState:
        i, x = state.step, state.x
        L = x.shape[1]
        free = ~state.fixed[:, i]
        if bool(free.any()):
            if i == 0 and self.bos_id is None:
                if not self.first_token_ids:
                    raise DnadiffError("sampler 'autoregressive': a free first token needs first_token_ids or a prefix")
                ids = torch.tensor(self.first_token_ids, device=x.device)
                tok = ids[rng.randint(len(ids)).to(x.device)]
            else:
                src = logits.float().log_softmax(-1)  # (B, V)
                src[..., state.mask_id] = -float("inf")
                tok = rng.categorical(shape_probs(src, self.temperature, self.top_p))
            x = x.clone()
            x[:, i] = torch.where(free, tok, x[:, i])
        return state.replace(x=x, step=i + 1, done=i + 1 >= L)

    def finish(self, denoiser, state, rng):
        return state  # every position is filled


__all__ = ["AutoregressiveSampler"]
