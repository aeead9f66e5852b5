"""Training (the only package that imports lightning).

    from dnadiff.training import train, reward_finetune
    result = train(cfg, resume=False, overwrite=False)       # a RunConfig -> runs/NAME/model
    metrics = reward_finetune(model_dir, settings, out, reward=reward)   # `dnadiff design-finetune`

`dnadiff finetune` is dnadiff.classifier_tuning; its one Lightning module, the fit of one run, is
classifier_loop.py here (reward_loop.py: `dnadiff design-finetune`'s, over dnadiff.reward_tuning).
Names resolve lazily, so importing this package does not import Lightning.
"""

from dnadiff.lazy import lazy_exports

_EXPORTS = {
    "train": "run", "TrainResult": "run", "build_backbone_for": "run",
    "reward_finetune": "reward_loop", "complete_settings": "reward_loop",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
