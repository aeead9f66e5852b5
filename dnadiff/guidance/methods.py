"""The guidance methods by name (`dnadiff design --method`), and the unguided reference row.

    method = build_method("svdd", sampler, reward, candidates=8, alpha=0.0)
    x = method.generate(denoiser, schedule, mask_id, (B, L), template, generator=seed)
    method.last_stats, method.last_rewards

Names: none (the sampler alone, rewards only scored), best_of_n (n), svdd (candidates, alpha),
smc (particles, alpha, ess_threshold, output), cg / cg_grad (scale, token_ids).
"""

from __future__ import annotations

from typing import Any

from dnadiff.errors import DnadiffError
from dnadiff.guidance.common import METHODS, GuidedMethod


@METHODS.register("none")
class Unguided(GuidedMethod):
    """The wrapped sampler alone (a reference row: same counters, rewards of its samples)."""

    name = "none"

    def _generate(self, denoiser, schedule, mask_id, x, stream):
        state = self.sampler.run(denoiser, schedule, mask_id, x, stream)
        return state.x, state.step


_NOT_OPTIONS = ("sampler", "reward")


def check_method_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """`--option` values checked against the method's typed options (an unknown key or a wrong type
    is one line listing the valid ones) and converted to their types."""
    if name not in METHODS:
        raise DnadiffError(f"--method {name!r}: unknown; choose from {', '.join(METHODS.names())}")
    return METHODS.check_options(name, options, "--option", sep=" ", exclude=_NOT_OPTIONS, label=f"--method {name}")


def build_method(name: str, sampler, reward, **options) -> GuidedMethod:
    return METHODS.get(name)(sampler, reward, **check_method_options(name, options))


__all__ = ["METHODS", "Unguided", "build_method", "check_method_options"]
