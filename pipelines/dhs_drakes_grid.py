"""DRAKES estimators × β on the HepG2 design table (issue 51 §3): does DRAKES reach policy gradient at equal KL?

    python pipelines/dhs_drakes_grid.py --scale cpu --threads 1    # results/dhs_drakes_grid_cpu.{md,json,png}
    python pipelines/dhs_drakes_grid.py --dry-run                  # every run on the 300-row fixture, toy sizes
    python pipelines/dhs_drakes_grid.py --scale tiny               # small-scale: tiny models trained here

Spread over cores and sessions (one core each; every cell is about an hour): run cells in separate invocations,
e.g. `--variants policy_gradient --betas 0.25 --results R1` and `--variants drakes_soft --betas 0.25
--no-inference-rows --results R2`, then `--from-json R1.json --carry-from R2.json --results R` merges them
(refused unless both used the same models and oracles: their content fingerprints are recorded); a later
invocation with `--carry-from R.json` adds its cells. The table lists the cells not run yet.

Models, reward and evaluation oracle as pipelines/dhs_design.py (whose helpers this script uses): the
unconditional MDLM fine-tuned by `dnadiff design-finetune` for every (variant, β) of the grid, each then
sampled plainly (`dnadiff sample`, 50 steps: no reward calls at sampling); beside them the
inference-time rows unguided, best-of-N and CFG. No setting is chosen: every β is a point of the frontier.

Variants (dnadiff/reward_tuning/trajectory.py; docs/references.md, "DRAKES estimators"):
  drakes_st         per-step straight-through Gumbel-softmax, τ = 1, KL on all steps (the paper's Algorithm 1)
  drakes_soft       soft states through the live steps, straight-through at the reward input (the official
                    code), τ = 0.1 (on the enumerable chain 0.84-0.89 of the exact gradient per step)
  drakes_soft_live  as drakes_soft with the KL on the live steps only (the official truncate_kl)
  policy_gradient   the score-function reference (unbiased)
Each run trains with the step count its designs are sampled with (T = 50; K = ⌈T/4⌉ = 13, design-finetune's
default; when the model's config samples with another count, design-finetune also measures the reach there),
batch 8, lr 1e-3, gradient clip 1 (the official value), `train_steps` updates. Budget, --scale cpu:
180 updates × 8 trajectories × 50 steps = 72,000 trajectory-steps, about an hour on one core for the
d64 × 2 Caduceus at 200 bp (≈ 10 ms per row-pass, dhs_design.py's measurement; ~19 s per update); the
official DHS run is 1,000 epochs × 4 × 32 trajectories × 128 steps = 16.4 M trajectory-steps: this is
0.44 % of it (1.1 % of its trajectories). 12 runs: ~12 h.

Columns: success (evaluation-oracle argmax = HepG2), realistic success (and GC in range and log-likelihood above
the real sequences' 5 % quantile), log-likelihood per base (naturalness), reached KL (the fine-tuned model's
trajectory KL to the pretrained one) against the target's KL(p*‖p_pre) (SNIS, design-finetune), their ratio,
reward calls (fine-tuning: its trajectories and the target and evaluation samples; best-of-N: n per design),
denoiser calls per design, wall seconds. The frontier plot: success against KL, coloured by log-likelihood.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import common
import judging
import numpy as np

VARIANTS = {  # name: (method, --option items, --gumbel-temperature)
    "drakes_st": ("drakes", ["estimator=straight_through"], 1.0),
    "drakes_soft": ("drakes", ["estimator=soft"], 0.1),
    "drakes_soft_live": ("drakes", ["estimator=soft", "kl=live"], 0.1),
    "policy_gradient": ("policy_gradient", [], None),
}
SCALES = {
    "cpu": {"out": "runs/dhs_drakes_grid", "results": "results/dhs_drakes_grid_cpu", "models": "runs/dhs_benchmark",
            "oracles": "runs/dhs_oracles", "num": 64, "length": 200, "steps": 50, "best_n": 16, "cfg": [1.0, 3.0],
            "betas": [0.0625, 0.25, 1.0], "variants": list(VARIANTS),
            "finetune": {"train_steps": 180, "batch_size": 8, "group_size": 4, "lr": 1e-3, "grad_clip": 1.0,
                         "target_samples": 64, "eval_samples": 32}},
    "tiny": {"out": "runs/dhs_drakes_grid_tiny", "results": None, "models": None, "oracles": None, "num": 8,
             "length": 200, "steps": 8, "best_n": 4, "cfg": [1.0], "betas": [0.25, 1.0], "variants": list(VARIANTS),
             "finetune": {"train_steps": 6, "batch_size": 4, "group_size": 2, "lr": 3e-3, "grad_clip": 1.0,
                          "target_samples": 16, "eval_samples": 8}},
}
OFFICIAL_TRAJECTORY_STEPS = 1000 * 4 * 32 * 128  # DRAKES's DHS run: epochs × accumulation × batch × steps
DRY = {"betas": [1.0], "num": 4, "steps": 4, "best_n": 2,
       "finetune": {"train_steps": 1, "batch_size": 2, "group_size": 2, "lr": 1e-3, "grad_clip": 1.0,
                    "target_samples": 4, "eval_samples": 2}}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", choices=sorted(SCALES), default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="work folder (default runs/dhs_drakes_grid[_tiny])")
    p.add_argument("--results", default=None, help="results path without extension")
    p.add_argument("--models", default=None, help="folder with models/cg/model and models/cfg/model (as dhs_design)")
    p.add_argument("--oracles", default=None, help="folder with reward_classifier/ and eval_oracle/ (as dhs_design)")
    p.add_argument("--variants", default=None, help=f"comma-separated subset of {', '.join(VARIANTS)}; "
                   "none: only the inference rows")
    p.add_argument("--betas", default=None, help="comma-separated β grid (default: the scale's)")
    p.add_argument("--no-inference-rows", action="store_true", help="skip the unguided, best-of-N and CFG rows "
                   "(another invocation makes them; --carry-from adds them): needs only the unconditional model")
    p.add_argument("--carry-from", default=None, metavar="JSON[,JSON]", help="add the rows of earlier runs of this "
                   "grid that this run does not make; refused unless their settings and the fingerprints of the "
                   "models and oracles match (one core per invocation, cells spread over cores and sessions)")
    p.add_argument("--from-json", default=None, metavar="JSON", help="re-render a finished run's table (with "
                   "--carry-from: merged with other runs' rows, their fingerprints checked against its own; with "
                   "--note: the note replaced); loads no model")
    p.add_argument("--note", default=None, help="a paragraph written under the table (targets met or missed, why)")
    p.add_argument("--dry-run", action="store_true", help="every variant once at toy sizes on the fixture, models "
                   "trained in a temporary folder; writes no table")
    return p.parse_args(argv)


def fingerprint(folder: str | os.PathLike | None) -> str | None:
    """sha256 of a model or oracle folder's content: its files' bytes, sorted by name, except that an .npz is read
    as its arrays (a zip's member time stamps, which another writer may set, do not count) and metrics.json is
    left out. None for a missing folder. Unlike dnadiff.eval.fingerprint (the embedding store's key: every byte
    of every file), a copy whose metrics.json was rewritten still matches."""
    import hashlib

    if folder is None or not Path(folder).is_dir():
        return None
    h = hashlib.sha256()
    for f in sorted(Path(folder).iterdir()):
        if not f.is_file() or f.name == "metrics.json":
            continue
        h.update(f.name.encode())
        if f.suffix == ".npz":
            with np.load(f, allow_pickle=False) as z:
                for k in sorted(z.files):
                    h.update(k.encode() + np.ascontiguousarray(z[k]).tobytes())
        else:
            h.update(f.read_bytes())
    return h.hexdigest()


CARRY_SETTINGS = ("num", "length", "steps", "best_n", "cfg", "finetune")  # must match for rows to be carried


def carry_rows(rows: list[dict], paths: str, settings: dict, prints: dict, scale: str) -> list[dict]:
    """`rows` plus the rows of earlier grid runs (`--carry-from`, comma-separated) that this run did not make,
    keyed by (variant, setting); the first file's row wins where several have it. Refused (one line) unless those
    runs share the scale, the CARRY_SETTINGS and every model/oracle fingerprint that both record."""
    made = {(x["variant"], x["setting"]) for x in rows}
    out = list(rows)
    for path in [q.strip() for q in paths.split(",") if q.strip()]:
        try:
            old = json.loads(Path(path).read_text())
            old_rows = old["rows"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"error: --carry-from {path}: not a dhs_drakes_grid results JSON ({e})") from None
        if old.get("scale") != scale:
            raise SystemExit(f"error: --carry-from {path}: scale {old.get('scale')!r}, this run's is {scale!r}")
        for key in CARRY_SETTINGS:
            if old.get("settings", {}).get(key) != settings.get(key):
                raise SystemExit(f"error: --carry-from {path}: settings.{key} {old.get('settings', {}).get(key)!r} "
                                 f"differs from this run's {settings.get(key)!r}")
        for name, fp in prints.items():
            was = old.get("fingerprints", {}).get(name)
            if was is None and name in ("cg", "reward", "evaluation"):
                raise SystemExit(f"error: --carry-from {path}: it records no fingerprint of the {name} model/oracle")
            if was is not None and fp is not None and was != fp:
                raise SystemExit(f"error: --carry-from {path}: its {name} model/oracle differs from this run's "
                                 f"(sha256 {was[:12]} vs {fp[:12]}): rows of different models do not share a table")
        for x in old_rows:
            key = (x["variant"], x["setting"])
            if key not in made:
                made.add(key)
                out.append({**x, "carried_from": x.get("carried_from") or Path(path).name})
    return out


def ordered(rows: list[dict]) -> list[dict]:
    """Inference rows first (unguided, best-of-N, CFG by w), then each variant by β: one order however made."""
    rank = {"unguided": 0, "best_of_n": 1, "cfg": 2, **{v: 3 + i for i, v in enumerate(VARIANTS)}}
    return sorted(rows, key=lambda x: (rank.get(x["variant"], 99), x.get("beta") or 0.0, x["setting"]))


def missing_cells(r: dict) -> list[str]:
    """The scale's (variant, β) cells and inference rows that the table does not have yet."""
    full = SCALES.get(r["scale"])
    if full is None:
        return []
    have = {(x["variant"], x["setting"]) for x in r["rows"]}
    want = [("unguided", ""), ("best_of_n", ""), *[("cfg", f"w={w:g}") for w in full["cfg"]],
            *[(v, f"β={b:g}") for v in full["variants"] for b in full["betas"]]]
    return [f"{v} {s}".strip() for v, s in want if (v, s) not in have]


def finetune_argv(variant: str, beta: float, sc: dict, model: str, reward_dir: str, out: Path, threads: int) -> list:
    """The design-finetune command of one (variant, β): trained with the step count the table samples with."""
    import dhs_design as design

    method, options, tau = VARIANTS[variant]
    ft = sc["finetune"]
    argv = ["design-finetune", model, "--reward", f"classifier:{reward_dir}", "--target", design.CELL, "--method",
            method, "--kl-weight", beta, "--lr", ft["lr"], "--grad-clip", ft["grad_clip"], "--length", sc["length"],
            "--train-steps", ft["train_steps"], "--sample-steps", sc["steps"], "--batch-size", ft["batch_size"],
            "--group-size", ft["group_size"],
            "--target-samples", ft["target_samples"], "--eval-samples", ft["eval_samples"], "--seed", 0,
            "--out", out, "--threads", threads, "--overwrite", "-q"]
    if tau is not None:
        argv += ["--gumbel-temperature", tau]
    for item in options:
        argv += ["--option", item]
    return argv


def reward_calls(metrics: dict, sc: dict) -> int:
    """Reward evaluations of a fine-tuning run: one per trajectory of each update, plus the target's and the
    evaluation's samples (none at sampling time)."""
    ft = sc["finetune"]
    return int(metrics.get("updates", ft["train_steps"])) * int(ft["batch_size"]) + int(ft["target_samples"]) + \
        int(ft["eval_samples"])


def context(args, sc: dict, out: Path, dry: bool, log) -> tuple[dict, dict, str, str, object]:
    """dhs_design's scoring context: (models, ctx for dhs_design.score_test, reward dir, oracle dir, table)."""
    import dhs_design as design

    import dnadiff
    from dnadiff.data import CELL_TYPES, load_dhs
    from dnadiff.eval import MotifScanner, background_of, load_jaspar, load_oracle
    from dnadiff.heads import load_classifier_dir

    table = load_dhs()
    k = CELL_TYPES.index(design.CELL)
    if getattr(args, "no_inference_rows", False) and not dry and args.scale != "tiny":  # only the model fine-tuned
        root, oracles = Path(args.models or sc["models"]), Path(args.oracles or sc["oracles"])
        models = {"cg": str(root / "models" / "cg" / "model")}
        reward_dir, eval_dir = str(oracles / "reward_classifier"), str(oracles / "eval_oracle")
        for d in (models["cg"], reward_dir, eval_dir):
            if not Path(d).is_dir():
                raise SystemExit(f"error: {d}: missing (pipelines/dhs_design.py's docstring says how to make it)")
    else:
        models, _, reward_dir, eval_dir, _ = design.models_and_oracles(args, sc, out, dry, log)
    rows = table.indices("test")
    test_real = [s for s, y in zip(table.sequences("test"), table.labels[rows]) if y == k]
    perm = np.random.default_rng(design.TEST_SEED).permutation(len(test_real))
    reference = [test_real[i] for i in perm[len(perm) // 2:]]
    pretrained = dnadiff.load(models["cg"])
    pretrained.backbone.eval()
    gc_range, ll_floor = design.natural_bounds(pretrained, test_real)
    scanner = MotifScanner(load_jaspar(), background_of(test_real))
    hits, bases = scanner.scan(reference)
    ctx = {"target": k, "pretrained": pretrained, "reward_model": load_classifier_dir(reward_dir)[0],
           "oracle": load_oracle(eval_dir)[0], "test_bounds": {"gc_range": gc_range, "ll_floor": ll_floor},
           "reference": reference, "scanner": scanner, "reference_rate": hits.sum(axis=0) / max(bases.sum(), 1) * 1e3}
    ctx["neural"], ctx["neural_dir"] = judging.neural_oracle(str(Path(eval_dir).parent))  # issue 46's CNN judge
    return models, ctx, reward_dir, eval_dir, table


def rerender(args: argparse.Namespace) -> int:
    """--from-json: a finished table re-rendered, merged with --carry-from rows, its note replaced by --note."""
    r = common.read_results_json(args.from_json, "dhs_drakes_grid")
    if "fingerprints" not in r or "rows" not in r:
        raise SystemExit(f"error: --from-json {args.from_json}: no fingerprints/rows: not a dhs_drakes_grid result")
    if args.carry_from:
        r["rows"] = carry_rows(r["rows"], args.carry_from, r["settings"], r["fingerprints"], r["scale"])
    r["rows"] = ordered(r["rows"])
    return common.rerender(args, r, markdown, plot)


def run(args: argparse.Namespace, command: str, dry: Path | None) -> int:
    import dhs_benchmark as bench
    import dhs_design as design
    import dhs_oracles

    from dnadiff.machine import load_average
    from dnadiff.threads import apply_threads

    if args.from_json and dry is None:
        return rerender(args)
    sc = json.loads(json.dumps(SCALES["tiny" if dry is not None else args.scale]))
    if dry is not None:
        sc.update(DRY)
    if args.variants == "none":  # only the inference rows
        sc["variants"] = []
    elif args.variants:
        sc["variants"] = [v.strip() for v in args.variants.split(",") if v.strip()]
        if not sc["variants"] or any(v not in VARIANTS for v in sc["variants"]):
            raise SystemExit(f"error: --variants {args.variants!r}: choose from {', '.join(VARIANTS)}")
    if args.betas:
        sc["betas"] = [float(b) for b in args.betas.split(",")]
    if not sc["variants"] and args.no_inference_rows:
        raise SystemExit("error: --variants none with --no-inference-rows: no row to make")
    out = dry if dry is not None else Path(args.out or sc["out"])
    out.mkdir(parents=True, exist_ok=True)
    results = Path(args.results) if args.results else (
        Path(sc["results"]) if sc["results"] and dry is None else out / "dhs_drakes_grid_tiny")
    if args.scale == "tiny" or dry is not None:  # the 300-row fixture as the DHS table
        os.environ["DNADIFF_CACHE"] = str(dhs_oracles._tiny_cache(out))
    apply_threads(args.threads)
    log = print
    load_before, w0, c0 = load_average(), time.time(), time.process_time()
    models, ctx, reward_dir, eval_dir, table = context(args, sc, out, dry is not None, log)
    cmds = design.Commands(eval_dir, log)
    design_sc = {"length": sc["length"], "steps": sc["steps"], "best_n": sc["best_n"], "svdd_candidates": 2,
                 "smc_particles": 2}  # (design_argv names every row's options)

    def sample(row: str, value, name: str, finetuned: str | None = None) -> tuple[dict, dict, float]:
        path = out / "test" / f"{name}.fa"
        path.parent.mkdir(parents=True, exist_ok=True)
        argv, inputs = design.design_argv(row, value, design_sc, models, reward_dir, sc["num"], design.TEST_SEED,
                                          path, args.threads, finetuned)
        info = cmds.run(argv, f"test designs {name}", path.with_suffix(".done.json"), inputs)
        return design.score_test(bench.read_samples(path), ctx), info, design.nfe_of(path)

    rows = []
    inference = [] if args.no_inference_rows and dry is None else [("unguided", [None]), ("best_of_n", [None]),
                                                                   ("cfg", sc["cfg"])]
    for row, values in inference:
        for value in values:
            score, info, nfe = sample(row, value, row if value is None else f"{row}_w{value:g}")
            n = sc["best_n"]
            rows.append({"row": row, "variant": row, "setting": "" if value is None else f"w={value:g}",
                         "kl": 0.0 if row == "unguided" else (math.log(n) - (n - 1) / n if row == "best_of_n"
                                                               else None),
                         "reward_calls": sc["num"] * n if row == "best_of_n" else 0, "nfe_per_design": nfe,
                         "wall_s": info["wall_s"], **score})
    for variant in sc["variants"]:
        for beta in sc["betas"]:
            ft_dir = out / "finetuned" / f"{variant}_b{beta:g}"
            ft_dir.parent.mkdir(parents=True, exist_ok=True)
            info = cmds.run(finetune_argv(variant, beta, sc, models["cg"], reward_dir, ft_dir, args.threads),
                            f"fine-tune {variant}", ft_dir.with_name(ft_dir.name + ".done.json"),
                            [models["cg"], reward_dir])
            m = json.loads((ft_dir / "metrics.json").read_text())
            score, s_info, nfe = sample(VARIANTS[variant][0], None, f"{variant}_b{beta:g}", str(ft_dir))
            first, last = design.quarter_means(design.reward_curve(ft_dir))
            target_kl, reached_kl = m.get("target_kl"), m.get("reached_kl")
            rows.append({"row": "finetuned", "variant": variant, "setting": f"β={beta:g}", "beta": beta,
                         "kl": reached_kl, "target_kl": target_kl, "target_ess": m.get("target_ess"),
                         "kl_ratio": reached_kl / target_kl if target_kl and reached_kl is not None else None,
                         "reached_reward": m.get("reached_reward"), "target_reward": m.get("target_reward"),
                         "reward_calls": reward_calls(m, sc), "nfe_per_design": nfe, "updates": m.get("updates"),
                         "finetune_wall_s": m.get("wall_seconds_this_session", info["wall_s"]),
                         "finetune_cpu_s": info["cpu_s"], "wall_s": s_info["wall_s"], "curve_first_quarter": first,
                         "curve_last_quarter": last, **score})
            log(f"{variant} β={beta:g}: success {score['success']:.3f}, realistic {score['realistic_success']:.3f}, "
                f"KL {reached_kl} (target {target_kl})")
    prints = {"cg": fingerprint(models["cg"]), "cfg": fingerprint(models.get("cfg")),
              "reward": fingerprint(reward_dir), "evaluation": fingerprint(eval_dir),
              "neural": fingerprint(ctx["neural_dir"])}
    if args.carry_from:
        rows = carry_rows(rows, args.carry_from, sc, prints, args.scale)
    rows = ordered(rows)
    if dry is not None:
        print(f"dry run: {len(rows)} rows ({', '.join(sc['variants'])} × β {sc['betas']}) built, fine-tuned, "
              f"sampled and scored ({time.time() - w0:.0f} s)")
        return 0
    common.write_report(results, {
        "scale": args.scale, "command": command, "threads": args.threads, "settings": sc, "rows": rows,
        "data_sha256": table.sha256, "models": models, "fingerprints": prints, "note": args.note,
        "oracles": {"reward": reward_dir, "evaluation": eval_dir, "neural": ctx["neural_dir"]},
        "commands": cmds.records, "wall_s": round(time.time() - w0, 1), "cpu_s": round(time.process_time() - c0, 1),
        "load_before": load_before, **common.stamp("load_after")}, markdown, plot)
    print(f"wrote {results.with_suffix('.md')}")
    return 0


def _num(v, digits: int = 3) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}g}"


def _auroc(x: dict, judge: str) -> str:
    a = x.get(f"disc_auroc_{judge}")
    return "—" if a is None else f"{a:.3f} ± {x[f'disc_se_{judge}']:.3f} (p {x[f'disc_p_{judge}']:.2g})"


def markdown(r: dict, png: str | None) -> str:
    from dnadiff.utils import markdown_table

    table = markdown_table([{
        "row": x["variant"] + (" *" if x.get("carried_from") else ""), "setting": x["setting"],
        "success": f"{x['success']:.3f} ± {x['success_se']:.3f}",
        "success (neural oracle)": "—" if x.get("success_neural") is None else f"{x['success_neural']:.3f}",
        "realistic success": _num(x["realistic_success"]), "CNN AUROC vs real": _auroc(x, "cnn"),
        "log-lik / base": _num(x["loglik"]),
        "mean reward": _num(x["reward"]), "KL (reached / bound)": _num(x["kl"]), "target KL": _num(x.get("target_kl")),
        "KL / target": _num(x.get("kl_ratio"), 2), "reward calls": x["reward_calls"],
        "denoiser calls / design": _num(x["nfe_per_design"]),
        "fine-tuning s": _num(x.get("finetune_wall_s"), 4), "curve first / last quarter":
        f"{_num(x.get('curve_first_quarter'))} / {_num(x.get('curve_last_quarter'))}" if x["row"] == "finetuned"
        else ""} for x in r["rows"]])
    small = " — SMALL SCALE (tiny models on the 300-row fixture): not the HepG2 result" if r["scale"] == "tiny" else ""
    ft = r["settings"]["finetune"]
    per_run = ft["train_steps"] * ft["batch_size"] * r["settings"]["steps"]
    missing, carried = missing_cells(r), sorted({x["carried_from"] for x in r["rows"] if x.get("carried_from")})
    return "\n".join([
        f"# DRAKES estimators × β on HepG2 design (issue 51 §3): scale {r['scale']}{small}", "",
        f"`{r['command']}`  ", f"{r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU ({r['threads']} thread); "
        f"{r['machine']}; load before {r['load_before']}, after {r['load_after']}.", "",
        f"{r['settings']['num']} designs of {r['settings']['length']} bp per row, {r['settings']['steps']} sampling "
        f"steps. Fine-tuning: {ft['train_steps']} updates × batch {ft['batch_size']}, lr {ft['lr']:g}, gradient clip "
        f"{ft['grad_clip']:g}, trained with the table's sampling step count. Variants and columns: the docstring of "
        "pipelines/dhs_drakes_grid.py. KL: fine-tuned rows, the reached trajectory KL to the pretrained model; "
        "best-of-N, the bound log n − (n−1)/n; target KL: SNIS estimate of KL(p*‖p_pre) at that β. "
        f"Budget per fine-tuning run: {per_run:,} trajectory-steps, {per_run / OFFICIAL_TRAJECTORY_STEPS:.2%} of the "
        "official DHS run's 16.4 M (1,000 epochs × 4 × 32 trajectories × 128 steps). Success: the k-mer LR "
        "evaluation oracle's argmax = HepG2 (± its binomial SE); beside it the neural evaluation oracle's (issue 46) "
        "and a CNN two-sample discriminator against real HepG2 test sequences (0.5 = indistinguishable).", "",
        *([f"Rows marked * were made by earlier invocations on the same models and oracles (fingerprints checked): "
           f"{', '.join(carried)}; the wall and CPU above are this invocation's.", ""] if carried else []),
        *([f"**Partial grid**: not run yet: {', '.join(missing)}.", ""] if missing else []),
        table, "", *([f"![frontier]({Path(png).name})", ""] if png else []),
        *([r["note"], ""] if r.get("note") else [])])


def plot(r: dict, path: Path) -> str:
    """Success (o) and realistic success (x) against KL, coloured by log-likelihood per base (naturalness)."""
    import matplotlib

    plt = common.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    pts = [x for x in r["rows"] if x.get("kl") is not None]
    lls = [x["loglik"] for x in pts if x["loglik"] is not None]
    norm = matplotlib.colors.Normalize(min(lls, default=-2), max(lls, default=-1))
    style = {"unguided": ("s", "unguided"), "best_of_n": ("*", "best-of-N"), "drakes_st": ("o", "ST"),
             "drakes_soft": ("^", "soft"), "drakes_soft_live": ("v", "soft-live"), "policy_gradient": ("D", "PG")}
    dots = None
    for ax, key in zip(axes, ("success", "realistic_success")):
        for x in pts:
            dots = ax.scatter(max(x["kl"], 1e-4), x[key], c=[x["loglik"]], cmap="viridis", norm=norm,
                            marker=style.get(x["variant"], ("o",))[0], s=45, edgecolors="k", linewidths=0.4)
            ax.annotate(f"{style.get(x['variant'], (0, x['variant']))[1]} {x['setting']}".strip(),
                        (max(x["kl"], 1e-4), x[key]), fontsize=6, xytext=(4, -2), textcoords="offset points")
        for variant in {x["variant"] for x in pts} - {"unguided"}:
            # One estimator's β points joined by KL: its frontier.
            line = sorted((x["kl"], x[key]) for x in pts if x["variant"] == variant)
            if len(line) > 1:
                ax.plot(*zip(*line), color="grey", lw=0.6, alpha=0.6, zorder=0)
        for x in r["rows"]:
            if x["variant"] == "cfg":
                ax.axhline(x[key], color="grey", ls=":", lw=1)
                ax.annotate(f"CFG {x['setting']}", (1.2e-4, x[key]), fontsize=6, color="grey",
                            xytext=(0, 2), textcoords="offset points")
        ax.set_xscale("log")
        # Room on the right for the labels of the largest-KL points (they are written rightwards).
        ax.set_xlim(right=30 * max((max(x["kl"], 1e-4) for x in pts), default=1.0))
        ax.set_xlabel("KL to the pretrained model (nats; best-of-N: bound)")
        ax.set_title(key.replace("_", " ") + (" (dotted: CFG)" if key == "success" else ""), fontsize=9)
    axes[0].set_ylabel("evaluation-oracle success")
    key_text = ("ST: DRAKES per-step straight-through\nsoft: soft states, KL on all steps\n"
                "soft-live: soft states, KL on the live steps\nPG: policy gradient\n"
                "lines join one estimator's β values")
    axes[0].text(0.99, 0.01, key_text, transform=axes[0].transAxes, fontsize=5.5, va="bottom", ha="right")
    if dots is not None:
        fig.colorbar(dots, ax=axes, label="log-likelihood / base (pretrained)")
    if r["scale"] == "tiny":
        fig.suptitle("SMALL SCALE: tiny models on the 300-row fixture", fontsize=9)
    return common.save_png(fig, path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return common.main_with_dry_run(run, args, __file__, argv, "dhs_drakes_grid")


if __name__ == "__main__":
    raise SystemExit(main())
