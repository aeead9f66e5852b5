"""JASPAR motif scan: speed on real reference windows, and whether the motif metrics tell generators apart.

    python benchmarks/motif_scan.py [--windows 2000] [--length 1024] [--num 64] [--json out.json]

Reference: --windows windows of --length bp without N, evenly spaced over the human chr22 test split
(--data, default $DNADIFF_DATA or /work/shared/data; as `dnadiff metrics --bed` cuts them). The 879 JASPAR2024 CORE
vertebrate matrices (pyjaspar, offline), p < 1e-4, both strands, background from the reference.
Sample sets of --num sequences, each scored against the reference like `dnadiff metrics`:
- real: windows of the valid split (what a perfect generator gets);
- markov5: an order-5 Markov chain (add-one smoothing) fitted on the reference windows, sampled;
- iid: bases drawn independently with the reference's base composition.
Time: wall and process CPU seconds of the reference scan (the thresholds and the JASPAR load apart).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def markov_samples(model, num: int, length: int, rng: np.random.Generator) -> list[str]:
    """Draw from dna_metrics.MarkovModel: the first bases from the shorter orders, then order k."""
    k = model.order
    probs = [np.exp(lp) for lp in model.log_probs]
    probs = [p / p.sum(axis=1, keepdims=True) for p in probs]
    out = np.zeros((num, length), dtype=np.int64)
    for i in range(length):
        j = min(i, k)
        ctx = np.zeros(num, dtype=np.int64)
        for b in range(i - j, i):
            ctx = ctx * 4 + out[:, b]
        cum = probs[j][ctx].cumsum(axis=1)  # (num, 4)
        out[:, i] = (rng.random((num, 1)) > cum).sum(axis=1).clip(max=3)
    return ["".join("ACGT"[c] for c in row) for row in out]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--windows", type=int, default=2000)
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--num", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    p.add_argument("--data", default=os.environ.get("DNADIFF_DATA", "/work/shared/data"),
                   help="the folder holding hg19_chr22_subset/")
    args = p.parse_args()

    from dnadiff.data import genome_reference
    from dnadiff.eval.dna_metrics import MarkovModel, kmer_counts
    from dnadiff.eval.motifs import MotifScanner, background_of, load_jaspar, motif_metrics
    from dnadiff.machine import describe_machine, load_average, machine_info
    from dnadiff.utils import format_table

    root = os.path.join(args.data, "hg19_chr22_subset")
    fasta, bed = os.path.join(root, "chr22.fa.gz"), os.path.join(root, "sequences.bed")
    reference = [s.upper() for s in genome_reference(fasta, bed, "test", args.length, args.windows)]
    real = [s.upper() for s in genome_reference(fasta, bed, "valid", args.length, args.num)]
    rng = np.random.default_rng(args.seed)
    comp = kmer_counts(reference, 1)
    sets = {
        "real (valid split)": real,
        "markov5": markov_samples(MarkovModel(reference, 5), args.num, args.length, rng),
        "iid": ["".join(rng.choice(list("ACGT"), args.length, p=comp / comp.sum())) for _ in range(args.num)],
    }
    t0 = time.time()
    motifs = load_jaspar()
    scanner = MotifScanner(motifs, background_of(reference))
    t_setup = time.time() - t0
    wall, cpu = time.time(), time.process_time()
    scanner.scan(reference, progress=True, desc="motif scan (reference)")
    wall, cpu = time.time() - wall, time.process_time() - cpu
    mb = sum(len(s) for s in reference) / 1e6
    rows = []
    for name, seqs in sets.items():
        res = motif_metrics(scanner, seqs, reference, per_motif=False)
        rows.append({"samples": name, "n": len(seqs), "hits/kb": res["hits_per_kb_samples"],
                     "ref hits/kb": res["hits_per_kb_reference"], "Spearman": res["spearman"], "JS (bits)": res["js"]})
    print(f"{describe_machine()}")
    print(f"reference: {len(reference)} x {args.length} bp windows of the chr22 test split ({mb:.2f} Mb); "
          f"{len(scanner.motifs)} of {len(motifs)} JASPAR2024 CORE vertebrate motifs usable at p < 1e-4 "
          f"(load + thresholds {t_setup:.1f} s)")
    print(f"reference scan: {wall:.1f} s wall, {cpu:.1f} s CPU ({mb / cpu:.2f} Mb per CPU second, both strands)")
    print(format_table(rows))
    print(load_average())
    if args.json:
        from dnadiff.utils import portable_paths, write_json

        write_json(args.json, portable_paths(
            {"machine": machine_info(), "reference_windows": len(reference), "length": args.length,
                               "motifs_usable": len(scanner.motifs), "motifs_total": len(motifs),
                               "setup_seconds": t_setup, "scan_wall_seconds": wall, "scan_cpu_seconds": cpu,
                               "rows": rows}))


if __name__ == "__main__":
    main()
