"""What pipelines/cpu_hour.py reports: the paired comparison with the Markov row, the table, its Markdown and the
validation-curve PNG (also redrawn from earlier tables' JSON by --replot)."""

from __future__ import annotations

import json
from pathlib import Path

import common
from cpu_hour_rows import ROWS

COLUMNS = ["model", "kind", "test bits/base", "valid bits/base", "vs Markov (paired, bits/base)", "> 2 SE",
           "params", "steps", "train wall"]


def compare(rows: list[dict], markov: list[dict]) -> list[str]:
    """Paired per-window differences of every neural row against the Markov row on the same test windows."""
    from dnadiff.eval import describe_difference, paired_difference

    lines = [f"{m['row']} (k = {m.get('order')}, chosen on valid): {m['test']['bits_per_token']:.4f} bits/base on "
             f"the same {m['test']['num_sequences']} test windows of {m['seq_len']} bp." for m in markov]
    for r in rows:
        same = next(m for m in markov if m["seq_len"] == r["config"]["seq_len"])
        d = paired_difference(r["test"], same["test"])
        r["paired"] = d
        lines.append("- " + describe_difference(d, r["row"], "Markov")
                     + (" (an upper bound: the true NLL may be lower)" if r["kind"] == "bound" else ""))
    return lines


def table_rows(rows: list[dict], markov: list[dict]) -> list[dict]:
    out = []
    for r in rows + markov:
        d = r.get("paired")
        out.append({
            "model": r["row"], "kind": r["kind"],
            "test bits/base": f"{r['test']['bits_per_token']:.4f} ± {r['test']['bits_std_error']:.4f}",
            "valid bits/base": f"{r['valid_bits']:.4f}",
            "vs Markov (paired, bits/base)": f"{d['mean']:+.4f} ± {d['std_error']:.4f}" if d else "-",
            "> 2 SE": ("yes" if d["beyond_2se"] else "no") if d else "-",
            "params": r.get("parameters", "-"), "steps": r.get("steps", "counts"),
            "train wall": f"{r['train_wall_seconds'] / 60:.1f} min" if r.get("train_wall_seconds") else "-"})
    return out


def plot_curves(rows: list[dict], markov_valid: list[tuple[str, float]], path: Path, title: str) -> None:
    """Validation bits/base against training wall clock, one line per row; the Markov row horizontal."""
    fig, ax = common.pyplot().subplots(figsize=(6.5, 4.2))
    for r in rows:
        c = r.get("curve") or []
        # the last point (the row's own valid score) after all its training: a continued row's parent's too
        xs = [p["wall_seconds"] / 60 for p in c] + [(r.get("wall_before_seconds", 0) + r["train_wall_seconds"]) / 60]
        ys = [p["bits"] for p in c] + [r["valid_bits"]]
        ax.plot(xs, ys, marker=".", label=f"{r['row']} ({r['kind']})")
    for (name, bits), style in zip(markov_valid, ["--", ":", "-."] * 4):
        ax.axhline(bits, color="black", ls=style, lw=1, label=f"{name} (valid)")
    ax.set_xlabel("training wall clock (min; curve: from the fit loop's start, last point: the whole run)")
    ax.set_ylabel("validation bits/base")
    ax.set_title(title)
    ax.legend(fontsize=8)
    common.save_png(fig, path, dpi=120)


def render(summary: dict) -> str:
    from dnadiff.utils import markdown_table

    md = [f"# {summary['title']}", "", f"Command: `{summary['command']}`  ",
          f"Wall time: {summary['wall_seconds'] / 60:.1f} min in all; machine: {summary['machine']}; "
          f"{summary.get('load_average_at_end') or 'load n/a'} at the end  ",
          f"Data: {', '.join(summary['data'])}; {summary['settings']}", "",
          markdown_table(summary["table"], summary.get("columns", COLUMNS)), ""]
    md += summary.get("versus_markov", [])
    if summary.get("plot"):
        md += ["", f"Validation bits/base vs training wall clock: `{summary['plot']}`"]
    return "\n".join(md) + "\n"


def replot(stems: list[str], results: Path, stem: str) -> Path:
    """One validation-curve PNG of the rows of earlier tables (each row once, by key; the first table's
    Markov line). A row written before rows recorded wall_before_seconds gets its parent's last curve point
    when the parent is among the rows."""
    from dnadiff.errors import DnadiffError

    rows, markov_valid = {}, []
    for name in stems:
        f = results / f"{name}.json"
        try:
            summary = json.loads(f.read_text())
        except (OSError, ValueError) as exc:
            raise DnadiffError(f"--replot {name}: cannot read {f} ({exc})") from None
        if not isinstance(summary.get("rows"), list):
            raise DnadiffError(f"--replot {name}: {f} is not a cpu_hour table (no rows)")
        for r in summary["rows"]:
            rows.setdefault(r["key"], r)
        markov_valid = markov_valid or [(m["row"], m["valid_bits"]) for m in summary.get("markov", [])]
    for key, r in rows.items():
        parent = rows.get(ROWS.get(key, {}).get("continues"))
        if "wall_before_seconds" not in r and parent and parent.get("curve"):
            r["wall_before_seconds"] = parent["curve"][-1]["wall_seconds"]
    png = results / f"{stem}_valid_curve.png"
    plot_curves(list(rows.values()), markov_valid, png, "cpu-hour rows: validation")
    print(f"wrote {png} ({len(rows)} rows: {', '.join(rows)})")
    return png
