"""The page of pipelines/dhs_design.py: the table of design methods (success, realistic success and naturalness
under the evaluation oracles, the discriminator's columns, cost in denoiser calls), its notes, and the PNG of
success against calls beside each fine-tuning run's reward curve."""

from __future__ import annotations

import math
from pathlib import Path

import common
import judging

FINETUNED = ("drakes", "policy_gradient")
LABELS = {"unguided": "unguided", "cfg": "CFG (conditional MDLM)", "best_of_n": "best-of-N", "svdd": "SVDD",
          "smc": "SMC", "cg": "CG (cg_grad)", "drakes": "DRAKES fine-tuned",
          "policy_gradient": "policy-gradient fine-tuned",
          "real": "real HepG2 test (half A)"}
VALID_SEED, TEST_SEED = 1000, 0


def _num(v, digits: int = 3) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def markdown(r: dict, png: str | None) -> str:
    from dnadiff.utils import markdown_table

    rows = r["rows"]
    main = markdown_table([{
        "row": x["label"], "setting": x["setting"] or "",
        "success": f"{x['success']:.3f} ± {x['success_se']:.3f}", "realistic success": _num(x["realistic_success"]),
        "success (neural oracle)": "—" if x.get("success_neural") is None else _num(x["success_neural"]),
        "mean reward": _num(x["reward"]), "motif Spearman": _num(x["motif_spearman"]),
        "distinct 6-mers": _num(x["distinct_6mers"]), "pairwise identity": _num(x["pairwise_identity"]),
        **judging.disc_cells(x),
        "log-lik / base": _num(x["loglik"]), "GC": _num(x["gc"]),
        "denoiser calls / design": "" if x["nfe_per_design"] is None else f"{x['nfe_per_design']:g}",
        "fine-tuning s (wall / CPU)": f"{x['finetune_wall_s']:.0f} / {x['finetune_cpu_s']:.0f}"
        if "finetune_wall_s" in x else ""} for x in rows])
    ft_rows = [x for x in rows if x["row"] in FINETUNED]
    targets = markdown_table([{
        "row": x["label"], "setting": x["setting"], "updates": x["updates"],
        "pretrained E[r]": _num(x["pretrained_reward"]),
        "target E*[r] (SNIS)": f"{_num(x['target_reward'])} ± {_num(x['target_reward_se'])}",
        "target KL(p*‖p_pre)": _num(x["target_kl"]), "ESS": _num(x["target_ess"], 1),
        "reached E[r]": f"{_num(x['reached_reward'])} ± {_num(x['reached_reward_se'])}",
        "reached KL": _num(x["reached_kl"]),
        "curve: first / last quarter": f"{_num(x['curve_first_quarter'])} / {_num(x['curve_last_quarter'])}"}
        for x in ft_rows])
    grid = markdown_table([{"row": LABELS[row], "setting": g["setting"], "valid realistic reward-success":
                            _num(g["realistic_success"]), "valid reward-success": _num(g["success"]),
                            "valid mean reward": _num(g["reward"]), "kept": "yes" if i == c["index"] else ""}
                           for row, c in r["choice"].items() for i, g in enumerate(c["grid"])])
    by = {x["row"]: x for x in rows}
    amortised = []
    if "best_of_n" in by and "unguided" in by:
        bon, ung = by["best_of_n"], by["unguided"]
        for x in ft_rows:
            amortised.append(
                f"- {x['label']} ({x['setting']}): success {x['success']:.3f} and realistic success "
                f"{x['realistic_success']:.3f} at {x['nfe_per_design']:g} denoiser calls per design, against "
                f"best-of-{r['settings']['best_n']}'s {bon['success']:.3f} / {bon['realistic_success']:.3f} at "
                f"{bon['nfe_per_design']:g} (unguided: {ung['success']:.3f} / {ung['realistic_success']:.3f} at "
                f"{ung['nfe_per_design']:g}); fine-tuning cost {x['finetune_wall_s']:.0f} s wall "
                f"({x['finetune_cpu_s']:.0f} s CPU) once.")
    b = r["bounds"]
    lines = [f"# HepG2-specific DHS design (issue 34 §5, issue 35 §3): scale {r['scale']}", "",
             f"`{r['command']}`  ",
             f"{r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU ({r['threads']} thread); {r['machine']}; "
             f"load before {r['load_before']}, after {r['load_after']}.", "",
             f"{r['settings']['num']} designs of {r['settings']['length']} bp per row, {r['settings']['steps']} "
             f"ancestral steps, seed {TEST_SEED}; settings chosen on validation rewards (seed {VALID_SEED}, "
             f"{r['settings']['valid_num']} designs per setting, the reward classifier and the validation split only). "
             "Protocol and definitions: the docstring of pipelines/dhs_design.py.", "",
             *([f"**{r['note']}**", ""] if r.get("note") else []),
             f"Pretrained: `{r['models']['cg']['model']}` (unconditional MDLM{trained_as(r['models']['cg'])}; every "
             f"row but CFG, and the log-likelihood), `{r['models']['cfg']['model']}` (conditional MDLM"
             f"{trained_as(r['models']['cfg'])}; CFG). Reward: "
             f"`classifier:{r['oracles']['reward']}` --target {r['target']} "
             f"({bench_describe(r['oracles'].get('reward_meta'))}); evaluation oracle `{r['oracles']['evaluation']}` "
             f"({bench_describe(r['oracles'].get('evaluation_meta'))}), given to no command "
             f"({len(r['commands'])} commands recorded in the JSON).", "",
             f"Realistic success: success AND GC in [{b['test']['gc_range'][0]:.3f}, {b['test']['gc_range'][1]:.3f}] "
             f"AND log-likelihood ≥ {b['test']['ll_floor']:.3f} nats/base (5–95 % GC range and 5 % log-likelihood "
             f"quantile of the {r['data']['test_hepg2']} real HepG2 test sequences). Motif Spearman: against half B "
             f"of them ({r['data']['reference_half_b']} sequences).", "",
             judging.judges_note(r["oracles"].get("realistic_rule"), by.get("real"), "real HepG2 test half A vs B"), "",
             "## Design table", "", main, "",
             "success: evaluation-oracle argmax = HepG2 (± binomial SE); mean reward: log p(HepG2 | x) under the "
             "reward classifier; distinct 6-mers: / 4,096; pairwise identity: mean over pairs, same offset.", "",
             "## Amortised design (issue 35 §3)", "", *(amortised or ["(no fine-tuned rows)"]), "",
             "## Fine-tuned rows: their target and what they reached", "", targets, "",
             "target: p* ∝ p_pre·exp(r/β), estimated by SNIS over the pretrained samples design-finetune draws "
             "before training (ESS: effective sample size); reached: the fine-tuned model's samples at the end; "
             "curve: mean reward of each update's trajectories (first and last quarter of the updates).", "",
             "## Settings chosen on validation", "", grid, ""]
    if png:
        lines += [f"![{Path(png).stem}]({Path(png).name})", ""]
    return "\n".join(lines)


def trained_as(info: dict) -> str:
    """', 12,345 steps, validation 1.923 bits/base' from a model's training info (empty where unrecorded)."""
    parts = [f"{info['steps']:,} steps" if info.get("steps") else "",
             f"validation {info['val_bits_per_base']:.3f} bits/base" if info.get("val_bits_per_base") else ""]
    return "".join(f", {x}" for x in parts if x)


def bench_describe(meta: dict | None) -> str:
    import dhs_benchmark as bench

    return bench.describe(meta)


def plot(r: dict, path: Path) -> str:
    """Success and realistic success against denoiser calls per design; each fine-tuning run's reward curve."""
    plt = common.pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for x in r["rows"]:
        if x["nfe_per_design"] is None:
            a.axhline(x["success"], color="grey", ls=":", lw=1)
            continue
        a.scatter(x["nfe_per_design"], x["success"], marker="o")
        a.scatter(x["nfe_per_design"], x["realistic_success"], marker="x", color=a.collections[-1].get_facecolor())
        a.annotate(x["row"], (x["nfe_per_design"], x["success"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    a.set_xscale("log")
    a.set_xlabel("denoiser calls per design")
    a.set_ylabel("success (o) / realistic success (x)")
    a.set_title("evaluation oracle, HepG2 (dotted: real test)", fontsize=9)
    kept = {x["row"]: x["setting"] for x in r["rows"]}
    for method, runs in r["finetuning"].items():
        for ft in runs:
            if not ft["curve"]:
                continue
            label = f"{method} β={ft['kl_weight']:g} lr={ft['lr']:g}"
            chosen = kept.get(method) == f"β={ft['kl_weight']:g}, lr={ft['lr']:g}"
            b.plot([c["update"] for c in ft["curve"]], [c["reward"] for c in ft["curve"]],
                   ls="-" if chosen else "--", label=label + (" (kept)" if chosen else ""))
    b.set_xlabel("update")
    b.set_ylabel("mean reward of the update's trajectories")
    b.set_title("fine-tuning: reward vs update", fontsize=9)
    if b.lines:
        b.legend(fontsize=7)
    return common.save_png(fig, path, dpi=110)
