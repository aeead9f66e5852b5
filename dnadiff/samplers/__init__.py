"""Samplers for masked diffusion models: one class per file, one API (DESIGN.md §2).

    from dnadiff.samplers import build_sampler
    sampler = build_sampler("ancestral", steps=128)
    x = sampler.generate(denoiser, schedule, mask_id, (B, L), template=None, generator=g)
    sampler.last_nfe

Names: ancestral, cached, analytic, first_hitting, semi_ar, confidence, remdm (see each file for
its options; base.py for the shared ones). Denoiser wrappers: `rc_symmetric(denoiser,
complement_ids, mask_id)` (strand-averaged predictions) and `guided(cond, uncond, scale, mask_id)`
(classifier-free guidance).
"""

from dnadiff.samplers import analytic, ancestral, cached, confidence, first_hitting, remdm, semi_ar  # noqa: F401
from dnadiff.samplers.base import SAMPLERS, Sampler, draw_categorical, shape_probs
from dnadiff.samplers.wrappers import guided, rc_symmetric


def build_sampler(name: str = "ancestral", **options) -> Sampler:
    """`build_sampler("ancestral", steps=128, temperature=1.0, top_p=1.0, ...)`."""
    return SAMPLERS.build(name, **options)


__all__ = ["SAMPLERS", "Sampler", "build_sampler", "draw_categorical", "shape_probs", "guided", "rc_symmetric"]
