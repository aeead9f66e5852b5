"""The reward–naturalness frontier of pipelines/reward_finetuning.py (issue 35 §2): the β grid chosen
from the target itself, the strengths of the inference-time methods, each fine-tuning run's reward-vs-update
curve, and the frontier tables and plots. No training here: reward_finetuning.py runs the rows.

The β grid. For a reward r and β > 0 the fine-tuning target is p*(x) ∝ p_pre(x) · exp(r(x)/β); its expected
reward and KL(p* ‖ p_pre) are estimated by self-normalised importance sampling over one pool of pretrained
samples (dnadiff/reward_tuning/target.py, Owen 2013 §9.2–9.3), which costs no training: a wide grid of
candidate βs (`candidate_betas`, multiples of the pool's reward standard deviation) is scored from the
same rewards, and `choose_betas` keeps, for each wanted target KL (e.g. 0.05 … 3 nats), the candidate
whose estimated KL is closest on a log scale. On a fixed pool the estimated KL is the KL of the tilted
weights from uniform, KL(λ) with λ = 1/β, and dKL/dλ = λ · Var_λ(r) ≥ 0 (the derivative of an exponential
family's divergence from its base), so the kept βs, sorted from large to small, have non-decreasing
target KL; the estimate is capped at log(pool size) nats (target.py), which the table states with the ESS.

Best-of-N's KL to the pretrained model is at most log n − (n − 1)/n (Beirami et al. 2024, arXiv
2401.01879: the commonly quoted formula is an upper bound on the actual KL of the best-of-n policy), the column
`kl_bound` of its rows; for SVDD, SMC, CFG and CG no closed form exists and the KL column is left empty:
their naturalness is the log-likelihood, GC range and 3-mer Pearson columns every row has.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import common
import numpy as np

# a curve has flattened when the gain over its last quarter is at most this share of its whole gain
# (first quarter -> last quarter), or within two standard errors of the last quarter's mean
FLAT_SHARE = 0.25


def candidate_betas(rewards, lo: float = -2.5, hi: float = 2.0, num: int = 46) -> list[float]:
    """β = σ · 10^k for k on a grid from `lo` to `hi` (σ: the rewards' standard deviation; 1 when they
    are all equal), from large to small."""
    r = np.asarray(rewards, dtype=float)
    sd = float(r.std()) if r.size > 1 else 0.0
    sd = sd if sd > 0 and math.isfinite(sd) else 1.0
    return [float(sd * 10.0**k) for k in np.linspace(hi, lo, int(num))]


def target_table(rewards, betas) -> list[dict]:
    """SNIS estimates of p* at each β (target.snis_target): beta, reward, reward_se, kl, kl_se, ess, n."""
    import torch

    from dnadiff.reward_tuning import snis_target

    r = torch.as_tensor(np.asarray(rewards, dtype=float), dtype=torch.float64)
    return [{"beta": float(b), **{k: v for k, v in snis_target(r, float(b)).items() if k != "pretrained_reward"}}
            for b in betas]


def choose_betas(table: list[dict], kl_targets) -> list[dict]:
    """For each wanted KL, the row of `table` whose KL is closest on a log scale (KL floored at 1e-6);
    distinct rows, sorted by β from large to small (target KL non-decreasing: module docstring). Each kept
    row gains `kl_wanted`."""
    kept: dict[float, dict] = {}
    for want in kl_targets:
        best = min(table, key=lambda row: abs(math.log(max(row["kl"], 1e-6)) - math.log(float(want))))
        kept.setdefault(best["beta"], {**best, "kl_wanted": float(want)})
    return sorted(kept.values(), key=lambda row: -row["beta"])


def bon_kl_bound(n: int) -> float:
    """KL(best-of-n ‖ pretrained) ≤ log n − (n − 1)/n (Beirami et al. 2024, arXiv 2401.01879)."""
    return math.log(n) - (n - 1) / n


def read_curve(metrics_csv: Path, key: str = "train/reward") -> list[tuple[int, float]]:
    """(update, value) of one logged column of a fine-tuning run's logs/metrics.csv (rows without it skipped)."""
    out = []
    path = Path(metrics_csv)
    if not path.is_file():
        return out
    with path.open() as fh:
        for row in csv.DictReader(fh):
            value, step = row.get(key, ""), row.get("step", "")
            if value not in ("", None) and step not in ("", None):
                out.append((int(float(step)), float(value)))
    return out


def curve_stats(curve: list[tuple[int, float]]) -> dict:
    """Whether a reward-vs-update curve has flattened: the means of its first, third and last quarters,
    the last quarter's gain over the third as a share of the whole gain (first -> last quarter), and
    `flattened` (FLAT_SHARE, or the last quarter's gain within two standard errors of its mean)."""
    ys = np.array([v for _, v in curve], dtype=float)
    if ys.size < 4:
        return {"updates_logged": int(ys.size), "first_q": float("nan"), "third_q": float("nan"),
                "last_q": float("nan"), "late_gain_share": float("nan"), "flattened": False}
    q = np.array_split(ys, 4)
    first, third, last = float(q[0].mean()), float(q[2].mean()), float(q[3].mean())
    se = float(q[3].std(ddof=1) / math.sqrt(q[3].size)) if q[3].size > 1 else 0.0
    whole = last - first
    late = last - third
    share = late / abs(whole) if whole != 0 else (0.0 if late == 0 else math.copysign(math.inf, late))
    return {"updates_logged": int(ys.size), "first_q": first, "third_q": third, "last_q": last,
            "late_gain_share": float(share), "flattened": bool(abs(late) <= max(FLAT_SHARE * abs(whole), 2 * se))}


def choose_by_validation(runs: list[dict], key: str = "val_reward", se_key: str = "val_reward_se") -> dict:
    """The run with the highest validation reward, or among those within one standard error of it the
    one with the largest β (the closest to the pretrained model): the one-standard-error rule."""
    best = max(runs, key=lambda r: r[key])
    near = [r for r in runs if r[key] >= best[key] - (best.get(se_key) or 0.0)]
    return max(near, key=lambda r: (r.get("beta", 0.0), r[key]))


def success_key(task: str) -> str:
    return "oracle_success" if task == "classifier" else "property_success"


def frontier_y(task: str) -> str:
    """The frontier plot's reward axis: oracle success on the classifier task (the independent judge), the
    mean reward of the designs on the property tasks (their success, a hit inside a narrow band, is 0 for
    most rows at small scale)."""
    return "oracle_success" if task == "classifier" else "reward"


def _family(method: str) -> str:
    return method.split(" ")[0]


def plot_frontier(task: str, rows: list[dict], targets: list[dict], path: Path) -> None:
    """Left: oracle success (classifier task) or mean reward (frontier_y) against the designs'
    log-likelihood under the pretrained model, every row. Right: the training reward against the KL to
    the pretrained model: the SNIS target curve over β, each fine-tuned run's reach (trajectory KL on its
    validation samples) and best-of-N at its KL bound."""
    plt = common.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    fams = sorted({_family(r["method"]) for r in rows})
    colours = {f: plt.get_cmap("tab10")(i % 10) for i, f in enumerate(fams)}
    key = frontier_y(task)
    for fam in fams:
        mine = [r for r in rows if _family(r["method"]) == fam and key in r]
        if not mine:
            continue
        left.plot([r["loglik"] for r in mine], [r[key] for r in mine], marker="o", ls="-" if len(mine) > 1 else "",
                  color=colours[fam], label=fam)
        for r in mine:
            if r.get("strength_label"):
                left.annotate(r["strength_label"], (r["loglik"], r[key]), fontsize=6, xytext=(2, 2),
                              textcoords="offset points")
    left.set_xlabel("log-likelihood under pretrained (nats/base)")
    left.set_ylabel(key.replace("_", " "))
    left.set_title(f"{task}: {key.replace('_', ' ')} vs naturalness")
    left.legend(fontsize=7)
    tgt = sorted(targets, key=lambda t: t["kl"])
    right.plot([t["kl"] for t in tgt], [t["reward"] for t in tgt], color="black", lw=1, label="target p* (SNIS)")
    for fam in fams:
        pts = [(r["reached_kl"], r["reached_reward"]) for r in rows
               if _family(r["method"]) == fam and r.get("reached_kl") is not None and "reached_reward" in r]
        if not pts and fam == "best_of_n":
            pts = [(r["kl_bound"], r["reward"]) for r in rows if _family(r["method"]) == fam and "kl_bound" in r]
        if pts:
            right.plot(*zip(*pts), marker="s" if fam != "best_of_n" else "^", ls="", color=colours[fam], label=fam)
    right.set_xscale("symlog", linthresh=0.01)
    right.set_xlabel("KL to pretrained (nats; fine-tuned: trajectory KL; best-of-N: bound)")
    right.set_ylabel("mean training reward")
    right.set_title(f"{task}: reward vs KL")
    right.legend(fontsize=7)
    common.save_png(fig, path, dpi=110)


def plot_curves(task: str, curves: dict[str, list], path: Path) -> None:
    """Each fine-tuning run's training reward per update (a running mean over 5 updates)."""
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, curve in curves.items():
        if not curve:
            continue
        xs, ys = zip(*curve)
        w = min(5, len(ys))
        smooth = np.convolve(ys, np.ones(w) / w, mode="valid")
        ax.plot(xs[w - 1:], smooth, label=name, lw=1)
    ax.set_xlabel("update")
    ax.set_ylabel("training reward (batch mean, running mean of 5)")
    ax.set_title(f"{task}: reward vs updates")
    ax.legend(fontsize=6, ncol=2)
    common.save_png(fig, path, dpi=110)


__all__ = ["FLAT_SHARE", "bon_kl_bound", "candidate_betas", "choose_betas", "choose_by_validation", "curve_stats",
           "frontier_y", "plot_curves", "plot_frontier", "read_curve", "success_key", "target_table"]
