"""Reward fine-tuning beside the inference-time methods, judged by an independent oracle: the
reward–naturalness frontier of each Leptospira task (issue 35 §2). Where does a fine-tuned designer
(DRAKES, policy gradient, offline DPO) sit against guided sampling at equal sampling cost, and what does
it cost in naturalness?

    python pipelines/reward_finetuning.py --scale cpu        # results/reward_finetuning_cpu.{md,json}, *_frontier.png
    python pipelines/reward_finetuning.py --dry-run          # every step at toy sizes (~1 min CPU), WORK/dry_run.*

Steps: (1) split the Leptospira coding/intergenic train set per class into halves A and B (seed 0,
as pipelines/guided_design.py); (2) train the tiny class-conditional MDLM (experiments/
tiny_cfg_leptospira) on the whole train set: the pretrained model; (3) the reward: a HyenaDNA classifier
fine-tuned on half A on clean sequences (20 epochs, best on validation), r = log p(coding | x), and for cg_grad,
which reads it on masked states, a noise-aware one (5 epochs; it barely separates the classes on 250 sequences:
the table's first line gives both rewards on the real test sequences); (4) the oracle: a k-mer logistic
regression fitted on half B (never seen by the reward). Tasks: `classifier` (judged by the oracle:
success P > 0.5), `gc:0.6` and `motif:TATAAA` (judged by the property: |GC − 0.6| ≤ 0.02; motif on
either strand). Per task:
  (5) the target: `pool` pretrained samples (the unguided sampler at `steps` steps, the fine-tuning
      grid), their rewards, and the SNIS estimates of p* ∝ p_pre · exp(r/β) (E*[r], KL(p* ‖ p_pre),
      ESS; dnadiff/reward_tuning/target.py) over a wide grid of β; kept: for each wanted target KL
      (`kl_targets`, 0.05 … 3 nats) the β whose estimate is closest (reward_frontier.py). No training.
  (6) fine-tuning (`dnadiff design-finetune`'s reward_finetune) with each method at each kept β, one
      training seed; the learning rate chosen per method on the classifier task at the kept β nearest
      `lr_ref_kl` nats from `ft_lrs`, by the validation objective E[r] − β·KL over `eval_samples` samples
      of the fine-tuned model (the reward model, never the oracle), then used for every β and task. The
      reward-vs-update curve of each run (logs/metrics.csv) with whether it flattened; β chosen per
      method on the validation reward (the largest β within one standard error of the best).
  (7) inference-time rows at several strengths: best-of-N (n), SVDD (candidates), SMC (particles),
      cg_grad (× the default scale 1/unit), CFG (w; the classifier task: the model's own coding label).
Every row's designs (`num` per design seed) are read by the oracle once (the rows and their columns:
pipelines/reward_finetuning_rows.py). Columns: success (oracle or
property), realistic success (success AND GC inside the 5–95 % range of the real coding test sequences
AND log-likelihood above their 5 % quantile), mean reward, KL to the pretrained model where defined
(fine-tuned: target and reached trajectory KL; best-of-N: its bound log n − (n−1)/n), log-likelihood
bound under the pretrained model (nats/base), the designs' GC 5–95 % range, 3-mer Pearson with the
real coding test sequences, distinct designs and 6-mers, denoiser rows per design, fine-tuning
updates and wall time, and the discriminator AUROC ± SE (p) of a CNN and a k-mer LR (issue 46, pipelines/judging.py:
each seed's designs vs as many real coding test sequences outside the real row's; ~6 CPU-s a row and seed).
Each number: mean over design seeds (min–max).

Cost at --scale cpu (one free core), estimated from the per-row wall times of the previous cpu run
(results/reward_finetuning_cpu.json before this change: unguided 64 designs ≈ 1.4 s, best-of-4 ≈ 8.7 s,
SVDD m=4 ≈ 23 s and SMC k=4 ≈ 17 s with the classifier reward, ≈ 10 s with gc/motif; a fine-tuning update
≈ 2.1 s (classifier), 1.2 s (gc), 2 s (motif)): the generator and the reward classifier ≈ 5 min; the
pools ≈ 1 min; inference rows ≈ 18 min (classifier ≈ 4.5 min per design seed, gc and motif ≈ 2 min
each); fine-tuning ≈ 71 min (classifier: 12 runs + 3 learning-rate runs × 80 updates ≈ 42 min; gc 9 runs
× 60 updates ≈ 11 min; motif ≈ 18 min); validation samples and the fine-tuned rows' designs ≈ 3 min.
Total ≈ 1.6 CPU-hours (≤ 2). Process CPU seconds measured with the same models and settings on the
contended machine (2 cores at load 9, 3 Dec): unguided 3.5 s, best-of-4 13.2 s, a DRAKES classifier update
8.2 s (1.5–3.9× the times above), so on a machine that busy the run may take up to 3–4× longer. Measured
in a --scale cpu run on 3 Dec (one thread, load ~3 on the 2 cores): a DRAKES classifier run of 80 updates
took 725 s wall with its 64 evaluation samples (~9 s per update), policy gradient ~7 s per update, i.e.
~4× the estimate above. The finished cpu run (3–4 Dec, one thread, load 2–3 on the 2 cores, spread over three
invocations): the 33 fine-tuning runs (30 on the β grid, 3 more for the learning-rate choice) took 131 min of wall
time in all (classifier 80 updates: DRAKES 395–464 s, policy gradient 248–302 s, dpo 151–185 s; gc and motif 60
updates: 97–326 s), the last invocation, which trained 6 of them and redid every pool, inference row and design,
53 min: about 3 hours of one core for the whole scale (finished fine-tuning runs are kept in WORK/finetuned and
reused by a rerun, so it can be spread over sessions). The dry run: ≈ 30 s of CPU with its toy generator kept,
≈ 1 min from scratch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import common
import guided_design as gd  # benchmark halves, k-mer oracle, benchmark reader
import numpy as np
import reward_frontier as frontier  # β grid, curves, frontier plots
import torch
from reward_finetuning_report import markdown, plots
from reward_finetuning_rows import finetune, finetuned_rows, guided_rows, judge, loglik_per_base, task_reward

from dnadiff.machine import describe_machine, load_average

# best_n, svdd_m, smc_k: the single strengths of guided_rows' callers that give no lists (kept for importers);
# ft_sample_steps = steps: fine-tuning trajectories on the grid the pool and the designs are sampled on
SCALES = {
    "cpu": dict(gen_steps=300, clf_epochs=5, clean_clf_epochs=20, clf_max_train=2000, num=64, steps=32, length=200,
                seeds=(0, 1),
                best_n=4, svdd_m=4, smc_k=4, best_ns=(2, 4, 8, 16), svdd_ms=(2, 4, 8), smc_ks=(2, 4, 8),
                cfg_ws=(0.5, 1.0, 2.0, 4.0), cg_scales=(0.5, 1.0, 2.0, 4.0), pool=512,
                kl_targets=(0.05, 0.3, 1.0, 3.0), side_kl_targets=(0.05, 0.5, 3.0), lr_ref_kl=1.0,
                methods=("drakes", "policy_gradient", "dpo"), ft_lrs=(3e-4, 1e-3), ft_steps=80, side_ft_steps=60,
                ft_batch=16, ft_sample_steps=32, ft_truncate=16, group=8, dpo_pool=256, eval_samples=64, ft_seed=0,
                motif="TATAAA", gc=0.6),
    "dry": dict(gen_steps=2, clf_epochs=1, clean_clf_epochs=1, clf_max_train=40, num=4, steps=4, length=32,
                seeds=(0,), best_n=2,
                svdd_m=2, smc_k=2, best_ns=(2, 4), svdd_ms=(2, 3), smc_ks=(2, 3), cfg_ws=(1.0, 2.0),
                cg_scales=(1.0, 2.0), pool=64, kl_targets=(0.05, 1.0), side_kl_targets=(1.0,), lr_ref_kl=1.0,
                methods=("drakes", "policy_gradient", "dpo"), ft_lrs=(1e-3, 3e-3), ft_steps=4, side_ft_steps=4,
                ft_batch=4, ft_sample_steps=4, ft_truncate=2, group=2, dpo_pool=8, eval_samples=4, ft_seed=0,
                motif="TATA", gc=0.6),
}
POOL_SEED = 10_000  # the pretrained pool of the β grid: a stream apart from the design seeds


def dnadiff_cmd(*argv) -> None:
    """A `dnadiff` command in a child process (as the other pipelines run them)."""
    subprocess.run([sys.executable, "-m", "dnadiff", *map(str, argv)], check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})


def aggregate(per_seed: list[list[dict]]) -> list[dict]:
    """Rows with the same method across seeds -> one row: 'mean (min–max)' for numbers; other values
    (labels, a failure's line) from the first seed's row."""
    out = []
    for rows in zip(*per_seed):
        merged = {"method": rows[0]["method"], "seeds": len(rows)}
        keys = list(dict.fromkeys(k for r in rows for k in r))
        for key in keys:
            if key == "method":
                continue
            first = rows[0].get(key)
            if isinstance(first, bool) or not isinstance(first, (int, float)):
                merged[key] = first
                continue
            vals = np.array([r.get(key, math.nan) for r in rows], dtype=float)
            merged[key] = float(vals.mean())
            merged[key + "_range"] = [float(vals.min()), float(vals.max())]
        out.append(merged)
    return out


def target_grid(task: str, spec: str, ctx: dict, kl_targets) -> dict:
    """The target over β, from one pool of pretrained samples (no training): the SNIS table over the
    candidate βs (reward_frontier.candidate_betas) and the βs kept for fine-tuning (choose_betas)."""
    import dnadiff
    from dnadiff.guidance import build_method

    sc, model = ctx["sc"], ctx["pretrained"]
    reward = task_reward(task, spec, ctx)
    plain = build_method("none", model.build_sampler("ancestral", sc["ft_sample_steps"]), reward)
    x = dnadiff.sample(model, sc["pool"], sc["length"], sampler=plain, seed=POOL_SEED,
                       batch_size=min(sc["pool"], 128)).x
    rewards = torch.cat([torch.as_tensor(reward(x[i : i + 128])).double().reshape(-1) for i in range(0, len(x), 128)])
    table = frontier.target_table(rewards, frontier.candidate_betas(rewards))
    kept = frontier.choose_betas(table, kl_targets)
    return {"pool": int(len(rewards)), "pool_reward_mean": float(rewards.mean()),
            "pool_reward_sd": float(rewards.std()), "kl_cap": math.log(len(rewards)), "table": table, "kept": kept}


def choose_lrs(task: str, spec: str, target, ctx: dict, kept: list[dict]) -> dict:
    """Per method, the learning rate of ft_lrs with the best validation objective E[r] − β·KL (over the run's
    own eval_samples; the reward model, not the oracle) at the kept β whose target KL is nearest lr_ref_kl."""
    sc = ctx["sc"]
    ref = min(kept, key=lambda t: abs(math.log(max(t["kl"], 1e-6)) - math.log(sc["lr_ref_kl"])))
    steps = sc["ft_steps"] if task == "classifier" else sc.get("side_ft_steps", sc["ft_steps"])
    choice, runs = {}, []
    for method in sc["methods"]:
        recs = [finetune(task, spec, target, ctx, method, ref["beta"], lr, steps) for lr in sc["ft_lrs"]]
        best = max(recs, key=lambda r: r["val_objective"])
        choice[method] = best["lr"]
        runs += [{k: v for k, v in r.items() if k != "curve"} | {"chosen": r is best} for r in recs]
    return {"beta": ref["beta"], "target_kl": ref["kl"], "lrs": choice, "runs": runs}


def task_frontier(task: str, spec: str, target, ctx: dict) -> tuple[list[dict], dict]:
    """The rows of one task (mean over design seeds) and its frontier record: the target grid, the learning
    rate choice, the fine-tuning runs (curves) and the β chosen per method on validation."""
    sc = ctx["sc"]
    grid = target_grid(task, spec, ctx, sc["kl_targets"] if task == "classifier" else sc["side_kl_targets"])
    betas = [t["beta"] for t in grid["kept"]]
    if "lrs" not in ctx:  # chosen on the first task (the classifier task), then kept for the others
        ctx["lr_choice"] = {"task": task, **choose_lrs(task, spec, target, ctx, grid["kept"])}
        ctx["lrs"] = ctx["lr_choice"]["lrs"]
    ctx["runs"] = {}
    per_seed = []
    for seed in sc["seeds"]:
        rows = guided_rows(task, spec, target, ctx, seed) + finetuned_rows(
            task, spec, target, ctx, seed, betas, methods=sc["methods"], lrs=ctx["lrs"],
            targets={t["beta"]: t for t in grid["kept"]})
        for r in rows:
            print(json.dumps({"task": task, "seed": seed, **r}), flush=True)
        per_seed.append(rows)
    rows = aggregate(per_seed)
    runs = list(ctx["runs"].values())
    chosen = {}
    for method in sc["methods"]:
        ok = [r for r in runs if r["method"] == method and "failed" not in r]
        if ok:
            chosen[method] = frontier.choose_by_validation(ok)["beta"]
    for r in rows:
        r["chosen"] = r.get("family") in chosen and r.get("beta") == chosen[r["family"]]
    record = {**grid, "betas": betas, "lr_choice": ctx["lr_choice"], "chosen_beta": chosen, "runs": runs}
    return rows, record


def setup(args) -> dict:
    """Data halves, the pretrained generator, the reward classifier and the oracle (trained once per WORK)."""
    torch.set_num_threads(1)
    sc = SCALES["dry" if args.dry_run else args.scale]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    root = gd.benchmark_root()
    halves = gd.split_halves(root, work / "data")
    gen_dir = work / "generator"
    if not (gen_dir / "model").is_dir():
        dnadiff_cmd("train", "-q", "experiments/tiny_cfg_leptospira", f"data.benchmark={root}",
                    f"train.max_steps={sc['gen_steps']}", "train.val_every=1000", "--run-dir", gen_dir, "--overwrite")
    # two reward classifiers on half A: a noise-aware one (on masked states x_t) for cg_grad, the only method
    # that reads the classifier on noisy inputs, and a clean one for every method that scores whole designs.
    # The noise-aware Hyena on these 250 sequences barely separates the classes (measured on the benchmark's 60 + 60
    # test sequences: log p(coding) −0.6895 ± 0.0031 on coding vs −0.6933 ± 0.0028 on intergenic after 5 epochs;
    # the clean one, 20 epochs: −0.31 ± 0.39 vs −1.83 ± 0.99), and a reward that flat gives fine-tuning nothing
    clf_dir, clean_dir = work / "classifier_A", work / "classifier_A_clean"
    for out, noisy, epochs in ((clf_dir, "true", sc["clf_epochs"]), (clean_dir, "false", sc["clean_clf_epochs"])):
        if not (out / "classifier").is_dir():
            dnadiff_cmd("finetune", "-q", "experiments/tiny_finetune", f"data.dataset={work / 'data/halfA'}",
                        "model.backbone=hyena", f"model.noisy={noisy}", "protocol.seeds=[0]",
                        f"train.epochs={epochs}", f"data.max_train={sc['clf_max_train']}", "data.max_test=200",
                        "--out", out, "--no-progress")

    from dnadiff.checkpoint import load
    from dnadiff.eval import gc_content
    from dnadiff.guidance import build_reward

    pretrained = load(str(gen_dir / "model"))
    pretrained.backbone.eval()
    tok = pretrained.tokenizer
    reward = build_reward(f"classifier:{clean_dir / 'classifier'}", target="coding")
    cg_reward = build_reward(f"classifier:{clf_dir / 'classifier'}", target="coding")
    test_pos = gd.class_sequences(root, "test", "coding")
    real_pos = test_pos[: max(4 * sc["num"], 64)]
    real_neg = gd.class_sequences(root, "test", "intergenic")[: max(4 * sc["num"], 64)]
    ll_real = loglik_per_base(pretrained, real_pos)
    gc_real = gc_content(real_pos)
    spread = {name: reward_spread(r, tok, real_pos, real_neg) for name, r in (("clean", reward), ("noisy", cg_reward))}
    return {"sc": sc, "work": work, "root": root, "clf_dir": clean_dir, "pretrained": pretrained,
            "gen_model": str(gen_dir / "model"), "reward": reward, "cg_reward": cg_reward, "reward_spread": spread,
            "oracle": gd.fit_oracle(halves[("B", "coding")], halves[("B", "intergenic")]), "real_pos": real_pos,
            "disc_reference": test_pos[len(real_pos):],  # disjoint from the real row's (the floor's) sequences
            "gc_range": tuple(float(q) for q in np.nanquantile(gc_real, [0.05, 0.95])),
            "ll_floor": float(np.quantile(ll_real, 0.05)),
            "task_rewards": {"gc": build_reward(f"gc:{sc['gc']}"), "motif": build_reward(f"motif:{sc['motif']}")},
            "reward_of": lambda seqs: float(reward(torch.tensor([tok.encode(s) for s in seqs])).mean())}


def reward_spread(reward, tok, pos: list[str], neg: list[str]) -> dict:
    """The reward on real coding and intergenic test sequences (mean, sd): can it tell them apart at all?"""
    def stats(seqs):
        r = torch.as_tensor(reward(torch.tensor([tok.encode(s) for s in seqs]))).double()
        return float(r.mean()), float(r.std())

    (mp, sp), (mn, sn) = stats(pos), stats(neg)
    return {"coding_mean": mp, "coding_sd": sp, "intergenic_mean": mn, "intergenic_sd": sn, "n": len(pos)}


def run(args) -> dict:
    t0 = time.time()
    ctx = setup(args)
    sc = ctx["sc"]
    tasks = [("classifier", f"classifier:{ctx['clf_dir'] / 'classifier'}", "coding"), ("gc", f"gc:{sc['gc']}", None),
             ("motif", f"motif:{sc['motif']}", None)]
    results, records = {}, {}
    for task, spec, target in tasks:
        rows, records[task] = task_frontier(task, spec, target, ctx)
        real = {"method": "real coding (test)", "family": "real", "seeds": 1,
                **judge(task, ctx["real_pos"][: sc["num"]], ctx)}
        results[task] = rows + [real]
    return {"tasks": results, "frontier": records, "scale": "dry" if args.dry_run else args.scale, "settings": sc,
            "reward_spread": ctx["reward_spread"],
            "gc_range": ctx["gc_range"], "loglik_floor": ctx["ll_floor"], "benchmark": str(ctx["root"]),
            "wall_s": round(time.time() - t0, 1), "machine": describe_machine(), "load_average": load_average(),
            "command": common.command_line(__file__, None)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", default="cpu", choices=sorted(k for k in SCALES if k != "dry"))
    p.add_argument("--dry-run", action="store_true",
                   help="every step at toy sizes; writes WORK/dry_run.{md,json}")
    p.add_argument("--work", default=None, help="working folder (default runs/reward_finetuning_SCALE)")
    p.add_argument("--out", default=None, help="output prefix (default results/reward_finetuning_SCALE)")
    p.add_argument("--render", action="store_true",
                   help="rebuild OUT.md and the PNGs from OUT.json (no training, no sampling)")
    args = p.parse_args(argv)
    scale = "dry" if args.dry_run else args.scale
    args.work = args.work or f"runs/reward_finetuning_{scale}"
    out = args.out or (str(Path(args.work) / "dry_run") if args.dry_run else f"results/reward_finetuning_{scale}")
    from dnadiff.utils import atomic_write, portable_paths, write_json

    if args.render:
        if not Path(out + ".json").is_file():
            print(f"error: --render: no {out}.json (run the pipeline first)", file=sys.stderr)
            return 2
        res = json.loads(Path(out + ".json").read_text())
    else:
        res = run(args)
        write_json(out + ".json", portable_paths(res))
    pngs = plots(res, out)
    atomic_write(out + ".md", portable_paths(markdown(res, pngs)))
    print(markdown(res, pngs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
