"""How biased is each DRAKES gradient estimator, step by step? An enumerable chain answers exactly.

    python benchmarks/drakes_estimator_bias.py --out results/drakes_estimator_bias     # ~10 min, one thread

The chain (tests/helpers/tabular_policy.py): vocabulary 4 + mask, length 3, T = 4 linear-schedule steps (step i
unmasks 1/4, 1/3, 1/2, 1 of the still-masked positions), one table of logits per step (StepTableDenoiser), so
the gradient with respect to table i is the objective's gradient through step i's decisions alone. The exact
gradients of E[r] and of the loss KL(P_θ ‖ P_pre) − E[r]/β (β = 1; the trajectory KL from the transition
matrices) come from enumerating the 125 partly masked states; each estimator's expected gradient is its mean
over --draws trajectories (Monte Carlo). Per step: ratio = ⟨ĝ_i, g_i⟩ / |g_i|² (the share of the true gradient
the estimator delivers on average; 1: unbiased along it) and err = |ĝ_i − g_i| / |g_i| (bias plus Monte Carlo
noise: about sqrt(variance / draws)).

Estimators (dnadiff/reward_tuning/trajectory.py): straight_through (per live step, the paper's Algorithm 1),
soft (soft states, straight-through once at the reward's input: the official code), policy_gradient (the
score-function reference, dnadiff/reward_tuning/policy_gradient.py: unbiased); rows with K = 2 truncate the
gradient to the last 2 steps, `kl=live` drops the KL of the truncated steps (the official `truncate_kl`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROWS = [  # (estimator, τ, K, kl scope)
    ("straight_through", 1.0, None, "all"), ("straight_through", 0.5, None, "all"),
    ("straight_through", 0.1, None, "all"), ("soft", 1.0, None, "all"), ("soft", 0.5, None, "all"),
    ("soft", 0.25, None, "all"), ("soft", 0.1, None, "all"), ("soft", 0.05, None, "all"),
    ("straight_through", 1.0, 2, "all"), ("straight_through", 1.0, 2, "live"), ("soft", 0.1, 2, "all"),
    ("soft", 0.1, 2, "live"), ("policy_gradient", None, None, "all"),
]


def setup(beta: float):
    """The 4-step tabulated models of tests/test_drakes_estimators.py and the exact gradients of the reward and
    of the objective at β."""
    from helpers.tabular_policy import (
        MASK,
        SEQS,
        L,
        V,
        exact_objective,
        exact_reward,
        linear_grid,
        pretrained_and_finetuned,
        soft_reward,
    )

    grid = linear_grid(4)
    r = soft_reward(F.one_hot(SEQS, V).double())
    pre, ft = pretrained_and_finetuned(grid.times)
    exact = {"reward": -torch.autograd.grad(exact_reward(ft, grid, r), ft.table)[0],
             "objective": torch.autograd.grad(exact_objective(ft, pre, grid, r, beta), ft.table)[0]}
    return grid, soft_reward, pre, ft, exact, (L, MASK, V)


def per_step(exact: torch.Tensor, est: torch.Tensor) -> list[dict]:
    out = []
    for i in range(exact.shape[0]):
        g, e = exact[i], est[i]
        out.append({"ratio": float((g * e).sum() / (g * g).sum()), "err": float((g - e).norm() / g.norm())})
    return out


def measure(row, grid, soft_reward, pre, ft, exact, dims, beta: float, draws: int, batch: int) -> dict:
    from dnadiff.reward_tuning import drakes_loss, policy_gradient_loss, sample_groups
    from dnadiff.reward_tuning.trajectory import rollout

    L, MASK, V = dims
    estimator, tau, K, scope = row
    gen = torch.Generator().manual_seed(1)
    totals = {"reward": torch.zeros_like(ft.table), "objective": torch.zeros_like(ft.table)}
    n = max(1, draws // batch)
    for _ in range(n):
        x0 = torch.full((batch, L), MASK)
        if estimator == "policy_gradient":
            groups = sample_groups(ft, grid, MASK, x0, V, lambda x: soft_reward(F.one_hot(x, V).double()),
                                   generator=gen)
            loss = policy_gradient_loss(ft, pre, grid, MASK, groups, beta, group_size=8, recompute=False).loss
            totals["objective"] += torch.autograd.grad(loss, ft.table)[0]
            continue
        ro = rollout(ft, None, grid, MASK, x0, V, temperature=tau, estimator=estimator, grad_steps=K, generator=gen,
                     recompute=False)
        totals["reward"] += torch.autograd.grad(-soft_reward(ro.onehot).mean(), ft.table)[0]
        loss = drakes_loss(ft, pre, soft_reward, grid, MASK, x0, V, beta, truncate_steps=K, temperature=tau,
                           estimator=estimator, kl_scope=scope, generator=gen, recompute=False).loss
        totals["objective"] += torch.autograd.grad(loss, ft.table)[0]
    res = {"estimator": estimator, "temperature": tau, "truncate_steps": K, "kl": scope, "draws": n * batch}
    for key in ("reward", "objective"):
        if estimator == "policy_gradient" and key == "reward":
            continue
        res[key] = per_step(exact[key], totals[key] / n)
    return res


def markdown(rows: list[dict], args, wall: float, load: str) -> str:
    head = ("# DRAKES gradient estimators on an enumerable chain: expected gradient vs the exact one, per step\n\n"
            f"Command: `python benchmarks/drakes_estimator_bias.py --draws {args.draws} --out {args.out}`  \n"
            f"Chain: tests/helpers/tabular_policy.py (V = 4 + mask, L = 3, T = 4 linear steps; step i unmasks 1/4, "
            f"1/3, 1/2, 1 of the masked positions), β = {args.beta}. Wall {wall:.0f} s, one thread; `uptime`: {load}."
            "\n\nratio = ⟨E ĝ_i, g_i⟩/|g_i|² of step i's table (1: unbiased along the true gradient), err = "
            "|E ĝ_i − g_i|/|g_i| (bias and Monte Carlo noise). `reward`: the gradient of E[r] alone; `objective`: "
            "of KL − E[r]/β.\n\n```\n")
    lines = ["estimator         tau   K  kl    draws    reward ratio (steps 0..3)     objective ratio (steps 0..3)"
             "    objective err"]
    for r in rows:
        fmt = (lambda key: " ".join(f"{s['ratio']:6.3f}" for s in r[key]) if key in r else "   —" + " " * 24)
        errs = " ".join(f"{s['err']:5.3f}" for s in r["objective"])
        lines.append(f"{r['estimator']:<17} {r['temperature'] if r['temperature'] is not None else '—':<5} "
                     f"{r['truncate_steps'] or 4:<2} {r['kl']:<5} {r['draws']:<8} {fmt('reward'):<29} "
                     f"{fmt('objective'):<31} {errs}")
    return head + "\n".join(lines) + "\n```\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=262144, help="trajectories per estimate (default 262144)")
    ap.add_argument("--batch", type=int, default=32768)
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    import subprocess

    load0 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    start = time.time()
    grid, soft_reward, pre, ft, exact, dims = setup(args.beta)
    rows = []
    for row in ROWS:
        rows.append(measure(row, grid, soft_reward, pre, ft, exact, dims, args.beta, args.draws, args.batch))
        print(json.dumps(rows[-1]), flush=True)
    load1 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    md = markdown(rows, args, time.time() - start, f"{load0} / {load1}")
    print(md)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps({"beta": args.beta, "rows": rows}, indent=1))
        out.with_suffix(".md").write_text(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
