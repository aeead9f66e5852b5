"""The DHS design table (issue 34 §5, issue 35 §3): HepG2-specific DHS sequences from every design method.

    python pipelines/dhs_design.py --scale cpu --threads 1     # results/dhs_design_cpu.{md,json,png}
    python pipelines/dhs_design.py --scale cpu --dry-run       # every row on the real table, toy sizes, no table
    python pipelines/dhs_design.py --scale tiny                # the 300-row fixture, tiny models trained here
    python pipelines/dhs_design.py --from-json results/dhs_design_cpu.json --note "..."   # re-render, a note

Pretrained models (those of pipelines/dhs_benchmark.py, `--models`, default runs/dhs_benchmark): the unconditional
MDLM models/cg/model (configs/experiments/dhs_mdlm.yaml), which every method but CFG steers or fine-tunes and
under which naturalness is measured, and the cell-type-conditional MDLM models/cfg/model (dhs_cond_mdlm.yaml)
for the CFG row. Reward: `--reward classifier:ORACLES/reward_classifier --target HepG2`, r(x) = log p(HepG2 | x)
(pipelines/dhs_oracles.py). The evaluation oracle (ORACLES/eval_oracle, a k-mer LR) only scores: no command
this pipeline runs is given it (each command is checked before it runs, and all are recorded in the JSON).

Rows (all through the `dnadiff` CLI, in-process): unguided (`design --method none`), CFG (`sample MODELS/cfg
--class HepG2 --guidance w`), best-of-N (n = 16), SVDD, SMC, CG (`--method cg_grad`), and the pretrained
unconditional model fine-tuned by `dnadiff design-finetune` with DRAKES and with policy gradient, then sampled
plainly (`dnadiff sample FT_DIR`). Every row samples `num` designs of 200 bp with `steps` ancestral steps,
seed 0; the real HepG2 test sequences (half A of them, chr1) are a reference row.

Settings chosen on validation rewards (never the evaluation oracle, never the test split): for each setting of
a row's grid (CFG weight, CG scale, SMC alpha, fine-tuning (β, lr)), `valid_num` designs with seed 1000 are
scored by the *reward classifier*; the setting kept has the highest validation realistic reward-success
(reward-classifier argmax = HepG2, GC inside the 5–95 % range of the real HepG2 *validation* sequences (chr2),
log-likelihood under the pretrained model above their 5 % quantile), ties broken by the mean reward, then by
the order of the grid.

Columns (test): success = evaluation-oracle (k-mer LR) argmax is HepG2 (± its binomial SE; success (neural oracle):
the same under ORACLES/neural_oracle when it exists; discriminator AUROC: pipelines/judging.py); realistic success =
success AND GC inside the real HepG2 test sequences' 5–95 % range AND log-likelihood per base under the
pretrained unconditional MDLM above their 5 % quantile (pipelines/reward_finetuning_rows.py judge); mean reward
(reward classifier); motif Spearman = Spearman of JASPAR 2024 CORE vertebrate hit rates vs half B of the real
HepG2 test sequences (dnadiff.eval.motifs, as pipelines/dhs_benchmark.py); diversity (distinct 6-mers / 4,096,
mean pairwise identity at the same offset); denoiser calls per design (the command JSON's nfe_per_sequence:
rows pushed through the network, CFG's two passes counted); fine-tuning wall time. The fine-tuned rows also
state their target (the SNIS estimates design-finetune writes before training: E*[r], KL(p*‖p_pre), ESS), what
the fine-tuned model reached (its mean reward and trajectory KL), and the reward-vs-update curve (PNG; the
table gives its first and last quarter means so a reader sees whether it had flattened).

Cost of --scale cpu, about 100 CPU-minutes on one core (estimated from measurements on this project's 2-core
machine, CPU seconds, which its load does not inflate much): a 200-bp row through the d64 x 2 Caduceus MDLM
costs ~10 ms (16 designs x 50 steps unguided: 13.6 s CPU of which ~9 s is start-up; best-of-4: 41.8 s); one
DRAKES update at batch 16 x 25 steps, gradient through the last 5, cost ~40 s CPU (55.8 s with start-up),
i.e. ~0.1 s per trajectory row-step. Hence: inference rows of 64 designs x 50 steps: unguided 3,200 rows
(~0.5 min), CFG 6,400 (~1 min), best-of-16 51,200 (~9 min), SVDD (4 candidates) and SMC (4 particles) 12,800
rows + as many reward rows (~3 min each), CG (first order) ~1.5 min; validation designs (16 per setting)
~4 min; fine-tuning, 4 runs (2 β each for DRAKES and policy gradient) of 100 updates at batch 8 x 16 steps
plus 64 target and 16 evaluation samples: 12-13 min a run (measured 722-782 s wall, 644-672 s CPU, one thread at
load 3 on 2 cores, 4 Dec), ~50 min; scoring (log-likelihoods of ~2,200 real sequences, motif scans) and command
start-ups ~5 min. The whole --scale cpu run with every other row's outputs kept: 55 min wall (3,282 s).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import common
import judging
import numpy as np
from dhs_design_commands import CELL, Commands, design_argv, finetune_argv, nfe_of, quarter_means, reward_curve
from dhs_design_report import FINETUNED, LABELS, TEST_SEED, VALID_SEED, markdown, plot

REPO = Path(__file__).resolve().parent.parent
ROWS = ("unguided", "cfg", "best_of_n", "svdd", "smc", "cg", "drakes", "policy_gradient")
# the option a row's grid sets (CFG: the guidance weight; fine-tuned rows: (β, lr) pairs)
GRID_OPTION = {"cfg": "guidance", "cg": "scale", "smc": "alpha"}
SCALES = {
    "cpu": {"out": "runs/dhs_design", "results": "results/dhs_design_cpu", "models": "runs/dhs_benchmark",
            "oracles": "runs/dhs_oracles", "num": 64, "valid_num": 16, "length": 200, "steps": 50, "best_n": 16,
            "svdd_candidates": 4, "smc_particles": 4,
            "grids": {"cfg": [1.0, 3.0], "cg": [1.0, 4.0], "smc": [0.5, 1.0]},
            # fine-tuning: shorter trajectories than sampling (16 of the 50 steps), gradient through the last 4
            # (DRAKES), batch 8 (policy gradient: 2 groups of 4), 100 updates (20 left the reward curves rising,
            # results/dhs_design_cpu.md of 3 Dec): the reward curve shows whether 100 flattened
            "finetune": {"train_steps": 100, "sample_steps": 16, "truncate_steps": 4, "batch_size": 8,
                         "group_size": 4, "target_samples": 64, "eval_samples": 16},
            "finetune_grid": {"drakes": [(0.25, 1e-3), (1.0, 1e-3)], "policy_gradient": [(0.25, 1e-3), (1.0, 1e-3)]}},
    "tiny": {"out": "runs/dhs_design_tiny", "results": None, "models": None, "oracles": None, "num": 4,
             "valid_num": 4, "length": 200, "steps": 4, "best_n": 16, "svdd_candidates": 2, "smc_particles": 2,
             "grids": {"cfg": [1.0, 3.0], "cg": [1.0, 4.0], "smc": [1.0]},
             "finetune": {"train_steps": 2, "sample_steps": 4, "truncate_steps": 2, "batch_size": 4, "group_size": 2,
                          "target_samples": 8, "eval_samples": 4},
             "finetune_grid": {"drakes": [(0.5, 1e-3), (2.0, 1e-3)], "policy_gradient": [(0.5, 1e-3)]}},
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    common.add_common_options(
        p, scales=SCALES, results_help="results path without extension (default results/dhs_design_cpu; tiny: "
        "OUT/dhs_design_tiny)", dry_run_help="every row on the real table at the tiny scale's sizes, models trained a "
        "step in a temporary folder (oracles: --oracles when there, else tiny ones); writes no table",
        from_json="re-render the .md and .png of a finished run from its JSON (with --note: the note replaced)")
    p.add_argument("--out", default=None, help="work folder (default runs/dhs_design[_tiny])")
    p.add_argument("--models", default=None, help="folder with models/cg/model and models/cfg/model (default "
                   "runs/dhs_benchmark; tiny and --dry-run: trained into OUT)")
    p.add_argument("--oracles", default=None, help="folder with reward_classifier/ and eval_oracle/ (default "
                   "runs/dhs_oracles; tiny and --dry-run: trained into OUT/oracles)")
    p.add_argument("--note", default=None, help="a paragraph for the table's header (e.g. how the models were "
                   "trained when they were trained apart, the targets met or missed)")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- scoring


def judge(seqs: list[str], ctx: dict, bounds: dict, classifier, reference: list[str]) -> dict:
    """reward_finetuning_rows.judge's columns for one set: `classifier`'s argmax = HepG2 as success (the evaluation
    oracle on test, the reward classifier on validation), realistic success against `bounds` (GC range and
    log-likelihood floor of real HepG2 sequences), plus the mean reward (reward classifier, log p(HepG2 | x))."""
    import reward_finetuning_rows as rf

    from dnadiff.eval import predict_proba

    k = ctx["target"]
    rewards = np.log(np.clip(predict_proba(ctx["reward_model"], seqs)[:, k], 1e-300, None))

    def hit(s):  # 1 where the classifier's argmax is HepG2: judge's `p > 0.5` is exactly that
        return (predict_proba(classifier, s).argmax(axis=1) == k).astype(float)

    row = rf.judge("classifier", seqs, {"pretrained": ctx["pretrained"], "real_pos": reference, "oracle": hit,
                                        "reward_of": lambda s: float(rewards.mean()), **bounds})
    n = len(seqs)
    row.update(success=row.pop("oracle_success"), n=n, reward=float(rewards.mean()))
    row.pop("oracle_mean")
    row["success_se"] = math.sqrt(row["success"] * (1 - row["success"]) / n) if n else None
    return row


def score_test(seqs: list[str], ctx: dict) -> dict:
    import dhs_benchmark as bench

    from dnadiff.eval import auroc_columns, spearman

    row = judge(seqs, ctx, ctx["test_bounds"], ctx["oracle"], ctx["reference"])
    hits, bases = ctx["scanner"].scan(seqs)
    rate = hits.sum(axis=0) / max(bases.sum(), 1) * 1000.0
    row["motif_spearman"] = spearman(rate, ctx["reference_rate"])
    row["distinct_6mers"] = bench.distinct_kmers(seqs)
    row["pairwise_identity"] = bench.mean_pairwise_identity(seqs)
    row.update(auroc_columns(seqs, ctx["reference"]))  # can a CNN / k-mer LR tell them from real? (issue 46)
    row["success_neural"] = judging.success_rate(ctx.get("neural"), seqs, ctx["target"])  # None: no neural oracle
    return row


def choose(scores: list[dict]) -> int:
    """Index of the kept setting: highest validation realistic reward-success, then mean reward, then first."""
    return max(range(len(scores)), key=lambda i: (scores[i]["realistic_success"], scores[i]["reward"], -i))


# ----------------------------------------------------------------------------- the run


def models_and_oracles(args, sc: dict, out: Path, dry: bool, log) -> tuple[dict, dict, str, str | None, dict]:
    """(model folders, their training info, reward classifier dir, evaluation oracle dir, oracles trained here)."""
    import types

    import dhs_benchmark as bench

    oracles = Path(args.oracles or SCALES["cpu"]["oracles"])
    given = [str(oracles / "reward_classifier"), str(oracles / "eval_oracle")]
    if args.scale == "tiny" or (dry and not all(Path(d).is_dir() for d in given)):  # tiny ones, trained here
        ns = types.SimpleNamespace(scale="tiny", oracles=None, threads=args.threads)
        reward_dir, eval_dir, trained = bench.load_oracles(ns, out, True, log)
    else:
        (reward_dir, eval_dir), trained = given, {}
        for d in given:
            if not Path(d).is_dir():
                raise SystemExit(f"error: {d}: missing; run `python pipelines/dhs_oracles.py --scale cpu` first "
                                 "(or give --oracles DIR)")
    if args.scale == "tiny" or dry:
        root = out
        train_scale = {"train": {"*": bench.SHORT_STEP}}
    else:
        root = Path(args.models or sc["models"])
        for row in ("cg", "cfg"):
            if not (root / "models" / row / "model" / "config.json").is_file():
                raise SystemExit(f"error: {root / 'models' / row / 'model'}: missing; train it first: `dnadiff train "
                                 f"{bench.CONFIGS[row]} --run-dir {root / 'models' / row} --threads 1` (or give "
                                 "--models DIR)")
        train_scale = {"train": {}}
    info = {row: bench.train_row(row, root, train_scale, args.threads, False, log) for row in ("cg", "cfg")}
    return {row: i["model"] for row, i in info.items()}, info, reward_dir, eval_dir, trained


def run(args: argparse.Namespace, command: str, dry: Path | None) -> int:
    import dhs_benchmark as bench
    import dhs_oracles

    import dnadiff
    from dnadiff.data import CELL_TYPES, load_dhs
    from dnadiff.eval import MotifScanner, background_of, load_jaspar, load_oracle, scanner_settings
    from dnadiff.heads import load_classifier_dir
    from dnadiff.machine import load_average
    from dnadiff.threads import apply_threads

    sc = SCALES["tiny" if dry is not None else args.scale]
    out = dry if dry is not None else Path(args.out or sc["out"])
    out.mkdir(parents=True, exist_ok=True)
    results = Path(args.results) if args.results else (
        Path(sc["results"]) if sc["results"] and dry is None else out / "dhs_design_tiny")
    if args.scale == "tiny":
        os.environ["DNADIFF_CACHE"] = str(dhs_oracles._tiny_cache(out))
    apply_threads(args.threads)
    log = print
    load_before = load_average()
    w0, c0 = time.time(), time.process_time()

    table = load_dhs()
    k = CELL_TYPES.index(CELL)
    models, model_info, reward_dir, eval_dir, trained = models_and_oracles(args, sc, out, dry is not None, log)
    cmds = Commands(eval_dir, log)

    def split_seqs(split):
        rows = table.indices(split)
        return [s for s, y in zip(table.sequences(split), table.labels[rows]) if y == k]

    valid_real, test_real = split_seqs("valid"), split_seqs("test")
    perm = np.random.default_rng(TEST_SEED).permutation(len(test_real))
    half = len(perm) // 2
    real_a = [test_real[i] for i in perm[:half]][: sc["num"]]
    reference = [test_real[i] for i in perm[half:]]
    pretrained = dnadiff.load(models["cg"])
    pretrained.backbone.eval()
    reward_model, _ = load_classifier_dir(reward_dir)
    oracle, _ = load_oracle(eval_dir)
    bounds = {}
    for split, real in (("valid", valid_real), ("test", test_real)):
        gc_range, ll_floor = natural_bounds(pretrained, real)
        bounds[split] = {"gc_range": gc_range, "ll_floor": ll_floor}
    scanner = MotifScanner(load_jaspar(), background_of(test_real))
    ref_hits, ref_bases = scanner.scan(reference)
    ctx = {"target": k, "pretrained": pretrained, "reward_model": reward_model, "oracle": oracle,
           "test_bounds": bounds["test"], "reference": reference, "scanner": scanner,
           "reference_rate": ref_hits.sum(axis=0) / max(ref_bases.sum(), 1) * 1000.0}
    ctx["neural"], neural_dir = judging.neural_oracle(str(Path(eval_dir).parent))

    # fine-tuning runs (every (β, lr) of each method's grid)
    finetuned: dict = {m: [] for m in FINETUNED}
    for method in FINETUNED:
        for beta, lr in sc["finetune_grid"][method]:
            ft_dir = out / "finetuned" / f"{method}_b{beta:g}_lr{lr:g}"
            ft_dir.parent.mkdir(parents=True, exist_ok=True)
            info = cmds.run(finetune_argv(method, beta, lr, sc, models, reward_dir, ft_dir, args.threads),
                            f"fine-tune {method}", ft_dir.with_name(ft_dir.name + ".done.json"),
                            [models["cg"], reward_dir])
            metrics = json.loads((ft_dir / "metrics.json").read_text())
            curve = reward_curve(ft_dir)
            first, last = quarter_means(curve)
            finetuned[method].append({"kl_weight": beta, "lr": lr, "dir": str(ft_dir), "command": info["command"],
                                      "wall_s": info["wall_s"], "cpu_s": info["cpu_s"], "metrics": metrics,
                                      "curve": curve, "curve_first_quarter": first, "curve_last_quarter": last})

    def setting_value(row, i):
        if row in FINETUNED:
            return finetuned[row][i]
        return sc["grids"][row][i] if row in sc["grids"] else None

    def make(row, i, num, seed, folder):
        value = setting_value(row, i)
        name = f"{row}_{i}_seed{seed}" if (row in sc["grids"] or row in FINETUNED) else f"{row}_seed{seed}"
        path = out / folder / f"{name}.fa"
        path.parent.mkdir(parents=True, exist_ok=True)
        argv, inputs = design_argv(row, value, sc, models, reward_dir, num, seed, path, args.threads,
                                   value["dir"] if row in FINETUNED else None)
        info = cmds.run(argv, f"{'validation' if folder == 'valid' else 'test'} designs {row}",
                        path.with_suffix(".done.json"), inputs)
        return bench.read_samples(path), info, nfe_of(path)

    # validation choice of each grid
    choice: dict = {}
    for row in ROWS:
        size = len(finetuned[row]) if row in FINETUNED else len(sc["grids"].get(row, []))
        if size == 0:
            continue
        scores = []
        for i in range(size):
            seqs, _, _ = make(row, i, sc["valid_num"], VALID_SEED, "valid")
            s = judge(seqs, ctx, bounds["valid"], reward_model, valid_real)
            value = setting_value(row, i)
            scores.append({"setting": setting_label(row, value, sc), "realistic_success": s["realistic_success"],
                           "success": s["success"], "reward": s["reward"], "loglik": s["loglik"]})
        best = choose(scores)
        choice[row] = {"index": best, "setting": scores[best]["setting"], "grid": scores}
        log(f"{row}: {scores[best]['setting']} chosen on validation rewards")

    # the test designs
    rows_out = []
    for row in ROWS:
        i = choice.get(row, {}).get("index", 0)
        seqs, info, nfe = make(row, i, sc["num"], TEST_SEED, "test")
        entry = {"row": row, "label": LABELS[row], "setting": setting_label(row, setting_value(row, i), sc),
                 "nfe_per_design": nfe, "sample_wall_s": info["wall_s"], "command": info["command"],
                 **score_test(seqs, ctx)}
        if row in FINETUNED:
            ft = finetuned[row][i]
            m = ft["metrics"]
            entry.update(finetune_wall_s=m.get("wall_seconds_this_session", ft["wall_s"]), finetune_cpu_s=ft["cpu_s"],
                         finetune_command=ft["command"], updates=m.get("updates"),
                         **{key: m.get(key) for key in ("pretrained_reward", "target_reward", "target_reward_se",
                                                        "target_kl", "target_kl_se", "target_ess", "reached_reward",
                                                        "reached_reward_se", "reached_kl", "reached_kl_se")},
                         curve_first_quarter=ft["curve_first_quarter"], curve_last_quarter=ft["curve_last_quarter"])
        rows_out.append(entry)
        log(f"{row}: success {entry['success']:.3f}, realistic {entry['realistic_success']:.3f}, "
            f"reward {entry['reward']:.3f}, NFE {nfe:g}")
    rows_out.append({"row": "real", "label": LABELS["real"], "setting": "", "nfe_per_design": None,
                     **score_test(real_a, ctx)})
    if dry is not None:
        print(f"dry run: rows {', '.join(ROWS)} built, fine-tuned and sampled ({time.time() - w0:.0f} s)")
        return 0

    wall, cpu = time.time() - w0, time.process_time() - c0
    result = {"scale": args.scale, "command": command, "threads": args.threads, "target": CELL, "settings": sc,
              "data": {"sha256": table.sha256, "valid_hepg2": len(valid_real), "test_hepg2": len(test_real),
                       "reference_half_b": len(reference)},
              "models": {row: {**model_info[row]} for row in model_info},
              "oracles": {"reward": reward_dir, "evaluation": eval_dir, "trained_here": trained or None,
                          "reward_meta": bench.oracle_meta(reward_dir), "evaluation_meta": bench.oracle_meta(eval_dir),
                          "neural": neural_dir, "realistic_rule": judging.realistic_rule(neural_dir is not None)},
              "bounds": bounds, "choice": choice, "rows": rows_out,
              "finetuning": {m: [{key: v for key, v in ft.items()} for ft in runs] for m, runs in finetuned.items()},
              "commands": cmds.records,
              "motif_scanner": scanner_settings(scanner, "JASPAR2024 CORE vertebrates (pyjaspar)"),
              "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load_before": load_before, "note": args.note,
              **common.stamp("load_after")}
    common.write_report(results, result, markdown, plot)
    print(f"wrote {results.with_suffix('.md')} ({wall:.0f} s wall, {cpu:.0f} s CPU)")
    return 0


def natural_bounds(pretrained, real: list[str]) -> tuple[tuple[float, float], float]:
    """The naturalness bounds of realistic success, as reward_finetuning.run computes them: the GC 5–95 % range
    and the 5 % quantile of the log-likelihood per base of real sequences under the pretrained model (in chunks of
    256 sequences: ~1,100 at once held ~2 GB)."""
    import reward_finetuning_rows as rf

    from dnadiff.eval import gc_content

    gc = gc_content(real)
    ll = np.concatenate([rf.loglik_per_base(pretrained, real[i : i + 256]) for i in range(0, len(real), 256)])
    return tuple(float(q) for q in np.nanquantile(gc, [0.05, 0.95])), float(np.quantile(ll, 0.05))


def setting_label(row: str, value, sc: dict) -> str:
    """What a row ran with: its grid's chosen value and its fixed options."""
    if row in FINETUNED:
        return f"β={value['kl_weight']:g}, lr={value['lr']:g}"
    fixed = {"best_of_n": f"n={sc['best_n']}", "svdd": f"candidates={sc['svdd_candidates']}",
             "smc": f"particles={sc['smc_particles']}"}.get(row)
    parts = [f"{GRID_OPTION[row]}={value:g}"] if row in GRID_OPTION else []
    return ", ".join(parts + ([fixed] if fixed else []))


def rerender(args: argparse.Namespace, command: str) -> int:
    """--from-json: a finished run's table, figure and JSON written again at --results (default: beside the JSON),
    rows untouched; --note, when given, replaces the run's note."""
    from dnadiff.errors import DnadiffError

    result = common.read_results_json(args.from_json, "dhs_design")
    if not {"rows", "settings", "models", "oracles"} <= set(result):
        raise DnadiffError(f"--from-json {args.from_json}: not a dhs_design results JSON (no rows, settings, models "
                           "or oracles)")
    return common.rerender(args, result, markdown, plot)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        return common.main_plain(rerender, args, __file__, argv)
    return common.main_with_dry_run(run, args, __file__, argv, "dhs_design")


if __name__ == "__main__":
    sys.exit(main())
