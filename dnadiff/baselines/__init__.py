"""Classical baselines: an order-k Markov chain (markov.py, fitted by markov_fit.py) for the DNA
perplexity table. The k-mer LR baseline of the Genomic Benchmarks table is dnadiff/finetune/kmer_lr.py."""

from dnadiff.lazy import lazy_exports

_EXPORTS = {"MarkovChain": "markov", "MarkovConfig": "markov"}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
