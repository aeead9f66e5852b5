"""How consistent is each fine-tuning gradient from one batch to the next? At the pretrained model, N
independent batches' gradients of the DRAKES loss (each estimator) and of the policy-gradient loss:
their norms, the norm of their mean, and their mean pairwise cosine (0: each batch points somewhere else,
so Adam's normalised steps wander; 1: every batch agrees).

Why (issue 51): in results/dhs_drakes_grid_cpu.md DRAKES (soft, τ 0.1, β 0.25) moved 0.093 nats from the
pretrained model in 180 updates with a flat reward curve, where policy gradient at the same β and budget
moved 1.18 nats and its reward rose. On the enumerable chain the soft estimator's expected gradient is
0.84–0.89 of the exact one (results/drakes_estimator_bias.md), so bias does not explain it; this measures
the variance at the grid's batch of 8. At the pretrained model the KL term's gradient is zero (the KL is at
its minimum), so these are the reward terms' gradients.

    python benchmarks/drakes_gradient_snr.py results/dhs_drakes_grid_cpu_inputs/models/cg/model \\
        --reward classifier:results/dhs_drakes_grid_cpu_inputs/oracles/reward_classifier --target HepG2 \\
        --out results/drakes_gradient_snr

Settings as pipelines/dhs_drakes_grid.py's cells: length 200, T = 50 steps, gradient through the last 13
(DRAKES), batch 8 (policy gradient: 2 groups of 4), β = 0.25; one thread.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import _common
import torch

ESTIMATORS = {"drakes_soft": ("soft", 0.1), "drakes_st": ("straight_through", 1.0)}


def flat_grad(params: list) -> torch.Tensor:
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]).double()


def summary(grads: list[torch.Tensor]) -> dict:
    """Norms of each gradient and of their mean, and the mean pairwise cosine between them."""
    g = torch.stack(grads)
    unit = g / g.norm(dim=1, keepdim=True).clamp_min(1e-30)
    cos = [float(unit[i] @ unit[j]) for i, j in itertools.combinations(range(len(grads)), 2)]
    mean_norm = float(g.norm(dim=1).mean())
    return {"batches": len(grads), "mean_norm": mean_norm, "norm_of_mean": float(g.mean(0).norm()),
            "norm_of_mean_over_mean_norm": float(g.mean(0).norm()) / mean_norm if mean_norm else None,
            "pairwise_cosine_mean": sum(cos) / len(cos) if cos else None,
            "pairwise_cosine_min": min(cos, default=None), "pairwise_cosine_max": max(cos, default=None)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common.add_reward_arguments(ap)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--truncate", type=int, default=13)
    ap.add_argument("--length", type=int, default=200)
    ap.add_argument("--methods", default="drakes_soft,drakes_st,policy_gradient")
    ap.add_argument("--out", default=None, help="results path without extension (.json and .md)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)

    from dnadiff.machine import load_average
    from dnadiff.reward_tuning import drakes_loss, policy_gradient_loss, sample_groups
    from dnadiff.utils import atomic_write, markdown_table, portable_paths

    parts = _common.reward_finetune_parts(args.model, args.reward, args.target, args.steps)
    model, den, pre_den, reward, grid = parts.model, parts.denoiser, parts.pretrained, parts.reward, parts.grid
    mask, vocab = parts.mask_id, parts.vocab_size
    params = [p for p in model.backbone.parameters() if p.requires_grad]
    load_before, w0 = load_average(), time.time()
    rows = []
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        grads, t0 = [], time.time()
        for b in range(args.batches):
            gen = torch.Generator().manual_seed(1000 + b)  # the same noise for every method's batch b
            x_init = torch.full((args.batch, args.length), mask)
            model.backbone.zero_grad(set_to_none=True)
            if method in ESTIMATORS:
                estimator, tau = ESTIMATORS[method]
                out = drakes_loss(den, pre_den, reward.soft, grid, mask, x_init, vocab, args.beta,
                                  truncate_steps=args.truncate, temperature=tau, estimator=estimator, generator=gen)
            elif method == "policy_gradient":
                groups = sample_groups(den, grid, mask, x_init, vocab, reward, generator=gen)
                out = policy_gradient_loss(den, pre_den, grid, mask, groups, args.beta, args.group_size)
            else:
                raise SystemExit(f"error: --methods: unknown method {method!r}")
            out.loss.backward()
            grads.append(flat_grad(params))
            print(f"{method} batch {b}: reward {float(out.reward.mean()):.3f}, gradient norm "
                  f"{float(grads[-1].norm()):.3g}", flush=True)
        rows.append({"method": method, **summary(grads), "seconds": round(time.time() - t0, 1)})
    result = portable_paths({"command": _common.command_line(__file__, argv),
                             "settings": vars(args), "rows": rows, "wall_s": round(time.time() - w0, 1),
                             "load_before": load_before, "load_after": load_average()})
    table = markdown_table([{k: (f"{v:.3g}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows])
    print(table)
    if args.out:
        stem = Path(args.out)
        _common.save(result, stem.with_suffix(".json"))
        atomic_write(stem.with_suffix(".md"), portable_paths("\n".join([
            "# Gradient consistency of the fine-tuning estimators at the pretrained model (issue 51)", "",
            f"`{result['command']}`  ", f"{result['wall_s']:.0f} s wall, one thread; load before "
            f"{load_before}, after {result['load_after']}.", "",
            f"{args.batches} independent batches of {args.batch} trajectories (length {args.length}, T = {args.steps}, "
            f"DRAKES gradient through the last {args.truncate}, β = {args.beta:g}); the KL term's gradient is zero "
            "here. pairwise cosine: mean over pairs of batches of the cosine between their gradients; "
            "norm_of_mean_over_mean_norm: 1 when every batch agrees, about 1/√batches when they are independent "
            "noise.", "", table, ""])))
        print(f"wrote {stem.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
