"""Guided design: steer a masked-diffusion generator toward a reward (a classifier's log-probability,
GC content, motif counts, a user function).

    from dnadiff.guidance import build_reward, build_method
    reward = build_reward("gc:0.42")
    method = build_method("smc", sampler, reward, particles=16, alpha=0.05)
    x = method.generate(denoiser, schedule, mask_id, (B, L), template=None, generator=0)

Methods (one file each): best_of_n.py, svdd.py (Li et al. 2024), smc.py, classifier_guidance.py
(exact and first-order, Nisonoff et al. 2024 / Schiff et al. 2024); rewards.py; common.py;
strength.py (default strengths from the reward's range, exact CG's cost).
"""

# registration by import: each module below registers its method in METHODS (rewards.py: REWARDS, above)
from dnadiff.guidance import best_of_n, classifier_guidance, smc, svdd  # noqa: F401
from dnadiff.guidance.methods import METHODS, build_method
from dnadiff.guidance.rewards import build_reward, rc_averaged, reward_capabilities, reward_unit, soft_support
from dnadiff.guidance.strength import cg_rows_per_design, default_strength

__all__ = ["METHODS", "build_method", "build_reward", "cg_rows_per_design", "default_strength", "rc_averaged",
           "reward_capabilities", "reward_unit", "soft_support"]
