"""`dnadiff finetune`: fine-tuning a backbone into a sequence classifier on a labelled DNA benchmark (Genomic
Benchmarks, tab. 7). Formerly dnadiff.finetune (kept as a deprecated alias); fine-tuning a diffusion model
toward a reward is dnadiff/reward_tuning/.

    from dnadiff.classifier_tuning import load_finetune_config, run_finetune
    cfg = load_finetune_config("experiments/tiny_finetune", ["train.epochs=2"])
    result = run_finetune(cfg, "runs/ft")       # OUT/config.yaml, results.json, results.md, classifier/

config.py (the settings), protocol.py (subsamples, seeds or folds, the lr choice, the results
table), runs.py (the runs over the lr grid, restart-safe), kmer_lr.py (the k-mer LR baseline row).
The Lightning fit of one run is dnadiff/training/classifier_loop.py; the classifier network and its saved
directory are in dnadiff/heads/. Names resolve lazily: importing this package imports neither
Lightning nor scikit-learn.
"""

from dnadiff.lazy import lazy_exports

_EXPORTS = {
    "FinetuneConfig": "config", "FinetuneTrainConfig": "config", "load_finetune_config": "config",
    "protocol_data": "protocol", "protocol_runs": "protocol",
    "select_on_validation": "protocol", "run_rows": "protocol", "results_markdown": "protocol",
    "run_finetune": "runs",
    "kmer_features": "kmer_lr", "kmer_options": "kmer_lr", "run_kmer_lr": "kmer_lr",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
