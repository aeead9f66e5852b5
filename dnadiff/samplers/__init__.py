"""Samplers for masked diffusion models: one class per file, one API (DESIGN.md §2).

    from dnadiff.samplers import build_sampler
    sampler = build_sampler("ancestral", steps=128)
    x = sampler.generate(denoiser, schedule, mask_id, (B, L), template=None, generator=g)
    sampler.last_nfe

Names: ancestral, cached, analytic, first_hitting, semi_ar, confidence, remdm.
Denoiser wrappers: `rc_symmetric(denoiser, complement_ids)`, `guided(cond, uncond, scale)`.
"""

from dnadiff.samplers.base import SAMPLERS, Sampler, draw_categorical, shape_probs
from dnadiff.samplers import ancestral as _ancestral  # noqa: F401  (registers)
from dnadiff.samplers import cached as _cached  # noqa: F401

for _mod in ("analytic", "first_hitting", "semi_ar", "confidence", "remdm"):
    try:
        __import__(f"dnadiff.samplers.{_mod}")
    except ModuleNotFoundError as _exc:  # pragma: no cover - while files are being added
        if _exc.name != f"dnadiff.samplers.{_mod}":
            raise

try:
    from dnadiff.samplers.wrappers import guided, rc_symmetric
except ModuleNotFoundError:  # pragma: no cover
    pass


def build_sampler(name: str = "ancestral", **options) -> Sampler:
    """`build_sampler("ancestral", steps=128, temperature=1.0, top_p=1.0, ...)`."""
    return SAMPLERS.build(name, **options)


__all__ = ["SAMPLERS", "Sampler", "build_sampler", "draw_categorical", "shape_probs", "guided", "rc_symmetric"]
