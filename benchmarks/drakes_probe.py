"""The first DRAKES updates up close: per update, the training reward and KL of its batch, the gradient norm,
and the reward of a fixed evaluation batch (the same Gumbel noise every time, so its changes are the model's).

Why (issue 35): in the DHS design run (results/dhs_design_cpu.md) DRAKES barely moved in 20 updates; this shows
how large the KL's gradient is against the reward's once the first Adam step has moved the model.

    python benchmarks/drakes_probe.py runs/dhs_benchmark/models/cg/model \\
        --reward classifier:runs/dhs_oracles/reward_classifier --target HepG2 --updates 6

Settings as pipelines/dhs_design.py's fine-tuning (batch 8, 16 sampling steps, gradient through the last 4,
Gumbel temperature 1, straight-through draws); one thread.
"""

from __future__ import annotations

import argparse
import time

import _common
import torch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common.add_reward_arguments(ap)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--truncate", type=int, default=4)
    ap.add_argument("--length", type=int, default=200)
    ap.add_argument("--eval-batch", type=int, default=32)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)

    from dnadiff.reward_tuning import drakes_loss, rollout

    parts = _common.reward_finetune_parts(args.model, args.reward, args.target, args.steps)
    model, den, pre_den, reward, grid = parts.model, parts.denoiser, parts.pretrained, parts.reward, parts.grid
    mask, vocab = parts.mask_id, parts.vocab_size
    opt = torch.optim.Adam(model.backbone.parameters(), lr=args.lr)

    def evaluate() -> tuple[float, float]:
        with torch.no_grad():
            ro = rollout(den, pre_den, grid, mask, torch.full((args.eval_batch, args.length), mask), vocab,
                         generator=torch.Generator().manual_seed(123))
            return float(reward.score(ro.x).mean()), float(ro.kl.mean())

    print("before: eval reward %.4f, KL %.4f" % evaluate(), flush=True)
    for update in range(args.updates):
        start = time.time()
        x_init = torch.full((args.batch, args.length), mask)
        out = drakes_loss(den, pre_den, reward.soft, grid, mask, x_init, vocab, args.beta,
                          truncate_steps=args.truncate, generator=torch.Generator().manual_seed(1000 + update))
        opt.zero_grad()
        out.loss.backward()
        norm = sum(float(p.grad.norm()) ** 2 for p in model.backbone.parameters() if p.grad is not None) ** 0.5
        opt.step()
        r_eval, kl_eval = evaluate()
        print(f"update {update}: batch reward {float(out.reward.mean()):.4f} KL {float(out.kl.mean()):.4f} "
              f"loss {float(out.loss.detach()):.3f} gradient norm {norm:.3g} | eval reward {r_eval:.4f} "
              f"KL {kl_eval:.4f} ({time.time() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
