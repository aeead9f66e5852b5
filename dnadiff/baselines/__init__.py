"""Classical baselines: an order-k Markov chain (markov.py, fitted by markov_fit.py) for the DNA
perplexity table, and k-mer-count logistic regression (kmer_lr.py) for the Genomic Benchmarks table."""
