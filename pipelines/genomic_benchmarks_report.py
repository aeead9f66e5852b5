"""The page of pipelines/genomic_benchmarks_table.py (MDLM paper tab. 7): accuracy and MCC tables, the comparison
of initialisations against the run spread, and --from-json's re-rendering from the per-run values in a JSON."""

from __future__ import annotations

import sys
from pathlib import Path

import common

KMER_ROW = "k-mer LR"  # the classical baseline row (dnadiff/classifier_tuning/kmer_lr.py), same cells and protocol


def compare_note(table: dict, datasets: list[str]) -> str:
    """One sentence per data set: the inits ranked by mean accuracy, and whether gaps exceed the spread."""
    lines = []
    for ds in datasets:
        cells = [(init, row[ds]["accuracy"]) for init, row in table.items() if ds in row]
        cells.sort(key=lambda c: -c[1]["mean"])
        if not cells:
            continue
        order = " > ".join(f"{i} {s['mean']:.3f}" for i, s in cells)
        detail = []
        by = dict(cells)
        for other in ("mlm", "scratch", KMER_ROW.lower()):
            for mdlm in [k for k in by if "mdlm" in k.lower()]:
                match = [k for k in by if k.lower() == other or k.lower().startswith(other)]
                for o in match:
                    gap = by[mdlm]["mean"] - by[o]["mean"]
                    # half the summed ranges (max − min): the gap exceeds it only if the two runs' midpoints
                    # are further apart than their half-spreads reach
                    spread = (_range(by[mdlm]) + _range(by[o])) / 2
                    verdict = "within the run spread" if abs(gap) <= spread else ("better" if gap > 0 else "worse")
                    detail.append(f"{mdlm} vs {o}: {gap:+.3f} ({verdict}, spread {spread:.3f})")
        lines.append(f"- {ds}: {order}" + (f"; {'; '.join(detail)}" if detail else ""))
    return "\n".join(lines)


def _range(summary: dict) -> float:
    """max − min over runs (from min/max, so records written before the `range` key work too)."""
    return summary["max"] - summary["min"]


def kmer_note(cells: list[dict]) -> str:
    """How the k-mer LR row was made (k, strands, the C chosen per data set on validation)."""
    chosen = ", ".join(f"{c['dataset']} C={c['selected_lr']:g}" for c in cells if c["init"] == KMER_ROW)
    return ("k-mer frequencies k = 3..6 on both strands + L2 logistic regression (scikit-learn), C chosen on "
            f"mean validation accuracy from 1e-4..10 ({chosen}); same subsamples, seeds and splits as the other rows")


def render(payload: dict) -> str:
    """The markdown page of a run (also sets payload["note"]); ± is the range max − min over runs."""
    from dnadiff.eval import RANGE_LABEL, format_range
    from dnadiff.utils import markdown_table

    table, cells, ds_names = payload["table"], payload["cells"], payload["datasets"]
    md_rows = [{"init": init, **{ds: format_range(row[ds]["accuracy"]) for ds in ds_names if ds in row}}
               for init, row in table.items()]
    baseline = {c["dataset"]: c["majority_baseline"] for c in cells}
    md_rows.append({"init": "(majority class)", **{ds: f"{baseline[ds]:.3f}" for ds in ds_names if ds in baseline}})
    mcc_rows = [{"init": init, **{ds: format_range(row[ds]["mcc"]) for ds in ds_names if ds in row}}
                for init, row in table.items()]
    payload["note"] = note = compare_note(table, ds_names)
    scratch_like = payload.get("scratch_architecture")
    lines = [
        f"# Genomic Benchmarks fine-tuning ({payload['scale']} scale; MDLM paper tab. 7)", "",
        f"- command: `{payload['command']}`",
        f"- wall time: {payload['wall_s'] / 60:.1f} min (the cells' own run time adds up to "
        f"{sum(c['wall_s'] for c in cells) / 60:.1f} min; a cell finished by an earlier, interrupted run is reused); "
        f"machine: {payload['machine']}",
        f"- settings: {payload['settings']}",
        "- initialisations: " + ", ".join(
            [f"scratch = fresh weights ({'architecture of ' + scratch_like if scratch_like else 'config default'})"]
            * ("scratch" in table) + [f"{k} = {v}" for k, v in payload["inits"].items()]),
    ]
    if KMER_ROW in table:
        lines.append(f"- {KMER_ROW}: {kmer_note(cells)}")
    if payload.get("load_average"):
        lines.append(f"- machine load at the end (`uptime`): {payload['load_average']}")
    prior = payload.get("neural_rows_from")
    if prior:
        lines.append(f"- rows other than {KMER_ROW} reused from the earlier run `{prior['command']}` "
                     f"({(prior.get('wall_s') or 0) / 60:.1f} min on {prior.get('machine', '?')}); "
                     "this run added the baseline only")
    for added in payload.get("added_inits", []):
        lines.append(f"- row{'s' if len(added['inits']) > 1 else ''} {', '.join(added['inits'])} added by "
                     f"`{added['command']}` ({added['wall_s'] / 60:.1f} min on {added['machine']}; "
                     f"{added['load_average']} at the end)")
    if payload.get("table_rendered_by"):
        lines.append(f"- table re-rendered without training from the per-run values in the JSON: "
                     f"`{payload['table_rendered_by']}`")
    lines += [
        "", f"Test accuracy: mean ± {RANGE_LABEL} over runs (the paper's tab. 7 \"±\"):", "",
        markdown_table(md_rows), "",
        f"Test MCC: mean ± {RANGE_LABEL}:", "", markdown_table(mcc_rows), "",
        "Comparison (mean test accuracy; spread = half the sum of the two ranges):", "", note, "",
    ]
    return "\n".join(lines)


def write_outputs(payload: dict, md: str, out_stem: Path) -> None:
    common.write_results(out_stem, payload, md)
    print(md)
    print(f"wrote {out_stem}.md and {out_stem}.json")


def with_full_range(summary: dict[str, dict]) -> dict[str, dict]:
    """Each metric's summary with `range` = max − min, in place: records written before the fix held
    the half-range under `pm` (dropped here)."""
    for v in summary.values():
        v.pop("pm", None)
        v["range"] = v["max"] - v["min"]
    return summary


def rerender(args, command: str) -> int:
    """Rebuild the .md/.json of a finished run from its JSON: summaries recomputed from each cell's min/max."""
    from dnadiff.errors import DnadiffError
    from dnadiff.eval import summarize

    try:
        payload = common.read_results_json(args.from_json, "genomic_benchmarks")
        for cell in payload["cells"]:
            with_full_range(cell["summary"])
            # the per-run test values are stored too: the summary must agree with them
            acc = summarize([r["test"]["accuracy"] for r in cell["runs"]])
            if abs(acc["mean"] - cell["summary"]["accuracy"]["mean"]) > 1e-12:
                raise ValueError(f"cell {cell['init']}/{cell['dataset']}: summary disagrees with its runs")
            payload["table"][cell["init"]][cell["dataset"]] = {
                m: cell["summary"][m] for m in ("accuracy", "mcc", "f1_macro", "auroc")}
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, TypeError) as exc:
        print(f"error: --from-json {args.from_json}: not a genomic_benchmarks results JSON ({exc})", file=sys.stderr)
        return 2
    if "scratch_architecture" not in payload and "scratch" in payload["table"]:
        # records from before the key: the scratch row copies an init's architecture, so its parameter count
        params = {c["init"]: c["num_parameters"] for c in payload["cells"]}
        same = [k for k in payload["inits"] if params.get(k) == params.get("scratch")]
        payload["scratch_architecture"] = same[0] if same else None
    payload["table_rendered_by"] = command
    md = render(payload)
    write_outputs(payload, md, Path(args.out) if args.out else Path(args.from_json).with_suffix(""))
    return 0
