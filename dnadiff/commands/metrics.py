"""`dnadiff metrics SAMPLES.fa --reference REF.fa`: is generated DNA like real DNA?"""

from __future__ import annotations

import argparse
import os

HELP = "DNA sample quality: k-mer JS, GC, Markov oracle perplexity, memorisation, plots"
DESCRIPTION = """Compare generated DNA (a FASTA, one record per sample) with real DNA.

Reports, against the reference FASTA:
  k-mer spectrum Jensen-Shannon divergence (bits) for k = 1..--kmax,
  GC-content distribution distance (Wasserstein-1 and KS), per-sample k-mer entropy,
  perplexity under an order-k Markov model fitted on the reference (add-one smoothing),
  memorisation: longest exact match to the reference (both strands) and the share of samples
  with a match of at least --match-bp bases,
  and the same figures for held-out real sequences ("real vs real" floor) when the reference
  holds at least twice as many sequences (or windows of the samples' length) as the samples.
Writes metrics.json, kmer_scatter.png and gc_histogram.png to --out (default SAMPLES_metrics/)
and prints a table.

example:
  dnadiff metrics samples.fa --reference real.fa --out results/metrics"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("samples", help="FASTA of generated sequences")
    p.add_argument("--reference", required=True, help="FASTA of real sequences to compare with")
    p.add_argument("--out", default=None, help="output folder (default: <samples without extension>_metrics)")
    p.add_argument("--kmax", type=int, default=6, help="largest k for the k-mer JS divergence (default 6)")
    p.add_argument("--markov-order", type=int, default=5, help="order of the Markov oracle (default 5)")
    p.add_argument("--entropy-k", type=int, default=3, help="k of the per-sample k-mer entropy (default 3)")
    p.add_argument("--match-bp", type=int, default=50, help="memorisation threshold in bases (default 50)")
    p.add_argument("--one-strand", action="store_true", help="match against the reference's forward strand only")
    p.add_argument("--no-floor", action="store_true", help="skip the real-vs-real floor")
    p.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    p.add_argument("--seed", type=int, default=0, help="seed of the floor's held-out draw (default 0)")


def run(args: argparse.Namespace) -> int:
    from dnadiff.data.records import read_fasta
    from dnadiff.errors import DnadiffError
    from dnadiff.eval.dna_metrics import dna_metrics, summary_rows
    from dnadiff.utils import format_table, write_json

    if args.kmax < 1 or args.kmax > 12:
        raise DnadiffError(f"--kmax must be in 1..12, got {args.kmax}")
    if args.markov_order < 0 or args.markov_order > 12:
        raise DnadiffError(f"--markov-order must be in 0..12, got {args.markov_order}")
    if args.match_bp < 1:
        raise DnadiffError(f"--match-bp must be positive, got {args.match_bp}")
    samples = [seq for _, seq in read_fasta(args.samples)]
    reference = [seq for _, seq in read_fasta(args.reference)]
    out_dir = args.out or os.path.splitext(args.samples)[0] + "_metrics"
    res = dna_metrics(
        samples,
        reference,
        kmax=args.kmax,
        markov_order=args.markov_order,
        entropy_k=args.entropy_k,
        match_threshold=args.match_bp,
        both_strands=not args.one_strand,
        floor=not args.no_floor,
        seed=args.seed,
    )
    res["files"] = {"samples": os.path.abspath(args.samples), "reference": os.path.abspath(args.reference)}
    if not args.no_plots:
        from dnadiff.eval.plots import write_plots

        res["plots"] = write_plots(samples, reference, out_dir)
    path = os.path.join(out_dir, "metrics.json")
    write_json(path, res)
    print(f"{len(samples)} samples vs {len(reference)} reference sequences")
    print(format_table(summary_rows(res)))
    if res["floor"] is None and not args.no_floor:
        print("(no real-vs-real floor: the reference has fewer than 2x the samples' count of sequences/windows)")
    print(f"\nwrote {path}")
    return 0
