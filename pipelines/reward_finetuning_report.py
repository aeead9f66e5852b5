"""The page of pipelines/reward_finetuning.py: per task the table of guided and fine-tuned rows (the frontier
columns, the discriminator's), the summary line, and the frontier and reward-curve PNGs (also rebuilt by
--render from a finished run's JSON)."""

from __future__ import annotations

from pathlib import Path

import judging  # the discriminator columns (issue 46)
import reward_frontier as frontier  # β grid, curves, frontier plots


def _cell(row: dict, key: str) -> str:
    if key not in row or row[key] is None:
        return ""
    v = row[key]
    if isinstance(v, bool):
        return "*" if v else ""
    if not isinstance(v, float):
        return str(v)
    lo, hi = row.get(key + "_range", [v, v])
    return f"{v:.3g}" if lo == hi else f"{v:.3g} ({lo:.3g}–{hi:.3g})"


# fine-tuned rows: target_reward is E*[r] of p* (SNIS over the pool) beside the designs' reward, what they reached
FRONTIER_COLS = ["realistic_success", "reward", "target_reward", "target_kl", "reached_kl", "kl_bound", "loglik",
                 "gc_range", "kmer3_pearson", "distinct", "distinct_6mers", "nfe_per_design", "updates", "finetune_s",
                 "flattened", "chosen"]


def _frontier_cells(row: dict, task: str) -> dict:
    cells = {c: _cell(row, c) for c in ["method", frontier.success_key(task), *FRONTIER_COLS]}
    cells.update(judging.disc_cells(row))  # — in a table of an older JSON
    if "gc_q05" in row:
        cells["gc_range"] = f"{row['gc_q05']:.3f}–{row['gc_q95']:.3f}"
    if "flattened" in row:  # 1.0 / 0.0 from the run's curve (one training seed)
        cells["flattened"] = _flattened(row.get("family"), row["flattened"])
    if "failed" in row:
        cells["reward"] = f"failed: {row['failed'][:60]}"
    return cells


def _flattened(method: str | None, flat: float) -> str:
    """dpo trains offline on pretrained samples: its logged reward per update is the pool's, the same for every β,
    so its curve says nothing about the model (its val reward, from the model's own samples, does)."""
    if method == "dpo":
        return "n/a"
    return "yes" if flat >= 0.5 else "no"


def _summary(task: str, rows: list[dict]) -> str:
    """Success and cost of the strongest best-of-N beside each fine-tuning method's β chosen on validation."""
    key = frontier.success_key(task)
    bon = [r for r in rows if r.get("family") == "best_of_n" and key in r]
    parts = []
    if bon:
        top = max(bon, key=lambda r: r["strength"])
        parts.append(f"{top['method']}: {key} {top[key]:.3g} at {top['nfe_per_design']:.0f} denoiser rows per design")
    for r in rows:
        if r.get("chosen") and key in r:
            parts.append(f"{r['method']} (β chosen on validation): {r[key]:.3g} at {r['nfe_per_design']:.0f}")
    unguided = next((r for r in rows if r.get("family") == "unguided" and key in r), None)
    if unguided:
        parts.append(f"unguided: {unguided[key]:.3g} at {unguided['nfe_per_design']:.0f}")
    return "; ".join(parts)


def _finetune_total_s(res: dict) -> float:
    """Wall seconds of every fine-tuning run: the grid's and the learning-rate choice's (each run once)."""
    runs = {}
    for rec in (res.get("frontier") or {}).values():
        for r in [*rec["runs"], *(rec.get("lr_choice") or {}).get("runs", [])]:
            runs[r.get("dir") or id(r)] = r.get("finetune_s") or 0.0
    return sum(runs.values())


def markdown(res: dict, pngs: dict | None = None) -> str:
    from dnadiff.utils import format_table

    parts = [f"# Reward fine-tuning beside inference-time guidance (Leptospira), scale {res['scale']}\n",
             f"Command: `{res['command']}`  \nBenchmark: {res['benchmark']}  \n"
             f"Wall time of this invocation: {res['wall_s']} s on {res['machine']}; at the end, "
             f"{res['load_average']}. The fine-tuning runs' own wall time, all tasks (runs kept in WORK/finetuned "
             f"from earlier invocations included): {_finetune_total_s(res) / 60:.0f} min.  \n"
             f"Realistic success: success, GC in [{res['gc_range'][0]:.3f}, {res['gc_range'][1]:.3f}] "
             f"(5–95 % of the real coding test sequences) and log-likelihood ≥ {res['loglik_floor']:.3f} nats/base "
             "(their 5 % quantile) under the pretrained model. Numbers: mean over design seeds (min–max); fine-tuned "
             "rows: one training seed. KL columns (nats): target_kl, the SNIS estimate of KL(p* ‖ p_pre) over the "
             "pool; reached_kl, the fine-tuned model's trajectory KL to the pretrained one over its validation "
             "samples; kl_bound, best-of-N's log n − (n−1)/n. `chosen`: the β picked per method on the validation "
             "reward (largest β within one standard error of the best).\n"]
    parts.append(judging.disc_note("one design seed's designs (mean over seeds shown)") + "\n")
    spread = res.get("reward_spread")
    if spread:
        each = [f"{name}: coding {v['coding_mean']:.4g} ± {v['coding_sd']:.2g}, intergenic "
                f"{v['intergenic_mean']:.4g} ± {v['intergenic_sd']:.2g} (n = {v['n']} each)"
                for name, v in spread.items()]
        parts.append("Reward classifiers (log p(coding | x), Hyena on half A) on the benchmark's real test sequences, "
                     "mean ± sd: " + "; ".join(each)
                     + ". The clean one is the reward of every method but cg_grad, which reads the noise-aware one.\n")
    for task, rows in res["tasks"].items():
        parts.append(f"## Task `{task}`\n")
        rec = (res.get("frontier") or {}).get(task)
        if rec:
            kept = {t["beta"] for t in rec["kept"]}
            every = max(1, len(rec["table"]) // 16)
            shown = [t for i, t in enumerate(rec["table"]) if i % every == 0 or t["beta"] in kept]
            trows = [{"β": f"{t['beta']:.4g}", "E*[r]": f"{t['reward']:.4g} ± {t['reward_se']:.2g}",
                      "KL(p*‖p_pre)": f"{t['kl']:.3g} ± {t['kl_se']:.2g}", "ESS": f"{t['ess']:.1f}",
                      "kept": "yes" if t["beta"] in kept else ""} for t in shown]
            parts.append(f"Target p* ∝ p_pre·exp(r/β) against β: SNIS over {rec['pool']} pretrained samples (reward "
                         f"mean {rec['pool_reward_mean']:.4g}, sd {rec['pool_reward_sd']:.3g}); the KL estimate is "
                         f"capped at log {rec['pool']} = {rec['kl_cap']:.2f} nats, and a small ESS marks it "
                         "unreliable.\n")
            parts.append("```\n" + format_table(trows, list(trows[0])) + "\n```\n")
        cols = ["method", frontier.success_key(task), *FRONTIER_COLS, *judging.disc_cells({})]
        table = format_table([_frontier_cells(r, task) for r in rows], cols)
        parts.append(f"Frontier:\n\n```\n{table}\n```\n\n{_summary(task, rows)}\n")
        parts.append(judging.floor_line(next((r for r in rows if r.get("family") == "real"), None),
                                        "the real row: real coding test sequences vs other ones") + "\n")
        for kind in ("frontier", "curves"):
            if pngs and pngs.get((task, kind)):
                parts.append(f"![{task} {kind}]({Path(pngs[(task, kind)]).name})\n")
        if rec:
            lc = rec["lr_choice"]
            parts.append(f"Learning rate per method ({lc['task']} task, β = {lc['beta']:.4g}, target KL "
                         f"{lc['target_kl']:.3g}; validation objective E[r] − β·KL): "
                         + ", ".join(f"{m} {lr:g}" for m, lr in lc["lrs"].items()) + ".\n")
            crow = [{"run": f"{r['method']} β={r['beta']:.3g} lr={r['lr']:g}", "updates": str(r["updates"]),
                     "wall_s": _cell(r, "finetune_s"), "reward 1st¼": _cell(r, "first_q"),
                     "3rd¼": _cell(r, "third_q"), "last¼": _cell(r, "last_q"),
                     "late gain share": _cell(r, "late_gain_share"),
                     "flattened": "" if "flattened" not in r else _flattened(r["method"], r["flattened"]),
                     "val reward": _cell(r, "val_reward"), "val KL": _cell(r, "val_kl"),
                     "failed": r.get("failed", "")[:50]} for r in rec["runs"]]
            if crow:
                parts.append("Fine-tuning runs (training reward per update, quarter means; dpo's is the reward of "
                             "the pretrained pool pairs it trains on, not of the model: its `val reward` is):\n\n```\n"
                             + format_table(crow, list(crow[0])) + "\n```\n")
    return "\n".join(parts)


def plots(res: dict, out: str) -> dict:
    """Per task: the frontier PNG and the reward-vs-update curves PNG, next to the output prefix."""
    pngs = {}
    for task, rows in res["tasks"].items():
        rec = (res.get("frontier") or {}).get(task)
        if rec is None:
            continue
        path = Path(f"{out}_{task}_frontier.png")
        frontier.plot_frontier(task, [r for r in rows if r.get("family") != "real"], rec["table"], path)
        pngs[(task, "frontier")] = str(path)
        curves = {f"{r['method']} β={r['beta']:.3g}": r.get("curve") or [] for r in rec["runs"]}
        path = Path(f"{out}_{task}_curves.png")
        frontier.plot_curves(task, curves, path)
        pngs[(task, "curves")] = str(path)
    return pngs
