"""`cached`: ancestral sampling that reuses p_θ when nothing changed (MDLM §4.1, "caching").

With a time-independent denoiser, p_θ(x0 | x_t) depends only on x_t; when a step leaves every
sequence of the batch unchanged the next call would return the same output, so it is skipped.
With T steps and L tokens a step unmasks about L/T tokens per sequence, so the number of calls is
(steps at which some token changed) + 1. Time-conditioned denoisers disable the cache (then it
is plain ancestral sampling): pass `time_conditioned=False` for a model that ignores t, or give
the denoiser a `time_conditioned` attribute. Same generator, same samples as `ancestral`.
"""

from __future__ import annotations

from dnadiff.samplers.ancestral import AncestralSampler
from dnadiff.samplers.base import SAMPLERS


@SAMPLERS.register("cached")
class CachedSampler(AncestralSampler):
    """`build_sampler("cached", steps=1000, time_conditioned=False)`."""

    name = "cached"
    cache = True
