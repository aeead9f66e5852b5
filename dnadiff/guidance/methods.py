"""The guidance methods by name (`dnadiff design --method`), and the unguided reference row.

    method = build_method("svdd", sampler, reward, candidates=8, alpha=0.0)
    x = method.generate(denoiser, schedule, mask_id, (B, L), template, generator=seed)
    method.last_stats, method.last_rewards

Names: none (the sampler alone, rewards only scored), best_of_n (n), svdd (candidates, alpha),
smc (particles, alpha, ess_threshold, output), cg / cg_grad (scale, token_ids).
"""

from __future__ import annotations

from dnadiff.errors import DnadiffError
from dnadiff.guidance.best_of_n import BestOfN
from dnadiff.guidance.classifier_guidance import ClassifierGuidance
from dnadiff.guidance.common import GuidedMethod
from dnadiff.guidance.smc import SMC
from dnadiff.guidance.svdd import SVDD


class Unguided(GuidedMethod):
    """The wrapped sampler alone (a reference row: same counters, rewards of its samples)."""

    name = "none"

    def _generate(self, denoiser, schedule, mask_id, x, stream):
        state = self.sampler.run(denoiser, schedule, mask_id, x, stream)
        return state.x, state.step


METHODS = {
    "none": (Unguided, ()),
    "best_of_n": (BestOfN, ("n",)),
    "svdd": (SVDD, ("candidates", "alpha")),
    "smc": (SMC, ("particles", "alpha", "ess_threshold", "output")),
    "cg": (ClassifierGuidance, ("scale", "token_ids")),
    "cg_grad": (ClassifierGuidance, ("scale", "token_ids")),
}


def build_method(name: str, sampler, reward, **options) -> GuidedMethod:
    if name not in METHODS:
        raise DnadiffError(f"--method {name!r}: unknown; choose from {', '.join(METHODS)}")
    cls, allowed = METHODS[name]
    bad = sorted(set(options) - set(allowed))
    if bad:
        raise DnadiffError(f"--method {name}: unknown option(s) {', '.join(bad)}; it takes {', '.join(allowed) or 'none'}")
    if name == "cg_grad":
        options["gradient"] = True
    return cls(sampler, reward, **options)


__all__ = ["METHODS", "Unguided", "build_method"]
