"""Guidance strengths from the reward's range, and exact classifier guidance's cost.

    default_strength("smc", reward, length, options, spec)   # sets options["alpha"] when unset
    cg_rows_per_design(schedule, sampler, num_tokens=4, free=200)

A reward's unit (rewards.reward_unit) is what one base substitution can change it by. A fixed
strength ignores it: SMC's target p·exp(r/α) with α = 1 and a GC fraction in [0, 1] reweights a
200-bp sequence by e^0.005 per base, i.e. leaves the sampler unguided (GC 0.453 vs 0.45 unguided on a
tiny model, where SVDD reached 0.73). With α = unit a better base weighs a factor e.
"""

from __future__ import annotations

from dnadiff.errors import DnadiffError
from dnadiff.guidance.common import METHODS
from dnadiff.guidance.rewards import reward_unit


def default_strength(method: str, reward, length: int, options: dict, spec: str) -> dict:
    """The tilt's strength when the user gave none, from the reward's range (rewards.reward_unit):
    smc alpha = unit (target p·exp(r/unit)), cg/cg_grad scale = 1/unit; a fixed alpha = 1 on a GC
    fraction in [0, 1] tilts by e^0.005 per base, i.e. not at all. Returns what was chosen."""
    declared = METHODS.get(method).strength  # (option, inverse) or None
    if declared is None or declared[0] in options:
        return {}
    key, inverse = declared
    unit = reward_unit(reward, length)
    if unit is None:
        raise DnadiffError(f"--method {method} with --reward {spec}: give the strength, --option {key}=VALUE "
                           f"(the reward's range is unknown, so no default fits)")
    options[key] = 1.0 / unit if inverse else unit
    return {key: options[key]}


def cg_rows_per_design(schedule, sampler, num_tokens: int, free: int) -> float:
    """Expected reward rows of exact CG per design: at each step every masked position is scored
    with each of the tokens, and a position is still masked at time t with probability 1 − α(t)."""
    import torch

    if sampler.noise == "uniform":  # udlm: every free position, every step (Sampler.noise, declared)
        return float(num_tokens * free * sampler.steps)
    ts = sampler.time_grid(torch.device("cpu"))[:-1]
    still_masked = (1.0 - schedule.alpha(ts).double()).clamp(0, 1)
    return float(num_tokens * free * still_masked.sum())


__all__ = ["cg_rows_per_design", "default_strength"]
