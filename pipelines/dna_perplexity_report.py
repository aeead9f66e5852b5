"""The table of pipelines/dna_perplexity.py (paper tab. 6): one row per model, mean and range over seeds, the
comparison with the best-k Markov row, and its Markdown page (also re-rendered by --from-json)."""

from __future__ import annotations

import json
from pathlib import Path

import common
import perplexity_baselines as baselines  # the Markov rows

from dnadiff.eval import RANGE_LABEL


def summarize_rows(specs: list[dict], results: dict[str, list[dict]], budget: bool = False) -> list[dict]:
    """One table row per spec: mean over seeds and the range max − min (the paper's tab. 6 "±").
    A Markov row is one deterministic count fit (no seeds, no range); with a time budget the steps
    column is the mean number of steps the runs did."""
    import numpy as np

    table = []
    for spec in specs:
        runs = results.get(spec["key"], [])
        if not runs:
            continue
        ppl = [r["perplexity"] for r in runs]
        bits = [r["bits_per_base"] for r in runs]
        markov = bool(spec.get("markov"))
        if markov:
            steps = f"counts, k={runs[0]['order']}"
        elif budget and all("steps_done" in r for r in runs):
            steps = round(float(np.mean([r["steps_done"] for r in runs])))
        else:
            steps = spec["steps"]
        table.append({
            "model": spec["row"], "kind": spec["kind"], "perplexity": f"{np.mean(ppl):.4f}",
            RANGE_COLUMN: "-" if markov else f"{max(ppl) - min(ppl):.4f}", "bits/base": f"{np.mean(bits):.4f}",
            "seeds": "- (exact fit)" if markov else len(runs), "params": runs[0]["parameters"], "steps": steps,
            "ppl_mean": float(np.mean(ppl)), "ppl_range": float(max(ppl) - min(ppl)),
            "bits_mean": float(np.mean(bits)), "bits_range": float(max(bits) - min(bits)), "key": spec["key"],
        })
    return table


RANGE_COLUMN = RANGE_LABEL  # one name for the spread over seeds in every table


COLUMNS = ["model", "kind", "perplexity", RANGE_COLUMN, "bits/base", "seeds", "params", "steps"]


def versus_markov(table: list[dict], results: dict[str, list[dict]], scale: str, data_settings: list[str],
                  results_dir: str | Path, own_json: Path | None = None) -> list[str]:
    """The comparison of every neural row with the best-k Markov row: this run's, else (--no-markov)
    the one stored in results/dna_perplexity_SCALE.json when it was fitted on the same data settings."""
    MARKOV_BEST, compare_with_markov = baselines.MARKOV_BEST, baselines.compare_with_markov

    lines = compare_with_markov(table, results)
    stored = Path(results_dir) / f"dna_perplexity_{scale}.json"
    if lines or not stored.is_file() or (own_json is not None and stored.resolve() == own_json.resolve()):
        return lines
    try:
        ref = json.loads(stored.read_text())
    except ValueError:
        return lines
    if ref.get("settings", {}).get("data") == data_settings and MARKOV_BEST in ref.get("runs", {}):
        lines = compare_with_markov(table, {**results, MARKOV_BEST: ref["runs"][MARKOV_BEST]})
        lines[0] += f" (fitted by `{ref['command']}`, same data and test windows)"
    return lines


def write_outputs(summary: dict, results_dir: str, data: list[str]) -> None:
    """results/STEM.json and .md from a summary (command, settings, rows, per-seed runs, comparison
    with the best Markov row); STEM = dna_perplexity_SCALE, or ..._budgetNmin for a budget run."""
    from dnadiff.utils import markdown_table

    scale, wall, seeds = summary["scale"], summary["wall_seconds"], summary["seeds"]
    stem = summary.get("stem") or f"dna_perplexity_{scale}"
    load = summary.get("load_average_at_end")
    md = [f"# DNA perplexity (paper tab. 6), scale `{scale}`", "",
          f"Command: `{summary['command']}`  ", f"Wall time: {wall / 60:.1f} min  ",
          f"Machine: {summary['machine']}" + (f"; {load} at the end" if load else "") + "  "]
    prior = summary.get("neural_rows_from")
    if prior:
        md.append(f"Neural rows reused from `{prior['command']}` ({(prior.get('wall_seconds') or 0) / 60:.1f} min); "
                  "this run fitted the Markov rows" + (" and trained the rows it adds (below)." if any(
                      a["command"] == summary["command"] for a in summary.get("added_rows", [])) else " only.") + "  ")
    budget = summary.get("budget_seconds_per_run")
    if budget:
        md.append(f"Budget: {summary['budget_minutes']:g} min of neural training split over the runs by step share "
                  f"({', '.join(f'{k} {v:.0f}s' for k, v in budget.items())}); steps = steps done (mean).  ")
    md += [f"Data: {', '.join(data)}; test split, {summary['settings']['eval_windows'] or 'all'} windows; "
           f"perplexity and bits/base are means over {seeds} seeds, {RANGE_COLUMN} is the perplexity's "
           "max − min over the seeds (the paper's \"±\"); a Markov row is one exact count fit.", ""]
    regen = summary.get("regenerated_rows")
    if regen:
        md.append(f"{' and '.join(sorted(regen['rows']))} rows regenerated ({regen['why']}): `{regen['command']}`, "
                  f"{regen['wall_seconds'] / 60:.1f} min on {regen['machine']}.  ")
    for added in summary.get("added_rows", []):
        md.append(f"{' and '.join(added['rows'])} row{'s' if len(added['rows']) > 1 else ''} added: "
                  f"`{added['command']}`, {added['wall_seconds'] / 60:.1f} min on {added['machine']}; "
                  f"{added['load_average_at_end']} at the end.  ")
    markov_from = summary.get("markov_rows_from")
    if markov_from:
        md.append(f"Markov rows from `{markov_from['command']}` ({markov_from['wall_seconds'] / 60:.1f} min on "
                  f"{markov_from['machine']}; {markov_from.get('load_average_at_end', 'load n/a')} at the end)"
                  + (f"; {markov_from['note']}" if markov_from.get("note") else "") + ".  ")
    if summary.get("table_rendered_by"):
        md.append(f"Table re-rendered without training from the per-seed values in the JSON: "
                  f"`{summary['table_rendered_by']}`")
    if md[-1]:
        md.append("")
    md += [markdown_table(summary["rows"], COLUMNS), ""]
    if summary.get("versus_markov"):
        md += [*summary["versus_markov"], ""]
    common.write_results(Path(results_dir) / stem, summary, "\n".join(md))


def print_dry_run(scale: str, table: list[dict], results: dict[str, list[dict]], wall: float) -> None:
    from dnadiff.utils import format_table

    print(format_table([{"model": r["model"], "params": r["params"], "steps of the full run": r["steps"]}
                        for r in table]))
    print("\n".join(baselines.compare_with_markov(table, results)))  # this run's rows only: the data is the sample
    print(f"\ndry run ({scale}): {len(table)} rows built, stepped once (Markov rows: fitted) and evaluated "
          f"in {wall:.1f} s")
