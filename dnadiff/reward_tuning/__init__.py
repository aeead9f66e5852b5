"""Fine-tuning a masked diffusion model toward a reward (`dnadiff design-finetune`): the pure
algorithms (no Lightning). Formerly dnadiff.finetune_reward (kept as a deprecated alias).

    from dnadiff.reward_tuning import make_grid, drakes_loss, sample_groups, policy_gradient_loss
    grid = make_grid(schedule, steps=128)
    out = drakes_loss(denoiser, pretrained, reward.soft, grid, mask_id, x_init, V, kl_weight=0.1, truncate_steps=16,
                      estimator="soft", temperature=0.1, kl_scope="all")   # trajectory.ESTIMATORS, KL_SCOPES
    batch = sample_groups(denoiser, grid, mask_id, x_init, V, reward)            # groups of G rows
    out = policy_gradient_loss(denoiser, pretrained, grid, mask_id, batch, kl_weight=0.1, group_size=8)
    pool = sample_pool(pretrained, grid, mask_id, length, V, reward, num=256, batch_size=16)   # offline
    out = preference_loss(denoiser, grid, mask_id, pool, idx, kl_weight=0.1, group_size=8)

Files: trajectory.py (the differentiable ancestral rollout, the per-step KL), drakes.py (Wang et al.
2025), policy_gradient.py (GRPO-style, SEPO, Zekri & Boullé 2025), preference.py (offline: DPO on
pretrained trajectories ranked by the reward), target.py (SNIS estimates of the target p* and a
model's reach). Relaxed one-hot states reach a denoiser through dnadiff/diffusion/soft_input.py; the
Lightning training loop is dnadiff/training/reward_loop.py. Classification fine-tuning on labelled
sequences is the other package, dnadiff/classifier_tuning/.
"""

from dnadiff.reward_tuning.drakes import LossOutput, drakes_loss
from dnadiff.reward_tuning.policy_gradient import GroupBatch, group_advantage, policy_gradient_loss, sample_groups
from dnadiff.reward_tuning.preference import TrajectoryPool, preference_loss, sample_pool
from dnadiff.reward_tuning.target import snis_target
from dnadiff.reward_tuning.trajectory import Grid, make_grid, rollout

METHODS = ("drakes", "policy_gradient", "dpo")

__all__ = ["METHODS", "Grid", "GroupBatch", "LossOutput", "TrajectoryPool", "drakes_loss", "group_advantage",
           "make_grid", "policy_gradient_loss", "preference_loss", "rollout", "sample_groups", "sample_pool",
           "snis_target"]
