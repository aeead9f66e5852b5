"""The page of pipelines/sample_quality.py: one column per row, one line per metric (mean ± range over seeds),
and which generated row is closest to real DNA, metric by metric."""

from __future__ import annotations

import json
from pathlib import Path

from dnadiff.machine import describe_machine, load_average


def summarize(values: list[dict[str, float]]) -> dict[str, dict]:
    import numpy as np

    keys = list(dict.fromkeys(k for v in values for k in v))
    out = {}
    for k in keys:
        xs = [v[k] for v in values if k in v]
        out[k] = {"mean": float(np.mean(xs)), "range": float(max(xs) - min(xs)), "n": len(xs)}
    return out


KEY_METRICS = [("kmer JS k=3 (bits)", "lower"), ("kmer JS k=6 (bits)", "lower"), ("3-mer Pearson r", "higher"),
               ("GC Wasserstein-1", "lower"), ("motif hit-rate Spearman", "higher"),
               ("motif spectrum JS (bits)", "lower"), ("Frechet distance (in-house embedder; not SFID/FBD)", "lower"),
               ("oracle samples_bits_per_base (Markov best k)", "floor")]


def closest_lines(per_row: dict, floor_row: str) -> list[str]:
    """Which generated rows are closest to real DNA, metric by metric (the floor row is the yardstick)."""
    import math

    floor = per_row[floor_row]["summary"]
    lines = ["Closest to real DNA (generated rows only; the real-vs-real floor in brackets):"]
    for metric, how in KEY_METRICS:
        cand = {n: r["summary"][metric]["mean"] for n, r in per_row.items()
                if r["model_dir"] and metric in r["summary"] and math.isfinite(r["summary"][metric]["mean"])}
        if not cand:
            continue
        ref = floor.get(metric, {}).get("mean", float("nan"))
        key = {"lower": lambda n: cand[n], "higher": lambda n: -cand[n], "floor": lambda n: abs(cand[n] - ref)}[how]
        best = min(cand, key=key)
        lines.append(f"- {metric}: {best} {cand[best]:.4g} [floor {ref:.4g}]")
    return lines


def _sampling_seconds(folder: Path, field: str = "wall_seconds") -> float | None:
    """The wall seconds a seed's samples took (or another `field`: nfe_per_sequence, the network calls per
    sequence), as samples.json recorded them (None: not recorded)."""
    try:
        return float(json.loads((folder / "samples.json").read_text())[field])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def per_sequence_cost(per_row: dict, num: int) -> list[str]:
    """One line: each sampled row's wall seconds and network calls per sequence, means over its seeds (what a
    row's quality cost; issue 52 compares them with the AR's)."""
    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    cost = [f"{n}: {mean(r['sampling_seconds_per_seed']) / num:.3g} s / {mean(r['network_calls_per_sequence']):.0f}"
            for n, r in per_row.items() if r.get("sampling_seconds_per_seed") and r.get("network_calls_per_sequence")]
    head = "- per sequence (mean over seeds), sampling wall seconds / network calls: "
    return [head + "; ".join(cost)] if cost else []


def _cell(summary: dict, metric: str) -> str:
    return f"{summary[metric]['mean']:.4g} ± {summary[metric]['range']:.2g}" if metric in summary else ""


def render(args, command: str, wall: float, size: dict, data: dict, notes: list[str], best_k: int,
           per_row: dict, metrics: list[str], closest: list[str]) -> str:
    """The markdown page: one column per row, one line per metric (mean ± range over seeds)."""
    from dnadiff.utils import markdown_table

    transposed = [{"metric": m, **{n: _cell(r["summary"], m) for n, r in per_row.items()}} for m in metrics]
    md = ["# Sample quality (cpu scale)" + (" — quick smoke run" if args.quick else ""), "",
          f"- command: `{command}`",
          f"- wall time: {wall / 60:.1f} min; machine: {describe_machine()}; {load_average()}",
          f"- {size['seeds']} seeds x {size['num']} sequences x {size['length']} bp per row; MDLM samplers "
          f"{size['steps']} steps (first-hitting: one call per token); reference: {size['reference_windows']} valid "
          f"windows of {data['fasta']}; cells: mean ± range (max − min) over seeds",
          *[f"- row {n}: {r['seeds']} seeds, not {size['seeds']} (--row-seeds)" for n, r in per_row.items()
            if r.get("seeds", size["seeds"]) != size["seeds"]],
          f"- oracle: the best-k Markov chain fitted on the train split (k = {best_k})",
          *[f"- model {n}" for n in notes],
          *([("- sampling wall seconds per seed (each seed's samples.json; a --resume run reuses them): "
              + "; ".join(f"{n}: {', '.join(f'{v:.0f}' for v in r['sampling_seconds_per_seed'])}"
                          for n, r in per_row.items() if r.get("sampling_seconds_per_seed")))]
            if any(r.get("sampling_seconds_per_seed") for r in per_row.values()) else []),
          *per_sequence_cost(per_row, size["num"]),
          *([f"- Fréchet distance: pooled features of the classifier {args.embedder} (in-house: comparable "
             "between the rows of this table, not with published SFID/FBD values)"] if args.embedder else []),
          "", markdown_table(transposed), "", *closest]
    if getattr(args, "note", None):  # how the rows were made, why a target was missed
        md += ["", args.note]
    return "\n".join(md) + "\n"
