"""Training (the only package that imports lightning).

    from dnadiff.training import train, run_finetune
    result = train(cfg, resume=False, overwrite=False)       # a RunConfig -> runs/NAME/model
    results = run_finetune(finetune_cfg, out_dir)             # Genomic Benchmarks protocol (tab. 7)

Names resolve lazily, so importing this package does not import Lightning.
"""

from dnadiff.lazy import lazy_exports

_EXPORTS = {
    "train": "run", "TrainResult": "run", "build_backbone_for": "run",
    "run_finetune": "finetune_protocol", "run_rows": "finetune_protocol",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
