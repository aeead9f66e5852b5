"""One sample-quality table: real held-out DNA, Markov chains, Mamba AR and MDLM samplers, every metric
`dnadiff metrics` reports, mean ± range over seeds.

    DNADIFF_DATA=/work/shared/data python pipelines/sample_quality.py --scale cpu --models-dir runs/sample_models
    python pipelines/sample_quality.py --scale cpu --quick     # tiny sizes on the bundled chr22 sample (minutes)
    python pipelines/sample_quality.py --scale cpu --dry-run   # every row sampled and scored once, tiny (seconds)

Rows (each: --seeds draws of --num sequences of --length bases; default 3 x 64 x 1,024 bp):
  real test windows          the floor: held-out real DNA (test split) scored like samples
  real train windows         the training split scored the same way: what the models were fitted to
  Markov k=5, Markov best k  order-k interpolated Kneser-Ney chains fitted on the train split (best k on valid)
  Mamba AR                   ancestral AR sampling (temperature 1)
  MDLM ancestral / cached / first-hitting / ReMDM   one MDLM, four samplers (--steps network steps;
                             first-hitting makes one call per token); semi-AR (trained window): windows of
                             the model's training length, stride half a window, --steps per window (issue
                             33's fix for sampling past the trained length); RC-symmetric: ancestral with the
                             strand-averaged denoiser (for a Caduceus-PS model, RC-equivariant, it
                             changes nothing by construction: a check); semi-AR left-to-right [+ RC-symmetric]:
                             the same windows, each window's new bases decoded left to right (sampler
                             `ordered`, one call per base) [with the strand-averaged denoiser] [+ quarter
                             stride: three quarters of each window as context]
  cpu-hour Mamba AR / MDLM   the models of pipelines/cpu_hour.py when --cpu-hour-dir (default
                             runs/cpu_hour) holds them
Reference: windows of the valid split (at most --reference-windows, evenly spread), the same for
every row; so the first row compares test with valid windows (real vs real).
Columns: every row `dnadiff metrics` prints (dnadiff.eval.dna_metrics.summary_rows: k-mer JS per k,
3-mer Pearson, GC mean/W1/KS, k-mer entropy, Markov-5 perplexity, memorisation, JASPAR motif hit
rate/Spearman/JS, ...), read generically so metrics added there become columns here, plus the
oracle perplexity of the samples under the best-k Markov chain fitted on the train split (exact NLL;
`dnadiff metrics --oracle`), and with --embedder DIR the in-house Fréchet distance of DIR's pooled
features (a fine-tuned classifier). Each cell: mean ± range (max − min) over the seeds.

The first-hitting row makes one network call per token (1,024 per sequence): its seeds can be sampled
beside the pipeline, one process per core, into the work folder, and --resume then scores them:
    dnadiff sample MDLM_DIR -n 64 --length 1024 --sampler first_hitting --seed S --threads 1 \
        --out WORK/samples/MDLM_first-hitting/seedS/samples.fa
(--resume keeps any seed whose samples.json names the same model, sampler, sizes and seed, and
recomputes its metrics when the metric options changed.)

Models: --models-dir DIR with DIR/mamba_ar and DIR/caduceus_mdlm (model directories, or NAME/model);
rows whose model is missing are trained first with the cpu-hour configs for --train-minutes each
(default 10; written under runs/sample_quality_cpu/models) — an explicit budget, stated in the table.
Writes results/sample_quality_cpu.md and .json (--quick: results/sample_quality_cpu_quick.*).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import common
from sample_quality_models import (  # noqa: F401  (few_step, infill)
    MDLM_SAMPLERS,
    TRAINED,
    find_model,
    fit_markov,
    linked_to,
    prepare_models,
    sample_rows,
    train_model,
)
from sample_quality_report import _cell, _sampling_seconds, closest_lines, render, summarize

REPO = Path(__file__).resolve().parent.parent

SIZES = {  # seeds, num, length, steps, reference windows, Markov max order, training minutes
    "cpu": {"seeds": 3, "num": 64, "length": 1024, "steps": 256, "reference_windows": 1000, "max_order": 10,
            "train_minutes": 10.0, "metrics": []},
    "quick": {"seeds": 2, "num": 8, "length": 128, "steps": 16, "reference_windows": 64, "max_order": 5,
              "train_minutes": 1.0, "metrics": ["--motif-ids", "MA0139.2,MA0079.5,MA0106.3"]},
    "dry": {"seeds": 1, "num": 2, "length": 32, "steps": 2, "reference_windows": 8, "max_order": 5,
            "train_minutes": 0.2, "metrics": ["--motif-ids", "MA0139.2"]},
}


def cli(argv: list[str]) -> None:
    import contextlib
    import io

    from dnadiff.cli import main as dnadiff_main
    from dnadiff.errors import DnadiffError

    with contextlib.redirect_stdout(io.StringIO()):  # the command's own tables: this pipeline prints one
        rc = dnadiff_main(argv)
    if rc:
        raise DnadiffError(f"`dnadiff {' '.join(argv)}` failed (exit {rc})")


_MODELS: dict[str, object] = {}  # model directory -> the loaded model (each row samples several seeds)


def draw_samples(model_dir: str, fa: Path, size: dict, seed: int, sampler: str | None, extra: list[str]) -> None:
    """FA and FA.json (FA with .json) as `dnadiff sample MODEL -n NUM --length L --seed S [--sampler --steps]
    [--rc-symmetric] --out FA` writes them, through the library call `dnadiff.sample`."""
    import dnadiff
    from dnadiff.data import format_fasta
    from dnadiff.errors import DnadiffError
    from dnadiff.sampling import output_paths, sample_records
    from dnadiff.utils import json_text, write_together

    known = ("--rc-symmetric", "--trained-window", "--left-to-right", "--quarter-stride")
    unknown = [e for e in extra if e not in known and not e.startswith(("--steps=", "--inner="))]
    if unknown:
        raise DnadiffError(f"sample_quality: unknown sampling option(s) {unknown}")
    if model_dir not in _MODELS:
        _MODELS[model_dir] = dnadiff.load(model_dir)
    model = _MODELS[model_dir]
    steps = size["steps"] if sampler and sampler != "first_hitting" else None  # first-hitting: one call per token
    own = [int(e.split("=", 1)[1]) for e in extra if e.startswith("--steps=")]
    steps = own[0] if own else steps  # a row's own steps (a block row: network calls per block)
    options = trained_window(model, size, extra)
    options.update(("inner", e.split("=", 1)[1]) for e in extra if e.startswith("--inner="))  # a block's inner sampler
    res = dnadiff.sample(model, size["num"], size["length"], sampler=sampler, steps=steps, seed=seed,
                         rc_symmetric="--rc-symmetric" in extra, **options)
    out, stats_path = output_paths(str(fa), "dna")  # the command's pair: samples.fa, samples.json
    stats = {"model": str(model_dir), **res.stats(), "options": options, "row_options": list(extra), "class": None,
             "guidance": 0.0, "out": out}
    write_together([(out, format_fasta(sample_records(res, model.decode(res.x)))), (stats_path, json_text(stats))])


def trained_window(model, size: dict, extra: list[str]) -> dict:
    """semi_ar options for --trained-window: windows of the model's training length (data.seq_len), stride half
    of it (each later window sees half a window of what came before); {} otherwise or when the sample is no
    longer than one window. --left-to-right: the inner sampler `ordered` (each window's new tokens left to
    right, one call per token); --quarter-stride: stride a quarter window (three quarters of it context; with
    `ordered` the calls per base are the same)."""
    ordered = {"inner": "ordered"} if "--left-to-right" in extra else {}  # one window or many: the same order
    window = int(model.config.data.seq_len or 0)
    if "--trained-window" not in extra or not window or size["length"] <= window:
        return ordered
    stride = window // 4 if "--quarter-stride" in extra else window // 2
    return {"window": window, "stride": max(1, stride), **ordered}


def metric_values(res: dict) -> dict[str, float]:
    """{metric: value} of a metrics.json: every row of summary_rows (the samples column), plus the oracle."""
    from dnadiff.eval import summary_rows

    out = {}
    for row in summary_rows(res):
        v = row["samples"]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[row["metric"]] = float(v)
    oracle = res.get("oracle") or {}
    for k, v in oracle.items():
        if k in ("samples_perplexity", "samples_bits_per_base") and isinstance(v, (int, float)):
            out[f"oracle {k} (Markov best k)"] = float(v)
    return out


def real_windows(data: dict, split: str, length: int, n: int, seed: int) -> list[str]:
    """n random full windows (no N) of a split: the real-DNA row's 'samples'."""
    import numpy as np

    from dnadiff.data import genome_reference

    pool = genome_reference(data["fasta"], data["bed"], split, length, 100_000)
    idx = np.random.default_rng(seed).choice(len(pool), size=min(n, len(pool)), replace=False)
    return [pool[i] for i in sorted(idx)]


def write_fasta(path: Path, seqs: list[str]) -> None:
    from dnadiff.utils import atomic_write

    atomic_write(path, "".join(f">real_{i}\n{s}\n" for i, s in enumerate(seqs)))


# (metric, direction): lower is closer, or "floor": closest to the real-vs-real row's value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=["cpu"], default="cpu")
    ap.add_argument("--quick", action="store_true", help="tiny sizes on the bundled chr22 sample (a smoke run)")
    ap.add_argument("--dry-run", action="store_true", help="every row once at toy sizes in a temp folder; no table")
    ap.add_argument("--shared", default=os.environ.get("DNADIFF_DATA") or str(REPO.parent / "shared" / "data"))
    ap.add_argument("--models-dir", default=None, help="folder with mamba_ar/ and caduceus_mdlm/ model directories")
    ap.add_argument("--cpu-hour-dir", default=str(REPO / "runs" / "cpu_hour"),
                    help="pipelines/cpu_hour.py's run folder (rows added when its models exist)")
    ap.add_argument("--bd3-dir", default=str(REPO / "runs" / "block_diffusion"),
                    help="pipelines/block_diffusion.py's run folder: a `BD3 ...` row (the model's own block sampler "
                         "and steps) for each of its models that exists")
    ap.add_argument("--train-minutes", type=float, default=None, help="budget of a missing model (default 10)")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--num", type=int, default=None, help="sequences per seed (default 64)")
    ap.add_argument("--length", type=int, default=None, help="bases per sequence (default 1024)")
    ap.add_argument("--steps", type=int, default=None, help="MDLM sampling steps (default 256)")
    ap.add_argument("--mdlm-rows", default=",".join(r[0] for r in MDLM_SAMPLERS),
                    help="the MDLM rows to run, comma-separated (default: all; first-hitting makes one network "
                         "call per token, 1,024 for 1,024 bp)")
    ap.add_argument("--row-seeds", default=None,
                    help="NAME=N,...: these rows over N seeds instead of --seeds (e.g. 'MDLM first-hitting=2'), "
                         "stated in the table")
    ap.add_argument("--embedder", default=None,
                    help="a classifier or model directory: adds the in-house Fréchet distance of its pooled features "
                         "(`dnadiff metrics --embedder`)")
    ap.add_argument("--resume", action="store_true",
                    help="reuse every seed whose samples a killed run (or `dnadiff sample` with the same model, "
                         "sampler, sizes and seed) left in --work-dir; metrics are recomputed when their "
                         "options differ")
    ap.add_argument("--out", default=None, help="output stem (default results/sample_quality_cpu[_quick])")
    ap.add_argument("--note", default=None, help="a paragraph at the end of the table (what a missed target means)")
    ap.add_argument("--work-dir", default=None, help="samples, metrics and trained models (default runs/...)")
    args = ap.parse_args(argv)
    return common.main_with_dry_run(run, args, __file__, argv, "sample_quality")

def parse_row_seeds(text: str | None, names: list[str] | None) -> dict[str, int]:
    """--row-seeds 'NAME=N,...': rows scored over fewer (or more) seeds than --seeds (names=None: the
    format only, checked before any work; the row names once the rows are known)."""
    from dnadiff.errors import DnadiffError

    out = {}
    for item in filter(None, (t.strip() for t in (text or "").split(","))):
        name, _, n = item.rpartition("=")
        if not name or not n.isdigit() or int(n) < 1:
            raise DnadiffError(f"--row-seeds {item!r}: want NAME=N, the seed count a positive integer")
        if names is not None and name not in names:
            raise DnadiffError(f"--row-seeds {item!r}: no row {name!r} in this run (rows: {', '.join(names)})")
        out[name] = int(n)
    return out


def run_sizes(args, dry: Path | None) -> tuple[dict, float, Path | None]:
    """The sizes of the run (dry, quick or cpu, with --seeds/--num/--length/--steps), the training budget
    of a missing model and --models-dir, validated."""
    from dnadiff.errors import DnadiffError

    size = dict(SIZES["dry" if dry else "quick" if args.quick else "cpu"])
    for k in ("seeds", "num", "length", "steps"):
        v = getattr(args, k)
        if v is not None:
            if v < 1:
                raise DnadiffError(f"--{k} {v}: must be >= 1")
            size[k] = v
    minutes = args.train_minutes or size["train_minutes"]
    if not minutes > 0:
        raise DnadiffError(f"--train-minutes {minutes:g}: must be positive")
    models_dir = Path(args.models_dir) if args.models_dir else None
    if models_dir is not None and not models_dir.is_dir():
        raise DnadiffError(f"--models-dir {models_dir}: not a folder")
    return size, minutes, models_dir


def genome_files(args, dry: Path | None) -> tuple[str, str]:
    """The FASTA and BED: the chr22 sample bundled in the package (dry and quick runs), else the shared subset."""
    from dnadiff.errors import DnadiffError

    if dry or args.quick:
        from dnadiff.data_root import bundled_data_root

        sample = Path(bundled_data_root()) / "chr22_sample"
        fasta, bed = sample / "chr22_sample.fa.gz", sample / "sequences.bed"
    else:
        fasta, bed = (f"{args.shared}/hg19_chr22_subset/chr22.fa.gz", f"{args.shared}/hg19_chr22_subset/sequences.bed")
        if not Path(fasta).is_file():
            raise DnadiffError(f"--shared {args.shared}: no hg19_chr22_subset/chr22.fa.gz (set DNADIFF_DATA)")
    return str(fasta), str(bed)


def _samples_reusable(folder: Path, model_dir: str | None, sampler: str | None, size: dict, seed: int,
                      extra: list[str] | None = None) -> bool:
    """--resume: this seed's samples exist from a run with the same model, sampler and sizes (made by this
    pipeline or by a `dnadiff sample` run beside it: the same seed gives the same streams at any batch size)."""
    if not (folder / "samples.fa").is_file():
        return False
    if model_dir is None:  # real windows: cut again identically from the seed
        return True
    try:
        meta = json.loads((folder / "samples.json").read_text())
    except (OSError, ValueError):
        return False
    want = {"model": str(model_dir), "num": size["num"], "length": size["length"], "seed": seed}
    if sampler and sampler != "first_hitting":
        want["steps"] = size["steps"]
    if "row_options" in meta and extra is not None:  # written by this pipeline (`dnadiff sample`: the row's folder)
        want["row_options"] = list(extra)
    return all(meta.get(k) == v for k, v in want.items()) and meta.get("sampler") == (sampler or meta.get("sampler"))


def _metrics_current(folder: Path, metrics_args: list[str]) -> bool:
    """--resume: the seed's metrics were computed with these metric options (else they are recomputed on
    the kept samples, e.g. after --embedder was added)."""
    try:
        done = json.loads((folder / "metrics_args.json").read_text())
    except (OSError, ValueError):
        return False
    return (folder / "metrics" / "metrics.json").is_file() and done == metrics_args


def score_row(row: tuple, size: dict, work: Path, data: dict, metrics_args: list[str], echo,
              resume: bool = False, seeds: int | None = None) -> dict:
    """One row: per seed (`seeds`, default size["seeds"]), its samples (or real windows) and their metrics;
    the per-seed values and summary."""
    from dnadiff.utils import atomic_write

    name, model_dir, sampler, extra = row
    values, sampling, calls = [], [], []  # each seed's wall seconds and network calls per sequence (samples.json)
    t0 = time.time()
    seeds = seeds or size["seeds"]
    for seed in range(seeds):
        folder = work / "samples" / name.split(" (")[0].replace(" ", "_").replace("+", "plus") / f"seed{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        fa = folder / "samples.fa"
        reuse = resume and _samples_reusable(folder, model_dir, sampler, size, seed, extra)
        if reuse and model_dir is not None:
            sampling.append(_sampling_seconds(folder))
            calls.append(_sampling_seconds(folder, "nfe_per_sequence"))
        if reuse and _metrics_current(folder, metrics_args):
            values.append(metric_values(json.loads((folder / "metrics" / "metrics.json").read_text())))
            continue
        (folder / "metrics_args.json").unlink(missing_ok=True)  # a crash below must not leave old metrics current
        if not reuse and model_dir is None:
            split = "train" if "--train-split" in extra else "test"
            write_fasta(fa, real_windows(data, split, size["length"], size["num"], seed))
        elif not reuse:
            draw_samples(model_dir, fa, size, seed, sampler, extra)
            sampling.append(_sampling_seconds(folder))
            calls.append(_sampling_seconds(folder, "nfe_per_sequence"))
        cli(["metrics", "-q", str(fa), "--reference", data["fasta"], "--out", str(folder / "metrics"),
             *metrics_args])
        atomic_write(folder / "metrics_args.json", json.dumps(metrics_args))
        values.append(metric_values(json.loads((folder / "metrics" / "metrics.json").read_text())))
    out = {"model_dir": model_dir, "sampler": sampler, "options": extra, "seeds": seeds, "per_seed": values,
           "summary": summarize(values), "wall_seconds": round(time.time() - t0, 1),
           "sampling_seconds_per_seed": sampling if sampling and None not in sampling else None,
           "network_calls_per_sequence": calls if calls and None not in calls else None}
    echo(f"{name}: {seeds} seeds in {time.time() - t0:.0f} s")
    return out


def run(args, command: str, dry: Path | None) -> int:
    from dnadiff.errors import DnadiffError
    from dnadiff.utils import format_table

    size, minutes, models_dir = run_sizes(args, dry)
    mdlm_rows = [r.strip() for r in args.mdlm_rows.split(",") if r.strip()]
    unknown = sorted(set(mdlm_rows) - {r[0] for r in MDLM_SAMPLERS})
    if unknown:
        raise DnadiffError(f"--mdlm-rows: unknown row(s) {', '.join(map(repr, unknown))}; rows: "
                           f"{', '.join(r[0] for r in MDLM_SAMPLERS)}")
    parse_row_seeds(args.row_seeds, None)
    if args.embedder and not Path(args.embedder).is_dir():
        raise DnadiffError(f"--embedder {args.embedder}: not a folder (a classifier or model directory)")
    stem = Path(args.out or REPO / "results" / ("sample_quality_cpu" + ("_quick" if args.quick else "")))
    work = Path(args.work_dir) if args.work_dir else (dry if dry else REPO / "runs" / stem.name)
    fasta, bed = genome_files(args, dry)
    data = {"fasta": fasta, "bed": bed}
    data_over = [f"data.fasta={fasta}", f"data.bed={bed}", f"data.seq_len={min(size['length'], 1024)}"]
    start = time.time()

    def echo(msg):
        print(f"[{time.time() - start:7.0f}s] {msg}", flush=True)

    # an empty --mdlm-rows (e.g. a table of the AR and block-diffusion rows) needs no MDLM model
    keys = [k for k in TRAINED if k != "caduceus_mdlm" or mdlm_rows]
    models, notes, k5, best_k = prepare_models(work, data_over, size, models_dir, minutes, dry is not None, echo,
                                               keys)
    rows = sample_rows(models, k5, best_k, args.cpu_hour_dir, mdlm_rows, args.bd3_dir)
    metrics_args = ["--bed", bed, "--split", "valid", "--max-reference-windows", str(size["reference_windows"]),
                    "--no-floor", "--no-plots", "--force", "--oracle", models["markov_best"], *size["metrics"]]
    if size["num"] >= 50:  # the classifier two-sample test (issue 46): its CNN / k-mer LR AUROC become columns
        metrics_args.append("--discriminator")
    if args.embedder:
        metrics_args += ["--embedder", args.embedder]
    row_seeds = parse_row_seeds(args.row_seeds, [r[0] for r in rows])
    per_row = {row[0]: score_row(row, size, work, data, metrics_args, echo, args.resume, row_seeds.get(row[0]))
               for row in rows}
    metrics = list(dict.fromkeys(k for r in per_row.values() for k in r["summary"]))
    table = [{"row": name, **{m: _cell(r["summary"], m) for m in metrics}} for name, r in per_row.items()]
    wall = time.time() - start
    closest = closest_lines(per_row, rows[0][0])
    text = render(args, command, wall, size, data, notes, best_k, per_row, metrics, closest)
    if dry is not None:
        print(text)
        print(f"dry run: {len(per_row)} rows x {len(metrics)} metrics in {wall:.1f} s; no table written")
        return 0
    common.write_results(stem, {"command": command, "wall_seconds": round(wall, 1), **common.stamp(),
                                "sizes": size, "data": data, "notes": notes, "rows": per_row, "metrics": metrics,
                                "closest": closest}, text)
    print(format_table(table))
    print("\n".join(closest))
    print(f"wrote {stem}.md and {stem}.json ({wall / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
