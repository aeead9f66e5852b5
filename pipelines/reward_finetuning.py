"""Reward fine-tuning beside the inference-time methods, judged by an independent oracle: does a
fine-tuned designer (DRAKES, policy gradient) beat guided sampling at equal sampling cost, and what
does it cost in naturalness?

    python pipelines/reward_finetuning.py --scale cpu        # results/reward_finetuning_cpu.{md,json}
    python pipelines/reward_finetuning.py --dry-run          # every step at toy sizes (~1 min), WORK/dry_run.*

Steps: (1) split the Leptospira coding/intergenic train set per class into halves A and B (seed 0,
as pipelines/guided_design.py); (2) train the tiny class-conditional MDLM (experiments/
tiny_cfg_leptospira) on the whole train set: the pretrained model; (3) the reward: a noise-aware
HyenaDNA classifier fine-tuned on half A, r = log p(coding | x); (4) the oracle: a k-mer logistic
regression fitted on half B (never seen by the reward); (5) rows, each with `num` designs per
seed: unguided, CFG (w = 1), best-of-N, SVDD, SMC, cg_grad (first-order classifier guidance; exact cg
costs 4·L rows per step and is left out at this scale), and `drakes` / `policy_gradient` at each β
of the scale (fine-tuned with `dnadiff design-finetune`, then sampled plainly). Columns: oracle
success rate (P > 0.5) and mean P, reward-model score, log-likelihood bound of the designs under the
pretrained model (nats/base, the naturalness the KL protects), distinct designs, distinct 6-mers,
3-mer Pearson correlation with the real coding test sequences, denoiser rows per design at sampling
time, fine-tuning wall time, and the realistic-success rate: oracle positive AND GC inside the
5–95 % range of the real coding test sequences AND log-likelihood above their 5 % quantile (the
ranges are in the note). Each number: mean over seeds (min–max). Also `gc:0.6` and `motif:TATAAA`
tasks, judged by the property itself (|GC − 0.6| ≤ 0.02; motif present on either strand).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import common
import guided_design as gd  # benchmark halves, k-mer oracle, benchmark reader
import numpy as np
import torch

from dnadiff.machine import describe_machine, load_average

SCALES = {
    "cpu": dict(gen_steps=300, clf_epochs=5, clf_max_train=2000, num=64, steps=32, length=200, seeds=(0, 1),
                best_n=4, svdd_m=4, smc_k=4, ft_steps=40, ft_batch=16, ft_sample_steps=32, ft_truncate=16,
                group=8, ft_lr=3e-4, betas=(0.05, 0.5), side_betas=(0.1,), motif="TATAAA", gc=0.6),
    "dry": dict(gen_steps=2, clf_epochs=1, clf_max_train=40, num=4, steps=4, length=32, seeds=(0,), best_n=2,
                svdd_m=2, smc_k=2, ft_steps=1, ft_batch=4, ft_sample_steps=4, ft_truncate=2, group=2, ft_lr=1e-3,
                betas=(0.5,), side_betas=(0.5,), motif="TATA", gc=0.6),
}


def dnadiff_cmd(*argv) -> None:
    """A `dnadiff` command in a child process (as the other pipelines run them)."""
    subprocess.run([sys.executable, "-m", "dnadiff", *map(str, argv)], check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})


def kmer3_pearson(seqs: list[str], real: list[str]) -> float:
    from dnadiff.eval import kmer_counts

    a, b = kmer_counts(seqs, 3), kmer_counts(real, 3)
    return float(np.corrcoef(a / a.sum(), b / b.sum())[0, 1])


def loglik_per_base(model, seqs: list[str]) -> np.ndarray:
    """−(MDLM bound) per base of each sequence under `model` (the pretrained generator), nats."""
    tok = model.tokenizer
    x = torch.tensor([tok.encode(s) for s in seqs])
    out = model.nll(x, generator=torch.Generator().manual_seed(0))
    return (-out.nll.double() / out.num_tokens.double().clamp_min(1)).numpy()


def has_motif(seqs: list[str], motif: str) -> np.ndarray:
    comp = motif[::-1].translate(str.maketrans("ACGT", "TGCA"))
    return np.array([motif in s or comp in s for s in seqs])


def judge(task: str, seqs: list[str], ctx: dict) -> dict:
    """The columns of one row (one seed) for task `classifier`, `gc` or `motif`."""
    from dnadiff.eval import gc_content

    ll = loglik_per_base(ctx["pretrained"], seqs)
    gc = gc_content(seqs)
    six = {s[i : i + 6] for s in seqs for i in range(len(s) - 5)}
    row = {"loglik": float(ll.mean()), "distinct": len(set(seqs)) / len(seqs),
           "distinct_6mers": len(six) / max(1, sum(len(s) - 5 for s in seqs)),
           "kmer3_pearson": kmer3_pearson(seqs, ctx["real_pos"]), "gc": float(np.nanmean(gc))}
    natural = (gc >= ctx["gc_range"][0]) & (gc <= ctx["gc_range"][1]) & (ll >= ctx["ll_floor"])
    if task == "classifier":
        p = ctx["oracle"](seqs)
        row.update(oracle_success=float((p > 0.5).mean()), oracle_mean=float(p.mean()),
                   reward=float(ctx["reward_of"](seqs)), realistic_success=float(((p > 0.5) & natural).mean()))
    elif task == "gc":
        hit = np.abs(gc - ctx["sc"]["gc"]) <= 0.02
        row.update(property_success=float(hit.mean()), realistic_success=float((hit & (ll >= ctx["ll_floor"])).mean()))
    else:
        hit = has_motif(seqs, ctx["sc"]["motif"])
        row.update(property_success=float(hit.mean()), realistic_success=float((hit & natural).mean()))
    return row


def guided_rows(task: str, spec: str, target, ctx: dict, seed: int) -> list[dict]:
    """The inference-time rows of one task and seed."""
    import dnadiff
    from dnadiff.guidance import build_method, build_reward, default_strength

    sc, model = ctx["sc"], ctx["pretrained"]
    tok, L, steps, num = model.tokenizer, sc["length"], sc["steps"], sc["num"]
    reward = ctx["reward"] if task == "classifier" else build_reward(spec)
    plan = [("unguided", "none", {}), ("best_of_n", "best_of_n", {"n": sc["best_n"]}),
            ("svdd", "svdd", {"candidates": sc["svdd_m"]}), ("smc", "smc", {"particles": sc["smc_k"]}),
            ("cg_grad", "cg_grad", {"token_ids": list(tok.nucleotide_ids)})]
    rows = []
    if task == "classifier":
        start = time.time()
        x = dnadiff.sample(model, num, L, steps=steps, label="coding", guidance=1.0, seed=seed, batch_size=num).x
        rows.append({"method": "cfg w=1", "nfe_per_design": 2 * steps, "sample_s": time.time() - start,
                     **judge(task, model.decode(x), ctx)})
    for label, name, opts in plan:
        opts = dict(opts)
        default_strength(name, reward, L, opts, spec)
        method = build_method(name, model.build_sampler("ancestral", steps), reward, **opts)
        start = time.time()
        x = dnadiff.sample(model, num, L, sampler=method, seed=seed, batch_size=num).x  # the unconditional model
        rows.append({"method": label, "nfe_per_design": method.last_stats["nfe_per_sequence"],
                     "sample_s": time.time() - start, **judge(task, model.decode(x), ctx)})
    return rows


def finetuned_rows(task: str, spec: str, target, ctx: dict, seed: int, betas) -> list[dict]:
    import dnadiff
    from dnadiff.guidance import build_reward
    from dnadiff.training import complete_settings, reward_finetune

    sc, work = ctx["sc"], ctx["work"]
    rows = []
    for method in ("drakes", "policy_gradient"):
        for beta in betas:
            out = work / "finetuned" / f"{task}_{method}_b{beta:g}_s{seed}"
            start = time.time()
            if not (out / "model.safetensors").is_file():
                settings = {"method": method, "reward": spec, "target": target, "kl_weight": beta,
                            "train_steps": sc["ft_steps"], "batch_size": sc["ft_batch"], "group_size": sc["group"],
                            "sample_steps": sc["ft_sample_steps"], "truncate_steps": sc["ft_truncate"],
                            "lr": sc["ft_lr"], "length": sc["length"], "seed": seed}
                reward = ctx["reward"] if task == "classifier" else build_reward(spec)
                reward_finetune(ctx["gen_model"], complete_settings(ctx["gen_model"], settings, sc["length"]), str(out),
                                overwrite=True, reward=reward, progress=False, threads=1)
            ft_s = json.loads((out / "metrics.json").read_text()).get("wall_seconds_this_session", time.time() - start)
            model = dnadiff.load(out)
            start = time.time()
            x = dnadiff.sample(model, sc["num"], sc["length"], steps=sc["steps"], seed=seed, batch_size=sc["num"]).x
            rows.append({"method": f"{method} β={beta:g}", "nfe_per_design": sc["steps"], "finetune_s": ft_s,
                         "sample_s": time.time() - start, **judge(task, model.decode(x), ctx)})
    return rows


def aggregate(per_seed: list[list[dict]]) -> list[dict]:
    """Rows with the same method across seeds -> one row: 'mean (min–max)' for numbers."""
    out = []
    for rows in zip(*per_seed):
        merged = {"method": rows[0]["method"], "seeds": len(rows)}
        for key in rows[0]:
            if key == "method":
                continue
            vals = np.array([r[key] for r in rows], dtype=float)
            merged[key] = float(vals.mean())
            merged[key + "_range"] = [float(vals.min()), float(vals.max())]
        out.append(merged)
    return out


def run(args) -> dict:
    torch.set_num_threads(1)
    sc = SCALES["dry" if args.dry_run else args.scale]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    root = gd.benchmark_root()
    halves = gd.split_halves(root, work / "data")
    gen_dir = work / "generator"
    if not (gen_dir / "model").is_dir():
        dnadiff_cmd("train", "-q", "experiments/tiny_cfg_leptospira", f"data.benchmark={root}",
                    f"train.max_steps={sc['gen_steps']}", "train.val_every=1000", "--run-dir", gen_dir, "--overwrite")
    clf_dir = work / "classifier_A"
    if not (clf_dir / "classifier").is_dir():
        dnadiff_cmd("finetune", "-q", "experiments/tiny_finetune", f"data.dataset={work / 'data/halfA'}",
                    "model.backbone=hyena", "model.noisy=true", "protocol.seeds=[0]",
                    f"train.epochs={sc['clf_epochs']}", f"data.max_train={sc['clf_max_train']}", "data.max_test=200",
                    "--out", clf_dir, "--no-progress")

    from dnadiff.checkpoint import load
    from dnadiff.eval import gc_content
    from dnadiff.guidance import build_reward

    pretrained = load(str(gen_dir / "model"))
    pretrained.backbone.eval()
    tok = pretrained.tokenizer
    reward = build_reward(f"classifier:{clf_dir / 'classifier'}", target="coding")
    real_pos = gd.class_sequences(root, "test", "coding")[: max(4 * sc["num"], 64)]
    ll_real = loglik_per_base(pretrained, real_pos)
    gc_real = gc_content(real_pos)
    ctx = {"sc": sc, "work": work, "pretrained": pretrained, "gen_model": str(gen_dir / "model"), "reward": reward,
           "oracle": gd.fit_oracle(halves[("B", "coding")], halves[("B", "intergenic")]), "real_pos": real_pos,
           "gc_range": tuple(float(q) for q in np.nanquantile(gc_real, [0.05, 0.95])),
           "ll_floor": float(np.quantile(ll_real, 0.05)),
           "reward_of": lambda seqs: float(reward(torch.tensor([tok.encode(s) for s in seqs])).mean())}
    clf_spec = f"classifier:{clf_dir / 'classifier'}"
    tasks = [("classifier", clf_spec, "coding", sc["betas"]), ("gc", f"gc:{sc['gc']}", None, sc["side_betas"]),
             ("motif", f"motif:{sc['motif']}", None, sc["side_betas"])]
    results = {}
    for task, spec, target, betas in tasks:
        per_seed = []
        for seed in sc["seeds"]:
            rows = guided_rows(task, spec, target, ctx, seed) + finetuned_rows(task, spec, target, ctx, seed, betas)
            for r in rows:
                print(json.dumps({"task": task, "seed": seed, **r}), flush=True)
            per_seed.append(rows)
        real = {"method": "real coding (test)", "seeds": 1, **judge(task, real_pos[: sc["num"]], ctx)}
        results[task] = aggregate(per_seed) + [real]
    return {"tasks": results, "scale": "dry" if args.dry_run else args.scale, "settings": sc,
            "gc_range": ctx["gc_range"], "loglik_floor": ctx["ll_floor"], "benchmark": str(root),
            "wall_s": round(time.time() - t0, 1), "machine": describe_machine(), "load_average": load_average(),
            "command": common.command_line(__file__, None)}


def _cell(row: dict, key: str) -> str:
    if key not in row:
        return ""
    v = row[key]
    if not isinstance(v, float):
        return str(v)
    lo, hi = row.get(key + "_range", [v, v])
    return f"{v:.3g}" if lo == hi else f"{v:.3g} ({lo:.3g}–{hi:.3g})"


def markdown(res: dict) -> str:
    from dnadiff.utils import format_table

    parts = [f"# Reward fine-tuning beside inference-time guidance (Leptospira), scale {res['scale']}\n",
             f"Command: `{res['command']}`  \nBenchmark: {res['benchmark']}  \n"
             f"Wall time: {res['wall_s']} s on {res['machine']}; at the end, {res['load_average']}.  \n"
             f"Realistic success: oracle positive, GC in [{res['gc_range'][0]:.3f}, {res['gc_range'][1]:.3f}] "
             f"(5–95 % of the real coding test sequences) and log-likelihood ≥ {res['loglik_floor']:.3f} nats/base "
             "(their 5 % quantile) under the pretrained model. Numbers: mean over seeds (min–max).\n"]
    for task, rows in res["tasks"].items():
        judged = ["oracle_success", "realistic_success", "oracle_mean", "reward"] if task == "classifier" else \
            ["property_success", "realistic_success", "gc"]
        cols = ["method", *judged, "loglik", "distinct", "distinct_6mers", "kmer3_pearson", "nfe_per_design",
                "finetune_s"]
        table = format_table([{c: _cell(r, c) for c in cols} for r in rows], cols)
        parts.append(f"## Task `{task}`\n\n```\n{table}\n```\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", default="cpu", choices=sorted(k for k in SCALES if k != "dry"))
    p.add_argument("--dry-run", action="store_true",
                   help="every step at toy sizes; writes WORK/dry_run.{md,json}")
    p.add_argument("--work", default=None, help="working folder (default runs/reward_finetuning_SCALE)")
    p.add_argument("--out", default=None, help="output prefix (default results/reward_finetuning_SCALE)")
    args = p.parse_args(argv)
    scale = "dry" if args.dry_run else args.scale
    args.work = args.work or f"runs/reward_finetuning_{scale}"
    out = args.out or (str(Path(args.work) / "dry_run") if args.dry_run else f"results/reward_finetuning_{scale}")
    res = run(args)
    from dnadiff.utils import atomic_write, portable_paths, write_json

    write_json(out + ".json", portable_paths(res))
    atomic_write(out + ".md", portable_paths(markdown(res)))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
