"""Training (the only package that imports lightning).

    from dnadiff.training import train, run_finetune
    result = train(cfg, resume=False, overwrite=False)       # a RunConfig -> runs/NAME/model
    results = run_finetune(finetune_cfg, out_dir)             # Genomic Benchmarks protocol (tab. 7)
    metrics = reward_finetune(model_dir, settings, out, reward=reward)   # `dnadiff design-finetune`

Names resolve lazily, so importing this package does not import Lightning.
"""

from dnadiff.lazy import lazy_exports

_EXPORTS = {
    "train": "run", "TrainResult": "run", "build_backbone_for": "run",
    "run_finetune": "finetune_protocol", "run_rows": "finetune_protocol",
    "reward_finetune": "reward_loop", "complete_settings": "reward_loop",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
