"""Evaluation: likelihood bounds (perplexity.py), paired per-window comparisons (paired.py),
DNA sample statistics (dna_metrics.py), JASPAR motif
content (motifs.py), Fréchet distance and held-out classifier accuracy through a trained encoder
(encoders.py), generative perplexity (genppl.py), zero-shot text perplexity (zeroshot.py), classification
metrics and the mean ± range summaries of the tables (classification.py), figures (plots.py), a cell-type
oracle's scores of sequences (oracle.py), the classifier two-sample test of generated vs real DNA
(discriminator.py) and its strand-averaged one-hot CNN (conv_judge.py, also the DHS neural oracle). Plain
PyTorch, no Lightning.

    from dnadiff.eval import evaluate_model
    res = evaluate_model(dnadiff.load("runs/x/model"), windows, batch_size=32)   # res["bits_per_token"]
"""

from dnadiff.lazy import lazy_exports

_EXPORTS = {
    "evaluate_bound": "perplexity", "evaluate_model": "perplexity",
    "paired_difference": "paired", "window_bits": "paired", "describe_difference": "paired",
    "paired_accuracy": "paired", "describe_accuracy_difference": "paired",
    "dna_metrics": "dna_metrics", "summary_rows": "dna_metrics", "gc_content": "dna_metrics",
    "kmer_counts": "dna_metrics", "kmer_codes": "dna_metrics", "encode": "dna_metrics",
    "js_divergence": "dna_metrics", "longest_matches": "dna_metrics", "reverse_complement": "dna_metrics",
    "kmer_pearson": "dna_metrics", "wasserstein1": "dna_metrics",
    "load_oracle": "oracle", "predict_proba": "oracle", "accuracy_table": "oracle", "target_rate": "oracle",
    "score_fasta": "oracle", "fasta_targets": "oracle",
    "frechet_metric": "encoders", "fingerprint": "encoders", "spearman": "motifs", "scanner_settings": "motifs",
    "load_jaspar": "motifs", "MotifScanner": "motifs", "motif_metrics": "motifs", "background_of": "motifs",
    "frechet_distance": "encoders", "Embedder": "encoders", "BackboneEncoder": "encoders",
    "classifier_accuracy": "encoders",
    "generative_perplexity": "genppl", "decode_samples": "genppl", "load_scorer": "genppl",
    "unigram_entropy": "genppl",
    "zero_shot_eval": "zeroshot",
    "classification_metrics": "classification", "summarize": "classification", "format_range": "classification",
    "RANGE_LABEL": "classification", "METRICS": "classification",
    "discriminator_test": "discriminator", "DiscriminatorSettings": "discriminator", "auroc_columns": "discriminator",
    "ConvJudge": "conv_judge", "ConvJudgeConfig": "conv_judge", "fit_judge": "conv_judge", "save_judge": "conv_judge",
    "load_judge": "conv_judge",
    "hidden_mask": "infill_nll", "conditional_nelbo": "infill_nll", "ordered_conditional_nll": "infill_nll",
    "ar_left_nll": "infill_nll", "markov_conditional_nll": "infill_nll", "INFILL_MASKS": "infill_nll",
    "CONTIGUOUS_MASKS": "infill_nll",
    "chain_tables": "markov_infill", "model_chain": "markov_infill", "sample_hidden": "markov_infill",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
