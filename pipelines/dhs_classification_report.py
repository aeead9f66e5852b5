"""The page of pipelines/dhs_classification.py: the learning-curve PNG (test accuracy against training
sequences, one line per method) and the Markdown tables of its rows, subsets and runs."""

from __future__ import annotations

from pathlib import Path

import common

METHODS = ("kmer_lr", "scratch", "pretrained")
LABELS = {"kmer_lr": "k-mer LR (k 3-6, both strands)", "scratch": "Caduceus from scratch",
          "pretrained": "Caduceus from the DHS MDLM"}
HOLDOUT_MAX = 1000  # a run's hold-out: min(10%, 1000 sequences) of its subset


def plot(r: dict, path: Path) -> None:
    """Test accuracy against training sequences, one line per method (log x)."""
    fig, ax = common.pyplot().subplots(figsize=(5.5, 4))
    for m in METHODS:
        pts = sorted((row["num_train"], row["test"]["accuracy"]) for row in r["rows"] if row["method"] == m)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=LABELS[m])
    ax.axhline(0.25, color="grey", lw=0.8, ls=":", label="chance (4 classes)")
    ax.set_xscale("log")
    ax.set_xlabel("training sequences (stratified subset, seed 0)")
    ax.set_ylabel("test accuracy (chr1, 4-way)")
    ax.set_title(f"DHS cell-type classification ({r['scale']})")
    ax.legend(fontsize=8)
    common.save_png(fig, path, dpi=120)


def markdown(r: dict, png: str) -> str:
    from dnadiff.data import CELL_TYPES
    from dnadiff.utils import markdown_table

    main_rows = [{"method": row["label"], "training sequences": row["num_train"],
                  "chosen": f"{row['hyperparameter']} {row['chosen']:g}" + (
                      " (grid edge)" if len(row["settings"]["grid"]) > 1 and row["chosen"] in
                      (row["settings"]["grid"][0], row["settings"]["grid"][-1]) and
                      len(row["runs"]) > 1 else ""),
                  "chr2 accuracy": f"{row['chosen_valid_split_accuracy']:.4f}",
                  "test accuracy": f"{row['test']['accuracy']:.4f}", "macro-F1": f"{row['test']['f1_macro']:.4f}",
                  "MCC": f"{row['test']['mcc']:.4f}", **{c: f"{row['test']['per_class'][c]:.3f}" for c in CELL_TYPES},
                  "wall s": row["wall_s"]} for row in r["rows"]]
    run_rows = [{"method": row["method"], "size": row["size"], "C / lr": f"{row['hyperparameter']} {x['setting']:g}",
                 "fit / hold-out": f"{x['num_fit']} / {x['num_holdout']}", "steps": x["steps"],
                 "best epoch": x["best_epoch"], "hold-out acc": f"{x['holdout_accuracy']:.4f}",
                 "chr2 acc (n)": f"{x['valid_split_accuracy']:.4f} ({x['valid_split_n']})",
                 "wall s": x["wall_s"], "command": f"`{x['command']}`"} for row in r["rows"] for x in row["runs"]]
    subsets = [{"size": row["size"], **row["subset_counts"], "total": sum(row["subset_counts"].values())}
               for row in r["rows"] if row["method"] == r["rows"][0]["method"]]
    b, p = r["neural_budget"], r["pretrained"]
    pre = (f"`{p['dir']}` ({p['name']}, {p['steps']} steps, validation {p['val_bits_per_base']} bits per base)"
           if p else "not run here")
    invocations = sorted({row["command"] for row in r["rows"]})
    lines = [
        f"# DHS cell-type classification (issue 34 §6): scale {r['scale']}",
        "",
        "Commands (each row records the one that made it):  ",
        *[f"`{c}`  " for c in invocations],
        f"Last invocation: `{r['command']}`, {r['wall_s']:.0f} s wall; {r['machine']}; before: {r['load_before']}; "
        f"after: {r['load_after']}.",
        "",
        f"Data: {r['data']['source']}, sha256 `{r['data']['sha256'][:16]}…`; 4-way task "
        f"({', '.join(CELL_TYPES)}); training split {r['data']['n_train']} sequences; settings chosen on the "
        "validation split (chr2); the test split (chr1) read once per row by the chosen classifier.",
        "",
        f"- k-mer LR: C from {r['c_grid']} on chr2 at every size.",
        f"- neural rows: learning rate from {b['lr_grid']} on chr2 (a stratified subsample of "
        f"{b['neural_valid_max']} chr2 sequences) at the smallest size, kept for the larger ones; budget per run: "
        f"at most {b['epochs']} epochs x {b['max_steps_per_epoch']} steps of {b['batch_size']} sequences "
        f"(<= {b['epochs'] * b['max_steps_per_epoch'] * b['batch_size']:,} sequences seen, one CPU thread), the "
        "best epoch kept on the hold-out. Larger subsets are seen less than once at this budget.",
        f"- pretrained: {pre}; the scratch row builds the same backbone config with fresh weights.",
        f"- every run holds out min(10%, {HOLDOUT_MAX}) of its subset (best epoch of a neural run; the k-mer LR is "
        "fitted on the rest).",
        "",
        f"![learning curve]({png})",
        "",
        "Test accuracy (4-way), macro-F1, MCC and per-cell-type accuracy (recall):",
        "",
        markdown_table(main_rows),
        "",
    ]
    if r["missing"]:
        todo = ",".join(m for m in METHODS if any(x.startswith(m + " ") for x in r["missing"]))
        lines += [f"Not run yet: {', '.join(r['missing'])}; to run them (the rows done are kept): "
                  f"`python pipelines/dhs_classification.py --scale {r['scale']} --rows {todo} --resume`.", ""]
    lines += [f"Training subsets (`data.max_train=N`, stratified, seed {r['subset_seed']}), class counts:", "",
              markdown_table(subsets), "", "Every run (the chosen one per row scored on test):", "",
              markdown_table(run_rows), ""]
    return "\n".join(lines)
