"""PNG plots for `dnadiff metrics` (matplotlib, Agg backend; written atomically)."""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from dnadiff.eval.dna_metrics import gc_content, kmer_counts
from dnadiff.utils import atomic_path


def _save(fig, path: str) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")


def kmer_scatter(samples: Sequence[str], reference: Sequence[str], path: str, k: int = 4) -> str:
    """Log-log scatter of k-mer frequencies, reference (x) vs samples (y), with the diagonal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs, cr = kmer_counts(samples, k), kmer_counts(reference, k)
    fs, fr = cs / max(cs.sum(), 1), cr / max(cr.sum(), 1)
    floor = 0.5 / max(cs.sum(), cr.sum(), 1)
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.scatter(np.maximum(fr, floor), np.maximum(fs, floor), s=6, alpha=0.6)
    pos = np.concatenate([fs[fs > 0], fr[fr > 0]])
    lo, hi = (pos.min() / 2 if pos.size else floor), max(fs.max(), fr.max(), floor * 10)
    ax.plot([lo, hi], [lo, hi], color="grey", lw=1, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"reference {k}-mer frequency")
    ax.set_ylabel(f"sample {k}-mer frequency")
    ax.set_title(f"{k}-mer spectrum")
    _save(fig, path)
    plt.close(fig)
    return path


def gc_histogram(samples: Sequence[str], reference: Sequence[str], path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gs, gr = gc_content(samples), gc_content(reference)
    bins = np.linspace(0, 1, 41)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.hist(gr[~np.isnan(gr)], bins=bins, density=True, alpha=0.5, label="reference")
    ax.hist(gs[~np.isnan(gs)], bins=bins, density=True, alpha=0.5, label="samples")
    ax.set_xlabel("GC content")
    ax.set_ylabel("density")
    ax.legend()
    _save(fig, path)
    plt.close(fig)
    return path


def write_plots(samples: Sequence[str], reference: Sequence[str], out_dir: str, k: int = 4) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    return [
        kmer_scatter(samples, reference, os.path.join(out_dir, "kmer_scatter.png"), k=k),
        gc_histogram(samples, reference, os.path.join(out_dir, "gc_histogram.png")),
    ]


def motif_scatter(motifs: dict, path: str) -> str:
    """Log-log scatter of per-motif hit rates (hits per kb, both strands): reference (x) vs samples (y),
    with the diagonal and the Spearman correlation in the title; the most over- and under-represented
    motifs are named."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = motifs["per_motif"]
    fs = np.array([r["samples_per_kb"] for r in rows])
    fr = np.array([r["reference_per_kb"] for r in rows])
    pos = np.concatenate([fs[fs > 0], fr[fr > 0]])
    floor = pos.min() / 2 if pos.size else 1e-3
    xs, ys = np.maximum(fr, floor), np.maximum(fs, floor)
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter(xs, ys, s=6, alpha=0.5)
    hi = max(xs.max(initial=floor), ys.max(initial=floor)) * 1.5
    ax.plot([floor, hi], [floor, hi], color="grey", lw=1, ls="--")
    ratio = np.log2(ys / xs)
    for i in list(np.argsort(ratio)[:3]) + list(np.argsort(ratio)[-3:]) if ratio.size >= 6 else []:
        ax.annotate(rows[i]["name"], (xs[i], ys[i]), fontsize=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("reference hits per kb")
    ax.set_ylabel("sample hits per kb")
    ax.set_title(f"{len(rows)} JASPAR motifs, Spearman {motifs['spearman']:.3f}, JS {motifs['js']:.4f}")
    _save(fig, path)
    plt.close(fig)
    return path
