"""The cpu-hour recipe: a Mamba AR and a Caduceus MDLM, each trained for at most 60 minutes of wall
clock on 2 CPU cores, against the best Markov chain on the human chr22 test split, paired per window.

    DNADIFF_DATA=/work/shared/data python pipelines/cpu_hour.py --scale cpu-hour          # ~2.5 h, 2 idle cores
    python pipelines/cpu_hour.py --scale cpu-hour --rows mamba_ar --minutes 30           # one row, half the budget
    python pipelines/cpu_hour.py --sweep mamba_ar --sweep-minutes 5                     # validation sweep (no test)
    # the cpu-hour MDLM trained one more hour from its weights (lr cosine to 0), K = 16 t-samples at eval
    python pipelines/cpu_hour.py --rows caduceus_mdlm_2h --threads 1 --t-samples 16 \
        --markov-dir runs/cpu_hour/markov_best/model --stem cpu_hour_2h
    # ... or 35 more minutes on windows of any N fraction (results/cpu_hour_nwin.md)
    python pipelines/cpu_hour.py --rows caduceus_mdlm_nwin --threads 1 --t-samples 16 \
        --markov-dir runs/cpu_hour/markov_best/model --stem cpu_hour_nwin
    # from scratch: MLM for a quarter of the hour, then MDLM from its weights, on windows of any N fraction
    python pipelines/cpu_hour.py --rows caduceus_mlm_mdlm --threads 1 --t-samples 16 \
        --markov-dir runs/cpu_hour/markov_best/model --stem cpu_hour_mlm_nwin
    # within one budget: the Mamba AR for half of it, then an MDLM adapted from it (Caduceus-PH that starts as the AR)
    python pipelines/cpu_hour.py --rows caduceus_mdlm_from_ar --threads 1 --t-samples 16 \
        --markov-dir runs/cpu_hour/markov_best/model --stem cpu_hour_from_ar
    # a DiT MDLM in the same budget (another bidirectional network); its width/lr sweep on valid first
    python pipelines/cpu_hour.py --sweep dit_mdlm --sweep-minutes 8 --threads 1
    # every row of these tables in one validation-curve PNG (results/cpu_hour_all_valid_curve.png), no training
    python pipelines/cpu_hour.py --replot cpu_hour,cpu_hour_2h,cpu_hour_nwin,cpu_hour_mlm_nwin
    python pipelines/cpu_hour.py --dry-run            # every row built, trained ~2 steps, scored, plotted (seconds)
    python pipelines/cpu_hour.py --dry-run --sweep caduceus_mdlm

Rows (configs shipped in dnadiff/configs/experiments/): `mamba_ar` = cpu_hour_mamba_ar.yaml (causal
Mamba d64 x 2, exact NLL; 128-bp windows, batch 64) and `caduceus_mdlm` = cpu_hour_caduceus_mdlm.yaml
(Caduceus-PS d64 x 2, MDLM from scratch, no time conditioning as in the MDLM paper's DNA models; its row
is the NELBO bound, eq. 10/11, with --t-samples K stratified times per window; 128-bp windows, batch 64), on the 21.6 Mb
chr22 subset, lr 3e-3 constant after 50 warm-up steps, EMA 0.999, train.max_minutes = 60 (Lightning's
Trainer max_time; the measured wall time of the whole training call is in the table). Opt-in row
`caduceus_mdlm_2h`: the cpu-hour MDLM's weights trained one more budget (fresh Adam, 50 warm-up steps, lr
cosine from 3e-3 to 0 over 3,600 steps, about what one budget reached the first time; two hours in all),
its curve drawn after its parent's; `caduceus_mdlm_nwin` likewise for at most 35 minutes on crops of any N
fraction (data.max_n_frac=1.0, as the evaluation tiles windows); `caduceus_mlm_mdlm` from scratch in one
budget: Caduceus MLM (objective.name=mlm: 15% masked, 80/10/10) for a quarter of it, then MDLM from those
weights (fresh Adam) for the rest, both on crops of any N fraction (its steps and wall time are both
stages'; its curve starts where the MLM stage ended); `caduceus_mdlm_from_ar` likewise with the cpu-hour
Mamba AR for half the budget, then MDLM with model.adapt_ar (a Caduceus-PH of the same size whose forward
scans are the AR's and whose reverse scans start switched off, reading token i at position i - 1 as the AR
does: dnadiff/backbones/ar_adapt.py; DiffuLLaMA / Dream) at lr 3e-4 for the other half. Each row is
paired with the Markov chain scored on that row's own test windows. The Markov row is the
order-k interpolated Kneser-Ney chain with k chosen on the valid split over 0..10
(experiments/tiny_dna_markov + the same data), fitted once (or reused with --markov-dir).

Splits: every setting is chosen on the valid split. Training logs validation bits/base every
train.val_every steps with its wall clock (val/wall_seconds in logs/metrics.csv) on the valid windows
the pipeline scores at the end (the same linspace subset: val_batches x batch_size windows); the
test split is read once per reported row, on --eval-windows windows evenly spread over it (the same
windows for every row). The comparison with the Markov row is the mean of the per-window paired
differences of bits/base (dnadiff/eval/paired.py) ± its standard error, and whether it exceeds
2 SE; not a difference of means.

How each setting was chosen (valid split only; `--sweep ROW` reruns a sweep): pipelines/cpu_hour_rows.py.

Writes results/cpu_hour.md and .json (command, wall time, machine load, every row's measured
training wall time and steps, valid and test bits/base, the paired comparison, the per-window test
scores) and results/cpu_hour_valid_curve.png (validation bits/base vs wall time for every row, the
Markov row as a horizontal line). Model directories stay under runs/cpu_hour/ (for
pipelines/sample_quality.py --cpu-hour-dir and the Genomic Benchmarks recipe).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import common
from cpu_hour_report import COLUMNS, compare, plot_curves, render, replot, table_rows
from cpu_hour_rows import DATA, DEFAULT_ROWS, DRY_RUN, MARKOV, ROWS, SCALES, SWEEP
from cpu_hour_runs import _score_loaded, fit_markov, read_curve, score, train_in_processes

REPO = Path(__file__).resolve().parent.parent


def row_config(key: str, out_dir: Path, data: list[str], minutes: float, extra: list[str], dry: bool,
               stage: str | None = None):
    """A row's run config; for a two-stage row (first_stage), stage "first" is its first stage (name
    KEY_SUFFIX, that share of the budget: MLM, or the AR to adapt) and the default its MDLM stage (the rest,
    from the first stage's weights, with the first stage's `then` settings)."""
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config

    row = ROWS[key]
    budget = row.get("minutes", minutes)
    name, over_stage, config = key, [], row["config"]
    first = row.get("first_stage")
    if first:
        first_dir = out_dir / f"{key}_{first['suffix']}"
        if stage == "first":
            name, budget, over_stage = first_dir.name, budget * first["share"], list(first["over"])
            config = first.get("config", config)
        else:
            budget = budget * (1 - first["share"])
            over_stage = [f"model.init_from={first_dir / 'model'}", *first.get("then", [])]
        over_stage += row["extra"]
    over = [f"name={name}", f"out_dir={out_dir}", *data, f"train.max_minutes={budget:g}", *over_stage]
    if row.get("continues"):
        over += [f"model.init_from={out_dir / row['continues'] / 'model'}", *row["extra"],
                 f"train.max_steps={row['continue_steps']}"]
    if dry:  # a row from other weights: their dry-run width (the scan choice is not saved with the weights)
        from_weights = row.get("continues") or (first and stage != "first")
        over += DRY_RUN["train"] + row.get("dry_model", [o for o in DRY_RUN["model"]
                                                         if not (from_weights and "scan" in o)])
    over += extra  # a sweep candidate's settings win (also in a dry run)
    return load_config(RunConfig, config, over)


def curve_of(key: str, cfg, run_dir: Path, before_stage: dict | None = None) -> tuple[list[dict], float]:
    """A row's validation curve and the wall seconds of its parent's training before it (0 unless continued).
    A continued row's curve starts with its parent's and its own points follow at the parent's last step and
    wall clock plus theirs (the plot shows the row's whole training). A two-stage row's MDLM points follow
    its MLM stage's steps and wall clock (that stage has no bits/base to draw; its time is in the row's)."""
    parent = ROWS[key].get("continues")
    before = read_curve(Path(cfg.out_dir) / parent) if parent else []
    last = before[-1] if before else (before_stage or {"step": 0, "wall_seconds": 0.0})
    own = [{**p, "step": p["step"] + last["step"], "wall_seconds": p["wall_seconds"] + last["wall_seconds"]}
           for p in read_curve(run_dir)]
    return before + own, (before[-1]["wall_seconds"] if before else 0.0)


def train_row(key: str, cfg, valid_windows: int, t_samples: int, echo, mlm_cfg=None) -> dict:
    """Train a row (a two-stage row: its first stage mlm_cfg, then cfg from its weights) and score it on valid;
    the table's wall time and steps are both stages'."""
    from dnadiff.training import train

    stage = None
    t0 = time.time()
    if mlm_cfg is not None:
        res = train(mlm_cfg, overwrite=True)
        stage = {"step": res.metrics["steps"], "wall_seconds": round(time.time() - t0, 1),
                 "model_dir": str(res.model_dir), "max_minutes": mlm_cfg.train.max_minutes}
        echo(f"{key}: first stage ({mlm_cfg.objective.name}) {stage['step']} steps in "
             f"{stage['wall_seconds'] / 60:.1f} min")
    res = train(cfg, overwrite=True)
    wall = time.time() - t0
    valid = score(res.model_dir, "valid", valid_windows, t_samples)
    curve, wall_before = curve_of(key, cfg, res.run_dir, stage)
    out = {"key": key, "model_dir": str(res.model_dir), "valid_windows": valid_windows,
           "train_wall_seconds": round(wall, 1),
           "steps": res.metrics["steps"] + (stage["step"] if stage else 0), "parameters": res.metrics["parameters"],
           "valid_bits": valid["bits_per_token"], "valid_bits_se": valid["bits_std_error"],
           "curve": curve, "wall_before_seconds": wall_before,
           "config": {"max_minutes": cfg.train.max_minutes, "seq_len": cfg.data.seq_len}}
    if stage:
        out["first_stage"] = stage
    echo(f"{key}: {out['steps']} steps in {wall / 60:.1f} min, valid {out['valid_bits']:.4f} bits/base")
    return out


def score_markov(mdir: str, rows: list[dict], keys: list[str], out_dir: Path, data: list[str], minutes: float,
                 eval_windows: int, dry: bool) -> list[dict]:
    """The Markov model scored on the test and valid windows of every window length the rows use."""
    from dnadiff.checkpoint import load
    from dnadiff.config import replace

    meta = json.loads((Path(mdir) / "metrics.json").read_text())
    lengths = list(dict.fromkeys(r["config"]["seq_len"] for r in rows))
    out = []
    for seq_len in lengths:
        key = next(k for k, r in zip(keys, rows) if r["config"]["seq_len"] == seq_len)
        cfg = row_config(key, out_dir, data, minutes, [], dry)
        model = load(mdir)  # scores the rows' windows: their seq_len and data files
        model.config = replace(model.config, **{"data.seq_len": seq_len, "data.fasta": cfg.data.fasta,
                                                "data.bed": cfg.data.bed, "data.root": cfg.data.root})
        valid_n = next(r["valid_windows"] for r in rows if r["config"]["seq_len"] == seq_len)
        out.append({"row": MARKOV["row"] + (f" (L={seq_len})" if len(lengths) > 1 else ""), "kind": MARKOV["kind"],
                    "model_dir": mdir, "steps": "counts", "order": meta.get("order"),
                    "parameters": meta.get("parameters"), "seq_len": seq_len,
                    "test": _score_loaded(model, "test", eval_windows),
                    "valid_bits": _score_loaded(model, "valid", valid_n)["bits_per_token"]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_options(ap, scales=SCALES, default_scale="cpu-hour", threads=None,
                              threads_help="train.threads of every row (default: the config's 2)",
                              results_help="table folder (default results/)",
                              dry_run_help="tiny data, ~2 steps per row, outputs in a temp folder")
    ap.add_argument("--rows", default=",".join(DEFAULT_ROWS),
                    help=f"comma-separated rows ({', '.join(ROWS)}; default {','.join(DEFAULT_ROWS)})")
    ap.add_argument("--minutes", type=float, default=None, help="wall-clock budget per row (default 60)")
    ap.add_argument("--cpu-clock", action="store_true",
                    help="--minutes are CPU minutes of each row's process (train.budget_clock=cpu), not wall: rows "
                         "sharing the cores with other jobs keep the same budget")
    ap.add_argument("--eval-windows", type=int, default=None, help="test windows (default 2000; 0 = all)")
    ap.add_argument("--t-samples", type=int, default=None,
                    help="stratified t-samples per window for the MDLM bound at eval (default 4)")
    ap.add_argument("--shared", default=os.environ.get("DNADIFF_DATA") or str(REPO.parent / "shared" / "data"))
    ap.add_argument("--markov-dir", default=None, help="a fitted Markov model directory to reuse (else fitted)")
    ap.add_argument("--markov-max-order", type=int, default=10, help="the Markov row's k is chosen in 0..this")
    ap.add_argument("--no-markov", action="store_true", help="no Markov row (no paired comparison)")
    ap.add_argument("--out-dir", default=None, help="run folders (default runs/cpu_hour)")
    ap.add_argument("--stem", default=None, help="table file names (default cpu_hour, or cpu_hour_sweep_ROW)")
    ap.add_argument("--sweep", default=None, metavar="ROW", help="validation sweep of ROW's SWEEP candidates")
    ap.add_argument("--sweep-minutes", type=float, default=5.0, help="minutes per sweep candidate")
    ap.add_argument("--jobs", type=int, default=1,
                    help="rows trained at once, each in its own process (its threads: --threads, default 2 // jobs)")
    ap.add_argument("--train-only", action="store_true", help=argparse.SUPPRESS)  # a --jobs worker: train, write, exit
    ap.add_argument("--replot", default=None, metavar="STEM,...",
                    help="no training: draw the rows of earlier tables (--results/STEM.json) in one validation-curve "
                         "PNG, --results/{--stem}_valid_curve.png (default stem cpu_hour_all)")
    args = ap.parse_args(argv)
    return common.main_with_dry_run(run, args, __file__, argv, "cpu_hour")

def check_args(args) -> list[str]:
    """The rows asked for, after checking the options a run would trip over late."""
    from dnadiff.errors import DnadiffError

    keys = [k for k in args.rows.split(",") if k]
    unknown = sorted(set(keys) - set(ROWS))
    if unknown or not keys:
        raise DnadiffError(f"--rows: unknown row(s) {', '.join(unknown) or '(none)'}; rows: {', '.join(ROWS)}")
    if args.sweep and args.sweep not in SWEEP:
        raise DnadiffError(f"--sweep: unknown row {args.sweep!r}; rows: {', '.join(SWEEP)}")
    for name in ("minutes", "sweep_minutes"):
        v = getattr(args, name)
        if v is not None and not v > 0:
            raise DnadiffError(f"--{name.replace('_', '-')} {v:g}: must be a positive number of minutes")
    if args.jobs < 1 or (args.threads is not None and args.threads < 1):
        raise DnadiffError(f"--jobs {args.jobs} / --threads {args.threads}: must be >= 1")
    if args.t_samples is not None and args.t_samples < 1:
        raise DnadiffError(f"--t-samples {args.t_samples}: must be >= 1")
    for key in keys:  # a continued row starts from its parent's model: trained earlier, or earlier in this run
        parent = ROWS[key].get("continues")
        if parent and parent in keys and (args.jobs > 1 or keys.index(parent) > keys.index(key)):
            raise DnadiffError(f"--rows: {key} continues {parent}: list {parent} first, with --jobs 1")
        if parent and parent not in keys and not args.dry_run:
            out_dir = runs_dir(args, None)
            if not (out_dir / parent / "model").is_dir():
                raise DnadiffError(f"--rows: {key} continues {parent}, but {out_dir / parent / 'model'} is not a "
                                   f"model directory (train {parent} first, or give --out-dir)")
    if args.markov_dir and not Path(args.markov_dir).is_dir():
        raise DnadiffError(f"--markov-dir {args.markov_dir}: not a model directory")
    return keys


def runs_dir(args, dry: Path | None) -> Path:
    """The rows' run folders: --out-dir, a dry run's temporary folder, or runs/cpu_hour[_sweep_ROW]."""
    if args.out_dir:
        return Path(args.out_dir)
    return dry / "runs" if dry else REPO / "runs" / (f"cpu_hour_sweep_{args.sweep}" if args.sweep else "cpu_hour")


def run_settings(args, dry: Path | None) -> dict:
    """Budget, test windows, t-samples, data and the Markov row's largest k: the scale's, the options',
    or --dry-run's tiny ones."""
    from dnadiff.errors import DnadiffError

    scale = SCALES[args.scale]
    s = {"minutes": args.minutes or scale["minutes"],
         "eval_windows": scale["eval_windows"] if args.eval_windows is None else args.eval_windows,
         "t_samples": args.t_samples or scale["t_samples"], "data": [d.format(shared=args.shared) for d in DATA],
         "max_order": args.markov_max_order}
    if not 0 <= s["max_order"] <= 12:
        raise DnadiffError(f"--markov-max-order {s['max_order']}: must be in 0..12")
    if dry is not None:
        s.update(data=DRY_RUN["data"], minutes=DRY_RUN["minutes"], eval_windows=DRY_RUN["eval_windows"],
                 t_samples=DRY_RUN["t_samples"], max_order=DRY_RUN["markov_max_order"])
    elif not (Path(args.shared) / "hg19_chr22_subset").is_dir():
        raise DnadiffError(f"--shared {args.shared}: no hg19_chr22_subset folder (set DNADIFF_DATA)")
    return s


def run_sweep(args, s: dict, out_dir: Path, dry: bool, echo) -> dict:
    """--sweep ROW: every candidate trained and scored on the valid windows (the test split is not read)."""
    key = args.sweep
    minutes = DRY_RUN["minutes"] if dry else args.sweep_minutes
    rows = []
    threads = [f"train.threads={args.threads}"] if args.threads else []
    for name, extra in SWEEP[key].items():
        cfg = row_config(key, out_dir / name, s["data"], minutes, threads + extra, dry)
        r = train_row(key, cfg, cfg.train.val_batches * cfg.train.batch_size, s["t_samples"], echo)
        r.update(row=f"{key} {name}", kind=ROWS[key]["kind"], overrides=extra)
        rows.append(r)
    table = [{"candidate": r["row"], "overrides": " ".join(r["overrides"]) or "(the shipped config)",
              "valid bits/base": f"{r['valid_bits']:.4f} ± {r['valid_bits_se']:.4f}", "steps": r["steps"],
              "params": r["parameters"], "train wall": f"{r['train_wall_seconds'] / 60:.1f} min"} for r in rows]
    settings = (f"validation sweep of {key}: {minutes:g} min per candidate, scored on the valid windows the "
                "training validated on (the test split is not read)")
    return {"rows": rows, "table": table, "columns": list(table[0]), "settings": settings, "markov_valid": []}


def run_rows(args, keys: list[str], s: dict, out_dir: Path, dry: bool, echo) -> dict | None:
    """The rows trained (here, or by --jobs processes) and scored once on the test windows, then the
    Markov row scored on the very same windows; None for a --train-only worker (its rows are written)."""
    from dnadiff.utils import write_json

    minutes, eval_windows, t_samples = s["minutes"], s["eval_windows"], s["t_samples"]
    rows = []
    threads = args.threads or (max(1, 2 // args.jobs) if args.jobs > 1 else None)
    extra = ([f"train.threads={threads}"] if threads else []) + (["train.budget_clock=cpu"] if args.cpu_clock else [])
    trained = train_in_processes(keys, args, out_dir, minutes, threads, echo) if args.jobs > 1 else {}
    for key in keys:
        if key in trained:
            r = trained[key]
        else:
            cfg = row_config(key, out_dir, s["data"], minutes, extra, dry)
            mlm_cfg = row_config(key, out_dir, s["data"], minutes, extra, dry, "first") if ROWS[key].get(
                "first_stage") else None
            r = train_row(key, cfg, cfg.train.val_batches * cfg.train.batch_size, t_samples, echo, mlm_cfg)
        if args.train_only:
            write_json(out_dir / f"{key}.train_row.json", r)
            continue
        r.update(row=ROWS[key]["row"], kind=ROWS[key]["kind"])
        r["test"] = score(r["model_dir"], "test", eval_windows, t_samples)  # the test split: once per row
        echo(f"{key}: test {r['test']['bits_per_token']:.4f} bits/base")
        rows.append(r)
    if args.train_only:
        return None
    settings = ("; ".join(f"{k}: {ROWS[k].get('minutes', minutes):g} min" for k in keys)
                + (" CPU" if args.cpu_clock else " wall-clock") + " budget (train.max_minutes"
                + (", train.budget_clock=cpu" if args.cpu_clock else "")
                + ("; a continued row's is on top of its parent's" if any(ROWS[k].get("continues") for k in keys)
                   else "") + ")"
                + (f", {args.jobs} rows trained at once with {threads} thread(s) each" if args.jobs > 1 else "")
                + f"; test split, "
                f"{eval_windows or 'all'} windows evenly spread (the same for every row); MDLM bound with "
                f"{t_samples} stratified t-samples per window; ± is the standard error over windows")
    markov: list[dict] = []  # one per window length of the rows: it scores their very windows
    if not args.no_markov:
        mdir = fit_markov(out_dir, s["data"], s["max_order"], args.markov_dir, echo)
        markov = score_markov(mdir, rows, keys, out_dir, s["data"], minutes, eval_windows, dry)
    versus = compare(rows, markov) if markov else []  # first: it adds each row's "paired" that the table shows
    return {"rows": rows, "table": table_rows(rows, markov), "columns": COLUMNS, "settings": settings,
            "markov_valid": [(m["row"], m["valid_bits"]) for m in markov], "markov": markov, "versus": versus}


def run(args, command: str, dry: Path | None) -> int:
    from dnadiff.utils import format_table

    results = common.results_stem(args, "", dry)  # --results here is a folder
    if args.replot:
        replot([t for t in args.replot.split(",") if t], results, args.stem or "cpu_hour_all")
        return 0
    keys = check_args(args)
    s = run_settings(args, dry)
    stem = args.stem or (f"cpu_hour_sweep_{args.sweep}" if args.sweep else "cpu_hour")
    out_dir = runs_dir(args, dry)
    results.mkdir(parents=True, exist_ok=True)
    start = time.time()

    def echo(msg: str) -> None:
        print(f"[{time.time() - start:7.0f}s] {msg}", flush=True)

    if args.sweep:  # candidates of one row, valid windows only (the test split is not read)
        done = run_sweep(args, s, out_dir, dry is not None, echo)
    else:
        done = run_rows(args, keys, s, out_dir, dry is not None, echo)
        if done is None:
            return 0
    wall = time.time() - start
    png = results / f"{stem}_valid_curve.png"
    plot_curves(done["rows"], done["markov_valid"], png,
                f"{'sweep ' + args.sweep if args.sweep else 'cpu-hour rows'}: validation")
    summary = {"title": ("Validation sweep, " + args.sweep) if args.sweep else "cpu-hour recipe vs the Markov chain "
               "(human chr22, paired per window)", "command": command, "wall_seconds": round(wall, 1),
               **common.stamp("load_average_at_end"), "data": s["data"],
               "settings": done["settings"], "table": done["table"], "columns": done["columns"],
               "plot": os.path.relpath(png, results), "versus_markov": [] if args.sweep else done["versus"],
               "rows": done["rows"]}
    if not args.sweep:
        summary["markov"] = done["markov"]
    common.write_results(results / stem, summary, render(summary))
    print(format_table(done["table"], done["columns"]))
    print("\n".join(summary["versus_markov"]))
    print(f"\nwrote {results / stem}.md (.json, _valid_curve.png) in {wall / 60:.1f} min"
          + (" (dry run: a temporary folder)" if dry else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
