"""The rows of pipelines/reward_finetuning.py (issue 35 §2): the columns every row is judged by (`judge`:
oracle or property success, realistic success, log-likelihood under the pretrained model, GC, 3-mer
Pearson, distinct designs and 6-mers, the discriminator columns of pipelines/judging.py), the
inference-time rows of one task and seed (`guided_plan`, `guided_rows`), and the fine-tuning runs and
their designs (`finetune`, `finetuned_rows`). pipelines/dhs_design.py and dhs_edit.py judge their designs
with the same `judge` and `loglik_per_base`. The β grid and the page: reward_frontier.py,
reward_finetuning_report.py.
"""

from __future__ import annotations

import json
import math
import time

import judging  # the discriminator columns (issue 46)
import numpy as np
import reward_frontier as frontier  # β grid, curves, frontier plots
import torch


def task_reward(task: str, spec: str, ctx: dict):
    """The reward a task is fine-tuned on: the clean classifier (classifier task) or the property `spec`."""
    from dnadiff.guidance import build_reward

    return ctx["reward"] if task == "classifier" else build_reward(spec)


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
           "kmer3_pearson": kmer3_pearson(seqs, ctx["real_pos"]), "gc": float(np.nanmean(gc)),
           "gc_q05": float(np.nanquantile(gc, 0.05)), "gc_q95": float(np.nanquantile(gc, 0.95))}
    task_reward = ctx.get("task_rewards", {}).get(task)
    if task_reward is not None and task != "classifier":  # the training reward of the designs (gc, motif)
        tok = ctx["pretrained"].tokenizer
        row["reward"] = float(torch.as_tensor(task_reward(torch.tensor([tok.encode(s) for s in seqs]))).double().mean())
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
    if ctx.get("disc_reference"):  # can a CNN / k-mer LR tell these designs from held-out real coding sequences?
        row.update(judging.disc_columns(seqs, ctx["disc_reference"], ctx.get("disc_settings")))
    return row


def guided_plan(sc: dict) -> list[tuple[str, str, dict, float | None]]:
    """(label, method, options, strength multiplier) of every inference-time row: the unguided sampler,
    then best-of-N, SVDD, SMC at each of the scale's strengths and cg_grad at each multiple of its
    default scale (a scale without lists: its single best_n / svdd_m / smc_k and cg_grad ×1)."""
    plan = [("unguided", "none", {}, None)]
    plan += [(f"best_of_n n={n}", "best_of_n", {"n": n}, None) for n in sc.get("best_ns", (sc["best_n"],))]
    plan += [(f"svdd m={m}", "svdd", {"candidates": m}, None) for m in sc.get("svdd_ms", (sc["svdd_m"],))]
    plan += [(f"smc k={k}", "smc", {"particles": k}, None) for k in sc.get("smc_ks", (sc["smc_k"],))]
    plan += [(f"cg_grad ×{c:g}", "cg_grad", {}, float(c)) for c in sc.get("cg_scales", (1.0,))]
    return plan


def guided_rows(task: str, spec: str, target, ctx: dict, seed: int) -> list[dict]:
    """The inference-time rows of one task and seed (guided_plan; CFG at each w on the classifier task)."""
    import dnadiff
    from dnadiff.guidance import build_method, build_reward, default_strength

    sc, model = ctx["sc"], ctx["pretrained"]
    tok, L, steps, num = model.tokenizer, sc["length"], sc["steps"], sc["num"]
    rows = []
    unguided_nfe = None
    side_reward = None if task == "classifier" else build_reward(spec)
    for label, name, opts, mult in guided_plan(sc):
        if task == "classifier":  # cg_grad reads the classifier on masked states: the noise-aware one
            reward = ctx["cg_reward"] if name == "cg_grad" else ctx["reward"]
        else:
            reward = side_reward
        opts = dict(opts, token_ids=list(tok.nucleotide_ids)) if name == "cg_grad" else dict(opts)
        default_strength(name, reward, L, opts, spec)
        if mult is not None:
            opts["scale"] = float(opts["scale"]) * mult
        method = build_method(name, model.build_sampler("ancestral", steps), reward, **opts)
        start = time.time()
        x = dnadiff.sample(model, num, L, sampler=method, seed=seed, batch_size=num).x  # the unconditional model
        nfe = method.last_stats["nfe_per_sequence"]
        unguided_nfe = nfe if name == "none" else unguided_nfe
        strength = {"best_of_n": "n", "svdd": "candidates", "smc": "particles", "cg_grad": "scale"}.get(name)
        row = {"method": label, "family": name if name != "none" else "unguided",
               "strength": float(opts[strength]) if strength else 0.0, "strength_label": label.partition(" ")[2],
               "nfe_per_design": nfe, "sample_s": time.time() - start}
        if name == "none":
            row["kl_bound"] = 0.0
        if name == "best_of_n":  # Beirami et al. 2024: KL(best-of-n ‖ p_pre) ≤ log n − (n−1)/n
            row["kl_bound"] = frontier.bon_kl_bound(int(opts["n"]))
        rows.append({**row, **judge(task, model.decode(x), ctx)})
    if task == "classifier":  # CFG: the class-conditional model's own coding label, two passes per step
        for w in sc.get("cfg_ws", (1.0,)):
            start = time.time()
            x = dnadiff.sample(model, num, L, steps=steps, label="coding", guidance=float(w), seed=seed,
                               batch_size=num).x
            rows.append({"method": f"cfg w={w:g}", "family": "cfg", "strength": float(w), "strength_label": f"w={w:g}",
                         "nfe_per_design": 2 * unguided_nfe, "sample_s": time.time() - start,
                         **judge(task, model.decode(x), ctx)})
    return rows


def finetune(task: str, spec: str, target, ctx: dict, method: str, beta: float, lr: float, steps: int) -> dict:
    """One fine-tuning run (kept in WORK/finetuned and reused while its folder is complete): its folder,
    metrics.json (validation reward and KL over eval_samples of its own samples), its reward-vs-update
    curve and whether it flattened; `failed` (one line) when training stopped on an error."""
    from dnadiff.errors import DnadiffError
    from dnadiff.training import complete_settings, reward_finetune

    sc = ctx["sc"]
    seed = int(sc.get("ft_seed", 0))
    out = ctx["work"] / "finetuned" / f"{task}_{method}_b{beta:.4g}_lr{lr:g}_u{steps}_s{seed}"
    rec = {"task": task, "method": method, "beta": float(beta), "lr": float(lr), "updates": int(steps),
           "dir": str(out)}
    failed = ctx.setdefault("failed_runs", {})
    if str(out) in failed:  # a run that stopped on an error is not retried for the next design seed
        return {**rec, "failed": failed[str(out)], "val_objective": -math.inf, "val_reward": -math.inf}
    if not ((out / "model.safetensors").is_file() and (out / "metrics.json").is_file()):
        settings = {"method": method, "reward": spec, "target": target, "kl_weight": float(beta),
                    "train_steps": int(steps), "batch_size": sc["ft_batch"], "group_size": sc["group"],
                    "sample_steps": sc["ft_sample_steps"], "truncate_steps": sc["ft_truncate"], "lr": float(lr),
                    "length": sc["length"], "seed": seed, "target_samples": 0,  # the target: the pool's SNIS
                    "eval_samples": sc.get("eval_samples", 64), "pool_size": sc.get("dpo_pool", 256)}
        reward = task_reward(task, spec, ctx)
        try:
            reward_finetune(ctx["gen_model"], complete_settings(ctx["gen_model"], settings, sc["length"]), str(out),
                            overwrite=True, reward=reward, progress=False, threads=1)
        except DnadiffError as exc:
            failed[str(out)] = str(exc)
            return {**rec, "failed": str(exc), "val_objective": -math.inf, "val_reward": -math.inf}
    m = json.loads((out / "metrics.json").read_text())
    curve = frontier.read_curve(out / "logs" / "metrics.csv")
    val_r, val_kl = m.get("reached_reward", math.nan), m.get("reached_kl", math.nan)
    return {**rec, "updates": int(m.get("updates", steps)), "finetune_s": m.get("wall_seconds_this_session"),
            "val_reward": val_r, "val_reward_se": m.get("reached_reward_se", 0.0), "val_kl": val_kl,
            "val_objective": val_r - beta * val_kl, "curve": curve, **frontier.curve_stats(curve)}


def finetuned_rows(task: str, spec: str, target, ctx: dict, seed: int, betas, methods=("drakes", "policy_gradient"),
                   lrs: dict | None = None, targets: dict | None = None) -> list[dict]:
    """Designs of each fine-tuned model (method × β; learning rate lrs[method], default the scale's ft_lr or
    first ft_lrs) sampled plainly with design seed `seed`; targets[β]: the SNIS target row of β."""
    import dnadiff
    from dnadiff.guidance import build_method

    sc = ctx["sc"]
    steps = sc["ft_steps"] if task == "classifier" else sc.get("side_ft_steps", sc["ft_steps"])
    reward = task_reward(task, spec, ctx)
    rows = []
    for method in methods:
        lr = (lrs or {}).get(method, sc.get("ft_lr") or sc["ft_lrs"][0])
        for beta in betas:
            run_rec = finetune(task, spec, target, ctx, method, beta, lr, steps)
            ctx.setdefault("runs", {})[run_rec["dir"]] = run_rec
            row = {"method": f"{method} β={beta:.3g}", "family": method, "strength": float(beta),
                   "strength_label": f"β={beta:.3g}", "beta": float(beta), "lr": float(lr),
                   "updates": run_rec["updates"]}
            tgt = (targets or {}).get(beta)
            if tgt is not None:
                row.update(target_reward=tgt["reward"], target_kl=tgt["kl"], target_ess=tgt["ess"])
            if "failed" in run_rec:
                rows.append({**row, "failed": run_rec["failed"]})
                continue
            row.update(finetune_s=run_rec["finetune_s"], reached_reward=run_rec["val_reward"],
                       reached_kl=run_rec["val_kl"], flattened=float(run_rec["flattened"]),
                       late_gain_share=run_rec["late_gain_share"])
            model = dnadiff.load(run_rec["dir"])
            plain = build_method("none", model.build_sampler("ancestral", sc["steps"]), reward)
            start = time.time()
            x = dnadiff.sample(model, sc["num"], sc["length"], sampler=plain, seed=seed, batch_size=sc["num"]).x
            rows.append({**row, "nfe_per_design": plain.last_stats["nfe_per_sequence"],
                         "sample_s": time.time() - start, **judge(task, model.decode(x), ctx)})
    return rows
