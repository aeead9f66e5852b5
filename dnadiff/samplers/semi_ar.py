"""`semi_ar`: semi-autoregressive generation of any length (MDLM §4.2, "Semi-AR").

Rounds of a length-`window` (L) diffusion window: the first round samples a full window; every
later round keeps the last `window - stride` tokens generated so far as a clean prefix, fills the
next `stride` (L′ < L) positions with the inner sampler (run to t = 0) and appends them. The last
round may add fewer than L′ tokens (its window is then still L long: a longer prefix). The result
has the requested length `shape[1]`, which may exceed the model's training length.

Options: `inner` (a sampler name) and `inner_options` (its options; the shared temperature/top_p
etc. given here are passed on unless set there), `window`, `stride`. A `template` of the full
length fixes tokens anywhere; each window sees its slice. NFE = sum of the inner samplers' calls.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import SAMPLERS, Sampler

_SHARED = ("temperature", "top_p", "eps", "noise_removal", "float32_draws", "time_conditioned")


@SAMPLERS.register("semi_ar")
class SemiARSampler(Sampler):
    """`build_sampler("semi_ar", inner="ancestral", inner_options={"steps": 128}, window=1024, stride=512)`."""

    name = "semi_ar"

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
        opts = {"steps": steps}
        opts.update({k: v for k, v in options.items() if k in _SHARED})
        opts.update(inner_options or {})
        from dnadiff.samplers import build_sampler

        self.inner = build_sampler(inner, **opts)

    def _generate(self, denoiser, schedule, mask_id: int, x: Tensor, generator) -> Tensor:
        B, total = x.shape
        first = min(self.window, total)
        out = self.inner._generate(denoiser, schedule, mask_id, x[:, :first].clone(), generator)
        done = first
        while done < total:
            new = min(self.stride, total - done)
            start = done + new - self.window  # window = [start, done + new)
            start = max(start, 0)
            win = torch.cat([out[:, start:done], x[:, done : done + new]], dim=1)  # clean prefix + template slice
            win = self.inner._generate(denoiser, schedule, mask_id, win, generator)
            out = torch.cat([out, win[:, done - start :]], dim=1)
            done += new
        return out
