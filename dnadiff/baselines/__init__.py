"""Classical baselines: an order-k Markov chain (markov.py, fitted by markov_fit.py) for the DNA
perplexity table, and k-mer-count logistic regression (kmer_lr.py) for the Genomic Benchmarks table."""

from dnadiff.lazy import lazy_exports

_EXPORTS = {"kmer_features": "kmer_lr", "run_kmer_lr": "kmer_lr", "MarkovChain": "markov", "MarkovConfig": "markov"}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
