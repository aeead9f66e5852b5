"""Paper tab. 6: test-split perplexity of DNA models, one backbone family per row, same data/budget.

Rows (each over >= 3 seeds: mean, and range = max − min over seeds, the paper's "±"):
    Caduceus  MLM-pretrained -> fine-tuned with mdlm | sedd | d3pm (discrete T)   (bounds)
    Caduceus  MLM-pretrained (its masked-token CE, for reference; not a likelihood)
    Mamba     AR from scratch                                                       (exact)
    HyenaDNA  AR from scratch (causal)                                              (exact)
    HyenaDNA  bidirectional, mdlm from scratch                                      (bound)
    Plaid     a DiT on learned embeddings, from scratch (Gaussian diffusion, learned schedule)  (bound)
AR rows get the whole budget (pretrain + fine-tune steps) so every row sees the same tokens.
Classical baselines (pipelines/perplexity_baselines.py): order-k Markov chains (interpolated
Kneser-Ney) for k = 0, 3, 5, 8 and the k chosen on the valid split, fitted on the same train split
and scored on the same test windows; every neural row is compared with the best-k row.

    python pipelines/dna_perplexity.py --scale cpu      # ~40-60 min on 2 CPU cores, shared chr22 subset
    python pipelines/dna_perplexity.py --scale paper    # HG38, dna-467k models, L = 1024 (GPU cluster)
    python pipelines/dna_perplexity.py --scale paper --dry-run   # every row: config, model, one step (seconds)
    python pipelines/dna_perplexity.py --from-json results/dna_perplexity_cpu.json   # re-render the table
    python pipelines/dna_perplexity.py --scale cpu --only-baselines    # (re)fit the Markov rows only
    python pipelines/dna_perplexity.py --scale cpu --budget-minutes 60 --seeds 1 --only caduceus_mdlm,mamba_ar
        # a wall-clock budget split over the training runs (paper sizes and 1024-bp windows from 60 min)

`--dry-run` builds every row's config and model at the scale's sizes (paper presets included) and
runs one training step and a 2-window evaluation on the sample genome bundled in the package
(32-bp windows, batch 2, one seed, no ../shared/data), in a temporary folder, and fits the Markov
rows on the same sample (orders up to 3); it writes no table. `--from-json` rewrites the .md/.json
table (and the comparison with the best Markov row) from the per-seed values a finished run stored,
without training. `--only-baselines` fits only the Markov rows and merges them into the neural rows
of the stored results JSON (same data settings required).

Writes results/dna_perplexity_{scale}.md and .json (with --budget-minutes N:
dna_perplexity_cpu_budgetNmin.*; command, wall time, machine, load average) and keeps every model
directory under runs/dna_perplexity_{scale}/ (the Genomic Benchmarks pipeline can use them).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import common
import perplexity_baselines as baselines  # the Markov rows
from dna_perplexity_report import COLUMNS, print_dry_run, summarize_rows, versus_markov, write_outputs
from dna_perplexity_rows import CPU_PAPER_SIZES, DRY_RUN, SCALES, row_specs

from dnadiff.machine import describe_machine, load_average

REPO = Path(__file__).resolve().parent.parent


# the Plaid row's DiT (time-conditioned: Plaid's network reads the noise level) at each size


# --dry-run: the scale's rows unchanged except data size and steps (the genome sample bundled in the package)
# cpu scale, --sizes paper (default from --budget-minutes 60): the paper's ~470K models at CPU settings


def all_specs(settings: dict) -> list[dict]:
    markov_specs = baselines.markov_specs

    return row_specs(settings) + markov_specs()


def rerender(path: str, results_dir: str | None, shared: str, command: str) -> int:
    """Rebuild the table of a finished run from the per-seed values its JSON stores (no training)."""
    from dnadiff.errors import DnadiffError
    from dnadiff.utils import format_table

    try:
        summary = json.loads(Path(path).read_text())
        settings, runs = summary["settings"], summary["runs"]
        specs = [s for s in all_specs(settings) if s["key"] in runs]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DnadiffError(f"--from-json {path}: not a dna_perplexity results JSON ({exc})") from None
    summary["rows"] = summarize_rows(specs, runs, budget=bool(summary.get("budget_seconds_per_run")))
    neural = [v for k, v in runs.items() if not k.startswith("markov")]
    summary.setdefault("seeds", max((len(v) for v in neural), default=0))
    summary["table_rendered_by"] = command
    out_dir = results_dir or str(Path(path).parent)
    summary["stem"] = Path(path).stem  # rewritten in place (or under --results)
    summary["versus_markov"] = versus_markov(summary["rows"], runs, summary["scale"], settings["data"], out_dir,
                                             own_json=Path(path))
    data = summary.get("data") or [d.format(shared=shared) for d in settings["data"]]
    write_outputs(summary, out_dir, data)
    print(format_table(summary["rows"], COLUMNS))
    print("\n".join(summary["versus_markov"]))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Paper tab. 6: DNA perplexity of AR vs diffusion models")
    ap.add_argument("--scale", choices=sorted(SCALES), default="cpu")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 3)")
    ap.add_argument("--shared", default=os.environ.get("DNADIFF_DATA") or str(REPO.parent / "shared" / "data"),
                    help="the project's data folder (default: $DNADIFF_DATA, else ../shared/data)")
    ap.add_argument("--out-dir", default=None, help="where runs go (default runs/dna_perplexity_SCALE)")
    ap.add_argument("--results", default=None, help="where the table goes (default results/)")
    ap.add_argument("--only", default=None,
                    help="comma-separated neural row keys to run, plus the rows they are initialised from (the Markov "
                         "rows are fitted unless --no-markov)")
    ap.add_argument("--dry-run", action="store_true",
                    help="build every row's config and model and run one step on the bundled sample genome")
    ap.add_argument("--from-json", default=None, metavar="JSON",
                    help="re-render the table from a finished run's JSON (per-seed values), no training")
    ap.add_argument("--no-markov", action="store_true", help="skip the Markov baseline rows")
    ap.add_argument("--only-baselines", action="store_true",
                    help="fit and score only the Markov rows; keep the neural rows of the existing results JSON")
    ap.add_argument("--add-rows", action="store_true",
                    help="train only the --only rows (and refit the Markov rows), keep the other neural rows of the "
                         "existing results JSON: a row added to a finished table")
    ap.add_argument("--budget-minutes", type=float, default=None,
                    help="cpu scale: neural training wall clock in minutes, split over the runs by step share "
                         "(each run stops on time, not steps); from 60 min the defaults become --sizes paper "
                         "--seq-len 1024")
    ap.add_argument("--sizes", choices=["tiny", "paper"], default=None,
                    help="cpu scale: tiny presets, or the paper's ~470K models (Caduceus-PS dna-467k, Mamba "
                         "d128 x 4 = 468,608 parameters, HyenaDNA tiny-1k)")
    ap.add_argument("--seq-len", type=int, default=None, help="cpu scale: window length (default 128)")
    args = ap.parse_args(argv)
    command = common.command_line(__file__, argv)
    from dnadiff.errors import DnadiffError

    try:
        if args.from_json:
            return rerender(args.from_json, args.results, args.shared, command)
        return run(args, command)
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def scale_settings(args) -> dict:
    """The scale's settings with --budget-minutes / --sizes / --seq-len applied (cpu scale only)."""
    from dnadiff.errors import DnadiffError

    scale = dict(SCALES[args.scale])
    if args.scale != "cpu" and (args.budget_minutes is not None or args.sizes or args.seq_len):
        raise DnadiffError("--budget-minutes, --sizes and --seq-len need --scale cpu")
    if args.budget_minutes is not None and not args.budget_minutes > 0:
        raise DnadiffError(f"--budget-minutes {args.budget_minutes:g}: must be a positive number of minutes")
    if args.seq_len is not None and args.seq_len <= 0:
        raise DnadiffError(f"--seq-len {args.seq_len}: must be positive")
    big = args.budget_minutes is not None and args.budget_minutes >= 60
    if (args.sizes or ("paper" if big else "tiny")) == "paper" and args.scale == "cpu":
        scale["presets"] = dict(CPU_PAPER_SIZES)
    seq_len = args.seq_len or (1024 if big else None)
    if seq_len:
        scale["data"] = [d for d in scale["data"] if not d.startswith("data.seq_len=")] + [f"data.seq_len={seq_len}"]
    return scale


@dataclasses.dataclass
class Plan:
    """What a run trains and where it writes, from the command line (validated)."""

    scale: dict
    seeds: int
    eval_windows: int
    data: list[str]
    markov_orders: tuple
    markov_max: int
    stem: str
    out_dir: Path
    results_dir: str
    tmp: object = None  # the --dry-run folder (a TemporaryDirectory) when --out-dir is not given


def plan_run(args) -> Plan:
    """The run's settings: the scale's, --dry-run's tiny data and one step, the output locations."""
    import tempfile

    from dnadiff.errors import DnadiffError

    if args.dry_run and (args.only_baselines or args.budget_minutes is not None):
        raise DnadiffError("--dry-run does not combine with --only-baselines or --budget-minutes")
    if args.only_baselines and args.no_markov:
        raise DnadiffError("--only-baselines fits the Markov rows: it does not combine with --no-markov")
    if args.add_rows and (not args.only or args.only_baselines or args.dry_run or args.no_markov):
        raise DnadiffError("--add-rows needs --only ROWS (the rows to add) and refits the Markov rows: it does not "
                           "combine with --only-baselines, --dry-run or --no-markov")
    scale = scale_settings(args)
    seeds = args.seeds or scale["seeds"]
    eval_windows = scale["eval_windows"]
    data = [d.format(shared=args.shared) for d in scale["data"]]
    markov_orders, markov_max = baselines.MARKOV_ORDERS, baselines.MAX_ORDER
    tmp = None
    if args.dry_run:  # same rows, presets and recipe; tiny data and one step
        seeds, eval_windows = 1, DRY_RUN["eval_windows"]
        markov_orders, markov_max = DRY_RUN["markov_orders"], DRY_RUN["markov_max_order"]
        keys = {o.split("=")[0] for o in DRY_RUN["data"]}
        data = [d for d in data if d.split("=")[0] not in keys] + DRY_RUN["data"]
        if not args.out_dir:
            tmp = tempfile.TemporaryDirectory(prefix="dna_perplexity_dry_run_")
    # a budget run is its own experiment: its table does not replace the step-budget one
    stem = f"dna_perplexity_{args.scale}" + (f"_budget{args.budget_minutes:g}min" if args.budget_minutes else "")
    out_dir = Path(args.out_dir or (tmp.name if tmp else REPO / "runs" / stem))
    return Plan(scale=scale, seeds=seeds, eval_windows=eval_windows, data=data, markov_orders=markov_orders,
                markov_max=markov_max, stem=stem, out_dir=out_dir, results_dir=args.results or str(REPO / "results"),
                tmp=tmp)


def select_rows(specs: list[dict], only: str | None) -> list[dict]:
    """--only: the rows asked for and the rows they are initialised from."""
    from dnadiff.errors import DnadiffError

    if not only:
        return specs
    keep = set(only.split(","))
    unknown = keep - {s["key"] for s in specs}
    if unknown:
        raise DnadiffError(f"--only: unknown row key(s) {', '.join(sorted(unknown))}; "
                           f"rows: {', '.join(s['key'] for s in specs)}")
    keep |= {s["init"] for s in specs if s["key"] in keep and s.get("init")}
    return [s for s in specs if s["key"] in keep]


def load_prior(results_json: Path, scale: dict, option: str) -> tuple[dict, dict[str, list[dict]]]:
    """--only-baselines / --add-rows: the earlier run's JSON and its neural rows (made with the same data
    settings)."""
    from dnadiff.errors import DnadiffError

    if not results_json.is_file():
        raise DnadiffError(f"{option}: {results_json} not found (run the pipeline once first)")
    try:
        prior = json.loads(results_json.read_text())
        prior_data, prior_runs = prior["settings"]["data"], prior["runs"]
    except (ValueError, KeyError, TypeError):
        raise DnadiffError(f"{option}: {results_json} is not a dna_perplexity results JSON") from None
    if prior_data != scale["data"]:
        raise DnadiffError(f"{option}: {results_json} was made with other data settings "
                           f"({', '.join(prior_data)})")
    return prior, {k: v for k, v in prior_runs.items() if not k.startswith("markov")}


def make_evaluator(eval_windows: int):
    """evaluate_dir(model_dir, seed): a model's test-split perplexity on `eval_windows` evenly spread
    windows (all when 0); the Markov rows are scored by it too."""
    import numpy as np
    import torch

    from dnadiff.checkpoint import load
    from dnadiff.data import build_split_dataset
    from dnadiff.eval import evaluate_model

    def evaluate_dir(model_dir, seed: int) -> dict:
        model = load(model_dir)
        test = build_split_dataset(model.config, model.tokenizer, "test")
        if eval_windows and len(test) > eval_windows:
            idx = np.linspace(0, len(test) - 1, eval_windows).round().astype(int)
            test = torch.utils.data.Subset(test, sorted(set(int(i) for i in idx)))
        ev = evaluate_model(model, test, batch_size=64, seed=1000 + seed, progress=False)
        return {"seed": seed, "perplexity": ev["perplexity"], "bits_per_base": ev["bits_per_token"],
                "std_error_bits": ev["bits_std_error"], "bases": ev["num_tokens"]}

    return evaluate_dir


def row_overrides(spec: dict, seed: int, plan: Plan, dry_run: bool, budget: dict) -> list[str]:
    """The config overrides of one neural row's run at one seed."""
    out_dir = plan.out_dir
    overrides = [f"name={spec['key']}_seed{seed}", f"out_dir={out_dir}", f"train.seed={seed}",
                 f"train.max_steps={spec['steps']}", f"model.backbone={spec['backbone']}",
                 f"objective.name={spec['objective']}", *plan.data, *plan.scale["train"], *spec.get("extra", [])]
    if spec.get("preset"):
        overrides.append(f"model.preset={spec['preset']}")
    if spec.get("T"):
        overrides.append(f"objective.T={spec['T']}")
    if spec.get("init"):
        overrides.append(f"model.init_from={out_dir / (spec['init'] + f'_seed{seed}') / 'model'}")
    if dry_run:
        overrides += DRY_RUN["train"]
    if budget:  # time, not steps, ends the run
        overrides.append("train.max_steps=1000000")
    return overrides


def train_row(spec: dict, seed: int, overrides: list[str], budget: dict, evaluate_dir, start: float) -> dict:
    """Train one row at one seed, score it on the test windows and print its line."""
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.training import train

    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", overrides)
    t0 = time.time()
    callbacks = [baselines.timer_callback(budget[spec["key"]])] if budget else None
    res = train(cfg, overwrite=True, callbacks=callbacks)
    train_s = time.time() - t0
    row = evaluate_dir(res.model_dir, seed)
    row.update(train_seconds=round(train_s, 1), parameters=res.metrics["parameters"],
               steps_done=res.metrics["steps"], model_dir=str(res.model_dir))
    print(f"[{time.time() - start:7.0f}s] {spec['row']:<34} seed {seed}: ppl {row['perplexity']:.4f} "
          f"({row['bits_per_base']:.4f} bits/base, train {train_s:.0f}s, {row['steps_done']} steps)", flush=True)
    return row


def run(args, command: str) -> int:
    from dnadiff.utils import format_table

    plan = plan_run(args)
    specs = select_rows(row_specs(plan.scale), args.only)
    results: dict[str, list[dict]] = {}
    prior = None
    results_json = Path(plan.results_dir) / f"{plan.stem}.json"
    to_train = specs
    if args.only_baselines or args.add_rows:  # the neural rows as the earlier run measured them
        prior, results = load_prior(results_json, plan.scale, "--add-rows" if args.add_rows else "--only-baselines")
        to_train = specs if args.add_rows else []
        results = {k: v for k, v in results.items() if k not in {s["key"] for s in to_train}}
        specs = [s for s in row_specs(plan.scale) if s["key"] in results or s in to_train]
    budget = baselines.budget_seconds(to_train, args.budget_minutes, plan.seeds) if args.budget_minutes else {}
    start = time.time()
    evaluate_dir = make_evaluator(plan.eval_windows)
    for seed in range(plan.seeds if to_train else 0):
        for spec in to_train:
            overrides = row_overrides(spec, seed, plan, args.dry_run, budget)
            results.setdefault(spec["key"], []).append(train_row(spec, seed, overrides, budget, evaluate_dir, start))
    if not args.no_markov:  # the classical rows: same data settings, same test windows and scorer
        specs = specs + baselines.markov_specs(plan.markov_orders, plan.markov_max)
        results.update(baselines.run_markov_rows(
            plan.data, plan.out_dir, evaluate_dir, orders=plan.markov_orders, max_order=plan.markov_max,
            echo=lambda m: print(f"[{time.time() - start:7.0f}s] {m}", flush=True)))
    wall = time.time() - start
    table = summarize_rows(specs, results, budget=bool(budget))
    if args.dry_run:
        print_dry_run(args.scale, table, results, wall)
        if plan.tmp:
            plan.tmp.cleanup()
        return 0
    versus = versus_markov(table, results, args.scale, plan.scale["data"], plan.results_dir, own_json=results_json)
    summary = run_summary(args, command, plan, wall, table, results, versus, budget, prior,
                          [s["row"] for s in to_train] if prior else [])
    write_outputs(summary, plan.results_dir, plan.data)
    print(format_table(table, COLUMNS))
    print("\n".join(versus))
    print(f"\nwrote {plan.results_dir}/{plan.stem}.md (.json); {wall / 60:.1f} min")
    return 0


def run_summary(args, command: str, plan: Plan, wall: float, table: list[dict], results: dict[str, list[dict]],
                versus: list[str], budget: dict, prior: dict | None, added: list[str]) -> dict:
    """What results/STEM.json holds: command, machine, settings, rows, per-seed runs, the comparison; with a
    `prior` (--only-baselines, --add-rows) where its neural rows came from, and the rows `added` by this run."""
    scale = plan.scale
    seeds = plan.seeds if prior is None else max((len(v) for v in results.values()), default=0)
    summary = {"command": command, "wall_seconds": round(wall, 1), "machine": describe_machine(), "scale": args.scale,
               "settings": {k: v for k, v in scale.items() if k != "presets"} | {"presets": scale["presets"]},
               "data": plan.data, "seeds": seeds, "rows": table, "runs": results,
               "load_average_at_end": load_average(), "versus_markov": versus,
               "budget_minutes": args.budget_minutes, "budget_seconds_per_run": budget, "stem": plan.stem}
    if prior:  # an earlier merge's provenance is kept: the table's rows came from these runs
        summary["neural_rows_from"] = prior.get("neural_rows_from") or {
            k: prior.get(k) for k in ("command", "wall_seconds", "machine")}
        for key in ("regenerated_rows", "added_rows"):
            if prior.get(key):
                summary[key] = prior[key]
        if added:
            summary["added_rows"] = [*summary.get("added_rows", []), {
                "rows": added, "command": command, "wall_seconds": round(wall, 1), "machine": describe_machine(),
                "load_average_at_end": load_average()}]
    return summary


if __name__ == "__main__":
    sys.exit(main())
