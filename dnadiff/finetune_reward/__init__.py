"""Deprecated alias: this package was renamed dnadiff.reward_tuning (issue 50: package names that say what
they hold). `from dnadiff.finetune_reward import drakes_loss` and `import dnadiff.finetune_reward.drakes` still
give the new package's objects, with a DeprecationWarning; soft_input is dnadiff.diffusion.soft_input. Nothing
in dnadiff imports this name."""

from dnadiff.lazy import moved_package
from dnadiff.reward_tuning import __all__  # noqa: F401  (the same public names)

__getattr__ = moved_package(__name__, "dnadiff.reward_tuning", {
    **{n: f"dnadiff.reward_tuning.{n}" for n in ("drakes", "policy_gradient", "preference", "target", "trajectory")},
    "soft_input": "dnadiff.diffusion.soft_input",
})
