"""The page of pipelines/dhs_benchmark.py: the generation table per row and cell type (target rate, marker
enrichment, naturalness, the discriminator's columns), the models and oracles it used, and its PNGs."""

from __future__ import annotations

from pathlib import Path

import common
import judging
import numpy as np

ROW_LABELS = {"real": "real test sequences (floor)", "markov": "per-cell-type Markov",
              "ar": "conditional Mamba AR", "bd3": "conditional block diffusion (BD3-LM B=4)",
              "cfg": "conditional MDLM + CFG (w chosen on valid)",
              "cfg_chr22": "conditional MDLM + CFG, started from the chr22 MDLM (init_from)",
              "cg": "unconditional MDLM + classifier guidance (reward classifier)"}


def fmt(s: dict | None, digits: int = 3) -> str:
    from dnadiff.eval import format_range

    return format_range(s, digits) if s else "n/a"


def describe(meta: dict | None) -> str:
    if not meta:
        return "absent"
    return f"{meta.get('backbone')} {meta.get('preset') or ''}, fingerprint {str(meta.get('fingerprint'))[:12]}".strip()


def markdown(r: dict, pngs: list[str]) -> str:
    from dnadiff.utils import markdown_table

    cells = r["cell_types"]
    parts = [*cells, "overall"]
    label = {row: ROW_LABELS[row] for row in r["rows"]}

    def metric_table(key: str, digits: int = 3) -> str:
        return markdown_table([{"row": label[row], **{p: fmt(r["summary"][row][p].get(key), digits) for p in parts}}
                               for row in r["rows"]])

    overall_keys = [("motif_spearman", 3), ("kmer3_pearson", 4), ("js_k1", 4), ("js_k2", 4), ("js_k3", 4),
                    ("js_k4", 4), ("js_k5", 4), ("js_k6", 4), ("gc_mean", 3), ("gc_w1", 4), ("memorised", 3),
                    ("distinct_6mers", 3), ("pairwise_identity", 3), ("frechet", 3),
                    ("disc_auroc_cnn", 3), ("disc_auroc_kmer_lr", 3)]
    overall = markdown_table([{"row": label[row], **{k: fmt(r["summary"][row]["overall"].get(k), d)
                                                     for k, d in overall_keys}} for row in r["rows"]])
    markers = []
    for row in r["rows"]:
        for cell in cells:
            m = r["summary"][row]["markers"][cell]
            own = m[cell]["mean"]
            others = np.nanmean([m[c]["mean"] for c in cells if c != cell])
            markers.append({"row": label[row], "samples of": cell, "markers": "/".join(r["markers"][cell]),
                            "marker hits/kb": fmt(m[cell]), "in the other cell types' samples": f"{others:.3f}",
                            "enrichment": f"{own / others:.2f}" if others > 0 else "n/a"})
    models = markdown_table([{"row": label[row], "config": f"`{m['config']}`", "parameters": m["parameters"],
                              "steps": m["steps"], "valid bits/base": m["val_bits_per_base"],
                              "train wall s": m["train_wall_s"], "command": f"`{m['command']}`"}
                             for row, m in r["models"].items()])
    gen = markdown_table([{"row": label[row], "seed": g["seed"], "wall s (4 cell types)": g["wall_s"]}
                          for row in r["rows"] if row != "real" for g in r["generation"][row]])
    lines = [f"# DHS generation benchmark (issue 34 §4): scale {r['scale']}", "",
             f"`{r['command']}`  ",
             f"{r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU ({r['threads']} thread); {r['machine']}; "
             f"load before {r['load_before']}, after {r['load_after']}.", "",
             f"{r['num_per_cell_type']} sequences per cell type and seed, seeds {r['seeds']}; mean ± range (max − min) "
             "over seeds. Reference of every row: half B of each cell type's test sequences (chr1; a random half "
             "per seed); the real row is test sequences from half A. Protocol and metric definitions: the "
             "docstring of pipelines/dhs_benchmark.py.", "",
             f"Oracles: reward `{r['oracles']['reward']}` ({describe(r['oracles'].get('reward_meta'))}), evaluation "
             f"`{r['oracles']['evaluation']}` ({describe(r['oracles'].get('evaluation_meta'))}) "
             "(pipelines/dhs_oracles.py; only the evaluation oracle scores, nothing generates with it).", "",
             *carried_lines(r.get("carried"), label, unjudged_rows(r)),
             "## Target-cell-type rate under the evaluation oracle (k-mer LR)", "", metric_table("target"), "",
             *judging.neural_section(r["oracles"].get("neural"), metric_table),
             "## JASPAR motif hit-rate Spearman vs real test sequences of the same cell type", "",
             metric_table("motif_spearman"), "",
             "## Marker motifs: hits/kb in each cell type's samples and enrichment over the row's other cell types",
             "", markdown_table(markers), "",
             "## Overall (all cell types pooled)", "", overall, "",
             "memorised: share with a training sequence >= 90% identical (same offset, either strand) or a >= 50 bp "
             "exact match; compare with the real row. distinct_6mers: distinct 6-mers / 4,096.", "",
             "## 6-mer JS per cell type", "", metric_table("js_k6", 4), "",
             "## Memorisation per cell type", "", metric_table("memorised"), ""]
    for key, row in (("cfg_weights", "cfg"), ("cfg_chr22_weights", "cfg_chr22")):
        cw = r.get(key)
        if not cw:
            continue
        lines += [f"## CFG weights: {row} (validation split, reward classifier)", "", cw["rule"] + ".", "",
                  markdown_table([{"cell type": c, **{f"w={x['weight']:g}": f"{x['reward_target_rate']:.3f} / "
                                                      f"{x['js_k4_valid']:.4f}" for x in rows},
                                   "chosen": cw["chosen"][c]} for c, rows in cw["grid"].items()]),
                  "", "(reward-classifier target rate / 4-mer JS to validation)", ""]
    if r.get("chr22_model"):
        lines += [f"{ROW_LABELS['cfg_chr22']}: `model.init_from={r['chr22_model']}` (the chr22 pretraining's own "
                  "budget not counted; the rest as the cfg row: config, budget, protocol).", ""]
    lines += ["## Models", "", models, "", "## Generation", "", gen, ""]
    lines += [f"![{Path(p).stem}]({Path(p).name})" for p in pngs]
    return "\n".join(lines) + "\n"


def unjudged_rows(r: dict) -> list[str]:
    """Rows scored before the neural oracle and the discriminator existed (carried from an older JSON)."""
    return [row for row in r["rows"] if "target_neural" not in r["summary"][row]["overall"]]


def carried_lines(carried: dict | None, label: dict, unjudged: list[str] | tuple = ()) -> list[str]:
    """The paragraph on rows added from an earlier run's JSON (--carry-from), with the rows both runs made; names
    the carried rows whose samples predate the newer judges (`unjudged`)."""
    if not carried or not carried["rows"]:
        return []
    old = [row for row in carried["rows"] if row in unjudged]
    stale = (f" Of them, {', '.join(label.get(row, row) for row in old)} {'was' if len(old) == 1 else 'were'} "
             "scored before the neural oracle and the discriminator, so those columns read n/a on "
             f"{'it' if len(old) == 1 else 'them'}." if old else " Their samples were scored by every judge of this "
             "table.")
    both = "; ".join(f"{label.get(row, row)}: {c['metrics']} overall metrics, max |difference| "
                     f"{'n/a' if c['max_abs_diff'] is None else format(c['max_abs_diff'], '.2g')}"
                     for row, c in carried["check"].items()) or "none"
    fp = "; ".join(f"{role} {v['there'] and v['there'][:12]} there, {v['here'] and v['here'][:12]} here"
                   for role, v in carried.get("oracle_fingerprints", {}).items())
    return [f"Rows carried from `{carried['from']}` (an earlier run: `{carried['command']}`; same data, scale and "
            "seeds, checked): " + ", ".join(label.get(row, row) for row in carried["rows"]) + ", not re-scored here."
            f"{stale} Rows made by both runs (the real row must score alike: the same judges): {both}. Oracle "
            f"fingerprints (file bytes): {fp}.{earlier_note(carried.get('earlier'), label)}", ""]


def earlier_note(earlier: dict | None, label: dict) -> str:
    """' Of those, ROWS were made by `COMMAND`.' along the chain of --carry-from runs (rows carried twice)."""
    parts = []
    while earlier and earlier.get("rows"):
        rows = ", ".join(label.get(row, row) for row in earlier["rows"])
        parts.append(f"{rows} were made by `{earlier['command']}`")
        earlier = earlier.get("earlier")
    return " Of those, " + "; of those, ".join(parts) + "." if parts else ""


def plots(r: dict, results: Path) -> list[str]:
    """Target rate per cell type (bars with the seed range) and the marker enrichment heat map."""
    plt = common.pyplot()
    cells, rows = r["cell_types"], r["rows"]
    written = []
    if all("target" in r["summary"][row]["overall"] for row in rows):
        fig, ax = plt.subplots(figsize=(7, 3.5))
        width = 0.8 / len(rows)
        for j, row in enumerate(rows):
            s = [r["summary"][row][p]["target"] for p in [*cells, "overall"]]
            x = np.arange(len(s)) + j * width
            ax.bar(x, [v["mean"] for v in s], width, yerr=[[v["mean"] - v["min"] for v in s],
                                                           [v["max"] - v["mean"] for v in s]], label=row)
        ax.set_xticks(np.arange(len(cells) + 1) + 0.4 - width / 2, [*cells, "overall"])
        ax.set_ylabel("target-cell-type rate")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7, ncol=len(rows))
        path = results.parent / f"{results.name}_target_rate.png"
        written.append(common.save_png(fig, path, dpi=120))
    mats = {row: np.array([[r["summary"][row]["markers"][c][mk]["mean"] for mk in cells] for c in cells])
            for row in rows}
    top = max(float(np.nanmax(m)) for m in mats.values())
    fig, axes = plt.subplots(1, len(rows), figsize=(2.4 * len(rows) + 1.2, 3.0), squeeze=False,
                             constrained_layout=True)
    for j, (ax, row) in enumerate(zip(axes[0], rows)):
        im = ax.imshow(mats[row], cmap="viridis", vmin=0.0, vmax=top)  # one colour scale for every row
        ax.set_title(row, fontsize=8)
        ax.set_xticks(range(len(cells)), [f"{c} motifs" for c in cells], rotation=60, fontsize=6)
        ax.set_yticks(range(len(cells)), [f"{c} samples" for c in cells] if j == 0 else [], fontsize=6)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="marker hits / kb")
    path = results.parent / f"{results.name}_markers.png"
    written.append(common.save_png(fig, path, dpi=120))
    return written

