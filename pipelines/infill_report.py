"""The page of pipelines/infill.py: the Markdown table of its rows (bits per hidden base, paired with the Markov
chain) and its DHS fill rows, and the figure of every row's difference from the chain per mask."""

from __future__ import annotations

import json
from pathlib import Path

import common

MASKS = ("span8", "span32", "span96", "random15", "random50")
FILL_MASK = "span32"  # the DHS span refilled and judged


def markdown(r: dict, png: str | None) -> str:
    from dnadiff.utils import markdown_table

    table = markdown_table([{"data": x["data"], "mask": x["mask"], "model": x["model"],
                             "bits / hidden base": f"{x['bits_per_hidden_base']:.4f}",
                             "minus Markov (paired ± SE)": "(reference)" if x["paired_markov"] is None else
                             "{mean:+.4f} ± {std_error:.4f}".format(**x["paired_markov"]), "windows": x["windows"]}
                            for x in r["rows"]])
    fills = markdown_table([{k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in f.items()}
                            for f in r["fill_samples"]]) if r["fill_samples"] else "(no DHS fill rows)"
    lines = ["# Infilling: conditional NLL of hidden bases (issue 47 §1)", "", f"`{r['command']}`  "]
    for part in r.get("parts") or [r]:  # a --combine table: each run's command, wall time and load
        lines += [f"{', '.join(part['data'])}: `{part['command']}`  "] if part is not r else []
        lines += [f"{part['wall_s']:.0f} s wall, {part['threads']} thread; {part['machine']}; load before "
                  f"{part['load_before']}, after {part['load_after']}." + ("  " if part is not r else ""),
                  *([f"*{part['note']}*  "] if part is not r and part.get("note") else [])]
    lines += [""]
    lines += [f"**{r['note']}**", ""] if r["note"] else []
    lines += [*(f"- {n}" for n in r["notes"]), "", "Rows and definitions: the docstring of pipelines/infill.py. "
              "Negative `minus Markov`: better than the chain's exact two-flank conditional.", "", table, "",
              f"## DHS test sequences with the central {FILL_MASK} refilled", "", fills, "",
              "class_kept: the evaluation oracle's argmax is the sequence's own cell type (± binomial SE); "
              "motif_recall: JASPAR hits in the span ± 10 bp that come back; span_js_kK: K-mer JS of the filled "
              "spans vs the real spans (bits).", ""]
    if png:
        lines += [f"![infill]({Path(png).name})", ""]
    return "\n".join(lines)


def plot(r: dict, path: Path) -> str | None:
    plt = common.pyplot()
    data = sorted({x["data"] for x in r["rows"]})
    if not data:
        return None
    fig, axes = plt.subplots(1, len(data), figsize=(6 * len(data), 4), squeeze=False)
    for ax, d in zip(axes[0], data):
        models = sorted({x["model"] for x in r["rows"] if x["data"] == d and x["paired_markov"]})
        for j, m in enumerate(models):
            pts = [(MASKS.index(x["mask"]), x["paired_markov"]) for x in r["rows"]
                   if x["data"] == d and x["model"] == m and x["paired_markov"]]
            ax.errorbar([i + 0.12 * j for i, _ in pts], [p["mean"] for _, p in pts],
                        yerr=[2 * p["std_error"] for _, p in pts], fmt="o", capsize=3, label=m)
        ax.axhline(0, color="grey", lw=1)
        ax.set_xticks(range(len(MASKS)), MASKS)
        ax.set_ylabel("bits / hidden base minus Markov (± 2 SE)")
        ax.set_title(d)
        ax.legend(fontsize=7)
    return common.save_png(fig, path, dpi=110)


def combine(paths: list[str], results: Path, note: str, command: str) -> int:
    """--combine: earlier runs' rows, fill rows, models and notes in one table; each run keeps its own command,
    wall time and load (`parts`). The runs must not share a data set and must have the same settings."""
    from dnadiff.errors import DnadiffError

    runs = []
    for f in paths:
        try:
            runs.append(json.loads(Path(f).read_text()))
            runs[-1]["rows"], runs[-1]["settings"]  # noqa: B018  (the keys a run has)
        except (OSError, ValueError, KeyError, TypeError):
            raise DnadiffError(f"--combine: {f} is not a results JSON of pipelines/infill.py") from None
    data = [sorted({r["data"] for r in run["rows"]}) for run in runs]
    flat = [d for ds in data for d in ds]
    if len(flat) != len(set(flat)):
        raise DnadiffError(f"--combine: the runs share a data set ({', '.join(map(','.join, data))})")
    if any(run["settings"] != runs[0]["settings"] for run in runs):
        raise DnadiffError("--combine: the runs were made with different settings")
    parts = [{k: run.get(k) for k in ("command", "note", "wall_s", "threads", "machine", "load_before", "load_after")}
             | {"data": ds} for run, ds in zip(runs, data)]
    common.write_report(results, {
        "command": command, "note": note, "settings": runs[0]["settings"], "parts": parts,
        "models": {k: v for run in runs for k, v in run.get("models", {}).items()},
        "notes": [n for run in runs for n in run.get("notes", [])], "rows": [r for run in runs for r in run["rows"]],
        "fill_samples": [f for run in runs for f in run.get("fill_samples", [])],
        "wall_s": sum(run.get("wall_s") or 0 for run in runs), "threads": runs[0].get("threads"),
        "load_before": None, "machine": runs[0].get("machine"), "load_after": None}, markdown, plot)
    print(f"wrote {results}.md, .json and .png ({len(runs)} runs combined)")
    return 0
