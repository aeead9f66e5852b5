"""Markov rows and the wall-clock budget of pipelines/dna_perplexity.py (tab. 6 with classical baselines).

Markov rows: order-k chains (dnadiff/backbones/markov.py, interpolated Kneser-Ney) fitted by
`dnadiff train` on the same train split, windows and strands as the neural rows, scored on the
same test windows with the same exact `ar` objective. k = 0, 3, 5, 8, and the k chosen on the
valid split over 0..10 ("best k"), which is the row neural models are compared with. A count fit
is deterministic: one run, no seeds.

Budget (--budget-minutes N, CPU scale): the neural training wall clock is split over the training
runs in proportion to their step counts (so a pretrain + fine-tune pair gets what an AR row gets,
as with steps), each run stopped by a Lightning Timer; max_steps is lifted so time is the limit.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

MARKOV_ORDERS = (0, 3, 5, 8)
MARKOV_BEST = "markov_best"
MAX_ORDER = 10


def markov_specs(orders=MARKOV_ORDERS, max_order: int = MAX_ORDER) -> list[dict]:
    rows = [{"row": f"Markov k={k} (interp. Kneser-Ney)", "key": f"markov_k{k}", "order": k, "kind": "exact",
             "steps": 0, "markov": True} for k in orders]
    rows.append({"row": f"Markov best k on valid (0..{max_order})", "key": MARKOV_BEST, "order": -1,
                 "kind": "exact", "steps": 0, "markov": True})
    return rows


def run_markov_rows(data: list[str], out_dir: Path, evaluate, echo=print, orders=MARKOV_ORDERS,
                    max_order: int = MAX_ORDER) -> dict[str, list[dict]]:
    """Fit every Markov row with `dnadiff train` (experiments/tiny_dna_markov + the scale's data
    overrides) and score it with `evaluate(model_dir, seed) -> row dict` (the neural rows' scorer)."""
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.training import train

    results: dict[str, list[dict]] = {}
    for spec in markov_specs(orders, max_order):
        overrides = [f"name={spec['key']}", f"out_dir={out_dir}", f"model.overrides.order={spec['order']}",
                     f"model.overrides.max_order={max_order}", *data]
        cfg = load_config(RunConfig, "experiments/tiny_dna_markov", overrides)
        t0 = time.time()
        res = train(cfg, overwrite=True)
        fit_s = time.time() - t0
        row = evaluate(res.model_dir, 0)
        row.update(seed="-", train_seconds=round(fit_s, 1), parameters=res.metrics["parameters"],
                   order=res.metrics["order"], model_dir=str(res.model_dir))
        if "valid_bits_per_base_by_order" in res.metrics:
            row["valid_bits_per_base_by_order"] = res.metrics["valid_bits_per_base_by_order"]
        results[spec["key"]] = [row]
        echo(f"{spec['row']:<40} order {row['order']}: ppl {row['perplexity']:.4f} "
             f"({row['bits_per_base']:.4f} bits/base, fit {fit_s:.0f}s)")
    return results


def budget_seconds(specs: list[dict], minutes: float, seeds: int) -> dict[str, float]:
    """Wall-clock seconds per training run: minutes * 60 split over seeds x rows by step share."""
    trained = [s for s in specs if not s.get("markov")]
    total_steps = sum(s["steps"] for s in trained) * seeds
    if total_steps <= 0:
        return {}
    return {s["key"]: minutes * 60.0 * s["steps"] / total_steps for s in trained}


def timer_callback(seconds: float):
    from lightning.pytorch.callbacks import Timer

    return Timer(duration=timedelta(seconds=max(1.0, seconds)), interval="step")


def compare_with_markov(table: list[dict], results: dict[str, list[dict]]) -> list[str]:
    """One line per neural row: its mean test bits/base minus the best-k Markov row's (negative = beats it)."""
    import numpy as np

    best = results.get(MARKOV_BEST)
    if not best:
        return []
    ref = best[0]["bits_per_base"]
    lines = [f"Best Markov row (k = {best[0]['order']}, chosen on valid): {ref:.4f} bits/base on the same test "
             "windows."]
    for row in table:
        key = row.get("key")
        not_a_bound = row.get("kind") == "masked-token CE (not a bound)"
        if not key or key.startswith("markov") or key not in results or not_a_bound:
            continue
        bits = [r["bits_per_base"] for r in results[key]]
        mean, worst, best_seed = float(np.mean(bits)), max(bits), min(bits)
        verdict = ("beats it" if worst < ref else "ties it (seeds on both sides)" if best_seed < ref
                   else "does not beat it")
        lines.append(f"- {row['model']}: {mean:.4f} bits/base ({mean - ref:+.4f}; seeds {best_seed:.4f}..{worst:.4f}) "
                     f"{verdict}"
                     + (" (an upper bound: the true NLL may be lower)" if row.get("kind") == "bound" else ""))
    return lines
