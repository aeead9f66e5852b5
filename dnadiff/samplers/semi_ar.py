"""`semi_ar`: semi-autoregressive generation of any length (MDLM §4.2, "Semi-AR").

Rounds of a length-`window` (L) diffusion window: the first round samples a full window; every
later round keeps the last `window - stride` tokens generated so far as a clean prefix, fills the
next `stride` (L′ < L) positions with the inner sampler (run to t = 0) and appends them. The last
round may add fewer than L′ tokens (its window is then still L long: a longer prefix). The result
has the requested length `shape[1]`, which may exceed the model's training length.

Options: `inner` (a sampler name) and `inner_options` (its options; the shared temperature/top_p
etc. given here are passed on unless set there), `window`, `stride`. A `template` of the full
length fixes tokens anywhere; each window sees its slice. NFE = sum of the inner samplers' calls
(per sequence: summed over windows); `last_steps` = the inner loops' steps, summed over windows.
It runs the inner sampler's loop (base.py) per window instead of defining a `step`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import SAMPLERS, CompositeSampler, SamplerState

_SHARED = ("temperature", "top_p", "eps", "noise_removal", "float32_draws", "time_conditioned", "cache")


@SAMPLERS.register("semi_ar")
class SemiARSampler(CompositeSampler):
    """`build_sampler("semi_ar", inner="ancestral", inner_options={"steps": 128}, window=1024, stride=512)`."""

    name = "semi_ar"
    any_length = True

    def __init__(
        self,
        steps: int = 128,
        *,
        inner: str = "ancestral",
        inner_options: dict | None = None,
        window: int = 1024,
        stride: int = 512,
        **options,
    ):
        super().__init__(steps, **options)
        if inner == "semi_ar":
            raise DnadiffError("sampler 'semi_ar': inner sampler cannot be semi_ar")
        if not 0 < int(stride) < int(window):
            raise DnadiffError(f"sampler 'semi_ar': need 0 < stride < window, got stride={stride}, window={window}")
        self.window, self.stride = int(window), int(stride)
        opts = {"steps": steps}  # first_hitting accepts and ignores it
        opts.update({k: v for k, v in options.items() if k in _SHARED})
        opts.update(inner_options or {})
        self.inner = SAMPLERS.build(inner, **opts)

    def progress_steps(self, length: int) -> int:
        """The inner loops' steps over a sequence of `length` tokens: one window, then one per `stride` new
        tokens; a step-less inner sampler (first_hitting, ordered) makes one call per token."""
        if not self.inner.has_steps:
            return length
        return self.inner.steps * (1 + -(-max(0, length - self.window) // self.stride))

    def run(self, denoiser, schedule, mask_id: int, x: Tensor, rng) -> SamplerState:
        """Composite: the inner sampler's loop once per window (window k draws from rng.child(k))."""
        B, total = x.shape
        first = min(self.window, total)
        state = self.inner.run(denoiser, schedule, mask_id, x[:, :first].clone(), rng.child(0))
        out, steps, nfe, done, k = state.x, state.step, state.nfe, first, 0
        while done < total:
            k += 1
            new = min(self.stride, total - done)
            start = max(done + new - self.window, 0)  # window = [start, done + new)
            win = torch.cat([out[:, start:done], x[:, done : done + new]], dim=1)  # clean prefix + template slice
            state = self.inner.run(denoiser, schedule, mask_id, win, rng.child(k))
            out = torch.cat([out, state.x[:, done - start :]], dim=1)
            steps += state.step
            nfe = _add(nfe, state.nfe)
            done += new
        return SamplerState(x=out, fixed=x != mask_id, mask_id=mask_id, step=steps, nfe=nfe, done=True)


def _add(a: Tensor | None, b: Tensor | None) -> Tensor | None:
    """Per-row NFE summed over windows (None: a window made no call)."""
    return b if a is None else a if b is None else a + b
