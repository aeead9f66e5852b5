"""Classical baselines fitted from counts: the order-k Markov chain (the backbone backbones/markov.py,
fitted by markov_fit.py) for the DNA perplexity table, registered in COUNT_FITS. The k-mer LR baseline
of the Genomic Benchmarks table is dnadiff/classifier_tuning/kmer_lr.py."""

from dnadiff.backbones.markov import MarkovChain, MarkovConfig

# registration by import: markov_fit registers the fit of "markov" in COUNT_FITS, markov_classes_fit that of
# "markov_classes" (one chain per class, issue 34 §2)
from dnadiff.baselines import markov_classes_fit, markov_fit  # noqa: F401
from dnadiff.baselines.fits import COUNT_FITS

__all__ = ["COUNT_FITS", "MarkovChain", "MarkovConfig"]
