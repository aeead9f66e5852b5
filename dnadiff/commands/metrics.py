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

The reference is a FASTA, or a genome with --bed/--split (windows of the samples' length cut
from that split). --oracle MODEL_DIR adds the perplexity of the samples (and of the floor's real
sequences) under a trained dnadiff model: exact for AR models, the bound for diffusion models.

examples:
  dnadiff metrics samples.fa --reference real.fa --out results/metrics
  dnadiff metrics samples.fa --reference chr22.fa.gz --bed sequences.bed --split test --oracle runs/ar/model"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("samples", help="FASTA of generated sequences")
    p.add_argument("--reference", required=True, help="FASTA of real sequences to compare with")
    p.add_argument("--bed", default=None, help="with a genome --reference: BED with a split column")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"], help="BED split (default test)")
    p.add_argument("--max-reference-windows", type=int, default=2000,
                   help="genome reference: at most this many windows, evenly spaced (default 2000)")
    p.add_argument("--oracle", default=None, help="a dnadiff model directory scoring the samples (AR: exact NLL)")
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
    if args.bed:
        reference = genome_reference(args.reference, args.bed, args.split, max(len(s) for s in samples),
                                     args.max_reference_windows)
    else:
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
    if args.oracle:
        res["oracle"] = oracle_perplexity(args.oracle, samples, reference[: len(samples)], args.seed)
    if not args.no_plots:
        from dnadiff.eval.plots import write_plots

        res["plots"] = write_plots(samples, reference, out_dir)
    path = os.path.join(out_dir, "metrics.json")
    write_json(path, res)
    print(f"{len(samples)} samples vs {len(reference)} reference sequences")
    print(format_table(summary_rows(res)))
    if args.oracle:
        print(format_table([{"oracle": args.oracle, **{k: v for k, v in res["oracle"].items() if k != "model"}}]))
    if res["floor"] is None and not args.no_floor:
        print("(no real-vs-real floor: the reference has fewer than 2x the samples' count of sequences/windows)")
    print(f"\nwrote {path}")
    return 0


def genome_reference(fasta: str, bed: str, split: str, length: int, max_windows: int) -> list[str]:
    """Windows of `length` bases (no N) from one split of a genome + BED, evenly spaced."""
    import numpy as np

    from dnadiff.data.fasta import Genome, GenomeWindows, read_bed
    from dnadiff.errors import DnadiffError

    genome = Genome(fasta)
    ds = GenomeWindows(genome, read_bed(bed, genome), split, length, max_n_frac=0.0)
    idx = np.linspace(0, len(ds) - 1, min(len(ds), max_windows)).round().astype(int)
    seqs = []
    for i in sorted(set(int(i) for i in idx)):
        chrom, start, end = ds.locate(i)
        if end - start == length:
            seqs.append(genome.fetch(chrom, start, end))
    if not seqs:
        raise DnadiffError(f"{bed}: no full {length}-bp window without N in split {split!r}")
    return seqs


def oracle_perplexity(model_dir: str, samples: list[str], real: list[str], seed: int = 0) -> dict:
    """Perplexity (per base) of the samples, and of as many real sequences, under a dnadiff model."""
    import math

    import torch

    from dnadiff.checkpoint import load_for_inference
    from dnadiff.data.records import tile_records
    from dnadiff.eval.perplexity import evaluate_bound

    model = load_for_inference(model_dir)
    out = {"model": model_dir, "kind": "exact" if model.is_autoregressive else "bound"}
    for name, seqs in (("samples", samples), ("real", real)):
        if not seqs:
            continue
        length = max(len(s) for s in seqs)
        items = tile_records([(str(i), s) for i, s in enumerate(seqs)], length, model.tokenizer)
        loader = torch.utils.data.DataLoader(items, batch_size=32)
        res = evaluate_bound(model.denoiser, model.objective, loader, generator=torch.Generator().manual_seed(seed),
                             device=model.device)
        out[f"{name}_perplexity"] = res["perplexity"]
        out[f"{name}_bits_per_base"] = res["bits_per_token"]
    if "real_perplexity" in out and math.isfinite(out["real_perplexity"]):
        out["ratio_samples_to_real"] = out["samples_perplexity"] / out["real_perplexity"]
    return out


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: every option of this command with its value (defaults filled in)."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in ("command", "print_config")}
