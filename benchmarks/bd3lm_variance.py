"""Variance of the block-diffusion training estimate per block size, clipped vs plain schedule (issue 52 §3).

BD3-LM (arXiv 2503.09573, §4, data-driven noise schedules) trains with mask rates drawn from U[β, ω] instead of
U[0, 1]: the estimate of the loss (and its gradient) then varies less from batch draw to batch draw, which the
paper finds matters most for small blocks. This script measures it on real chr22 windows with trained block
models (one per block size: their own training layout): for each model and schedule it draws the batch
training loss (Σ nats / Σ tokens over a batch, the quantity the optimiser sees) `--repeats` times on the same
fixed batches and reports its mean and its variance across draws (averaged over batches). The plain schedule's
mean is the NELBO (an estimate of it); a clipped schedule's mean is not (it weights only mask rates in
[β, ω]); the likelihood is always evaluated with U[t_min, 1] (diffusion/bd3lm.py).

    python benchmarks/bd3lm_variance.py --runs-dir runs/block_diffusion_5min      # bd3lm4/16/64 models there
    python benchmarks/bd3lm_variance.py --model 16=runs/x/model --clips 0.45,0.95 0.3,0.8
    python benchmarks/bd3lm_variance.py --dry-run         # tiny models trained 2 steps on the bundled sample

Writes results/bd3lm_variance.json and .md (--stem): per block size and schedule the mean batch loss
(nats/token), its variance and standard deviation across draws, and the variance relative to the plain
schedule; with the command, machine and load.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
CLIPS = ((0.45, 0.95), (0.3, 0.8), (0.2, 0.7))  # the paper's intervals for B = 4 and 16, and a lower one


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs-dir", default=None, help="a pipelines/block_diffusion.py run folder (its bd3lmB models)")
    ap.add_argument("--model", action="append", default=[], metavar="B=DIR", help="a block model directory")
    ap.add_argument("--clips", nargs="*", default=[f"{a},{b}" for a, b in CLIPS], metavar="BETA,OMEGA")
    ap.add_argument("--windows", type=int, default=256, help="valid windows (fixed batches)")
    ap.add_argument("--batch-size", type=int, default=64, help="windows per batch (the cpu-hour training batch)")
    ap.add_argument("--repeats", type=int, default=32, help="draws of each batch's loss")
    ap.add_argument("--results", default=str(REPO / "results"))
    ap.add_argument("--stem", default="bd3lm_variance")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dry-run", action="store_true")
    return ap.parse_args(argv)


def models_of(args, tmp: Path | None) -> dict[int, str]:
    from dnadiff.errors import DnadiffError

    found: dict[int, str] = {}
    if tmp is not None:
        return {b: train_tiny(tmp, b) for b in (4, 16)}
    if args.runs_dir:
        for b in (4, 16, 64):
            d = Path(args.runs_dir) / f"bd3lm{b}" / "model"
            if d.is_dir():
                found[b] = str(d)
    for spec in args.model:
        b, _, d = spec.partition("=")
        if not b.isdigit() or not Path(d).is_dir():
            raise DnadiffError(f"--model {spec}: expected B=MODEL_DIR with an existing directory")
        found[int(b)] = d
    if not found:
        raise DnadiffError("no block models: give --runs-dir (pipelines/block_diffusion.py's runs) or --model B=DIR")
    return dict(sorted(found.items()))


def train_tiny(tmp: Path, block: int) -> str:
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.training import train

    cfg = load_config(RunConfig, "experiments/tiny_dna_bd3lm", [
        f"name=b{block}", f"out_dir={tmp}", f"objective.block_size={block}", "data.seq_len=32", "train.max_steps=2",
        "train.batch_size=4", "train.val_every=100", "train.progress=false", "train.warmup_steps=1"])
    return str(train(cfg, overwrite=True).model_dir)


def batch_losses(model, objective, batches, repeats: int, clipped: bool) -> torch.Tensor:
    """Float64[n_batches, repeats]: the training loss of each fixed batch, `repeats` draws."""
    out = torch.zeros(len(batches), repeats, dtype=torch.float64)
    with torch.no_grad():
        for i, (x0, mask) in enumerate(batches):
            for r in range(repeats):
                g = torch.Generator().manual_seed(1_000 * i + r)
                out[i, r] = float(objective.loss(model.denoiser, x0, mask, generator=g, clipped=clipped).loss)
    return out


def measure(model_dir: str, clips: list[tuple[float, float]], windows: int, batch_size: int, repeats: int) -> list:
    import dnadiff
    from dnadiff.data import build_split_dataset
    from dnadiff.diffusion import build_objective

    model = dnadiff.load(model_dir)
    model.backbone.eval()
    data = build_split_dataset(model.config, model.tokenizer, "valid")
    idx = torch.linspace(0, len(data) - 1, min(windows, len(data))).round().long().unique().tolist()
    items = [data[i] for i in idx]
    batches = []
    for s in range(0, len(items), batch_size):
        part = items[s:s + batch_size]
        batches.append((torch.stack([p["input_ids"] for p in part]), torch.stack([p["attention_mask"] for p in part])))
    obj = model.objective
    rows = []
    for clip in [None, *clips]:
        o = build_objective("bd3lm", schedule=obj.schedule, mask_id=obj.mask_id, vocab_size=obj.vocab_size,
                            block_size=obj.block_size, t_min=obj.t_min, pad_policy=obj.pad_policy, clip=clip)
        vals = batch_losses(model, o, batches, repeats, clipped=clip is not None)
        rows.append({"block_size": obj.block_size, "schedule": "U[t_min, 1] (plain)" if clip is None else
                     f"clipped U[{clip[0]:g}, {clip[1]:g}]", "clip": clip, "mean_loss": float(vals.mean()),
                     "variance": float(vals.var(dim=1, unbiased=True).mean()),
                     "std": float(vals.var(dim=1, unbiased=True).mean().sqrt()), "batches": len(batches),
                     "repeats": repeats, "windows": len(items), "model_dir": model_dir})
    for r in rows:
        r["variance_vs_plain"] = r["variance"] / rows[0]["variance"]
    return rows


def run(args, command: str, tmp: Path | None) -> int:
    from dnadiff.diffusion.bd3lm import check_clip
    from dnadiff.errors import DnadiffError
    from dnadiff.machine import describe_machine, load_average
    from dnadiff.threads import apply_threads
    from dnadiff.utils import atomic_write, format_table, markdown_table, portable_paths, write_json

    apply_threads(args.threads)
    try:
        clips = [check_clip([float(v) for v in c.split(",")], "--clips") for c in args.clips]
    except ValueError:
        raise DnadiffError(f"--clips {' '.join(args.clips)}: expected BETA,OMEGA pairs") from None
    if args.repeats < 2 or args.windows < 1 or args.batch_size < 1:
        raise DnadiffError("--repeats must be >= 2, --windows and --batch-size >= 1")
    start = time.time()
    load_start = load_average()
    rows = []
    for b, d in models_of(args, tmp).items():
        rows += measure(d, clips, 8 if tmp else args.windows, 4 if tmp else args.batch_size, 3 if tmp else args.repeats)
        print(f"[{time.time() - start:6.0f}s] B={b}: done", flush=True)
    table = [{"B": r["block_size"], "schedule": r["schedule"], "mean batch loss (nats/token)": f"{r['mean_loss']:.4f}",
              "variance": f"{r['variance']:.3e}", "std": f"{r['std']:.4f}",
              "variance / plain": f"{r['variance_vs_plain']:.2f}"} for r in rows]
    summary = {"command": command, "wall_seconds": round(time.time() - start, 1), "machine": describe_machine(),
               "load_average_at_start": load_start, "load_average_at_end": load_average(), "rows": rows}
    out = Path(tmp / "results" if tmp else args.results)
    out.mkdir(parents=True, exist_ok=True)
    md = ["# Block diffusion: variance of the training estimate, clipped vs plain schedule", "",
          f"Command: `{command}`  ", f"Machine: {summary['machine']}; {load_start} at the start, "
          f"{summary['load_average_at_end']} at the end; {summary['wall_seconds'] / 60:.1f} min", "",
          f"Per model: {rows[0]['windows']} valid windows in {rows[0]['batches']} fixed batches, {rows[0]['repeats']} "
          "draws of each batch's training loss; variance across draws, averaged over batches. A clipped "
          "schedule's mean is not the NELBO (only the plain one is).", "", markdown_table(table, list(table[0])), ""]
    write_json(out / f"{args.stem}.json", portable_paths(summary))
    atomic_write(out / f"{args.stem}.md", portable_paths("\n".join(md)))
    print(format_table(table, list(table[0])))
    print(f"wrote {out / args.stem}.md (.json)")
    return 0


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipelines"))
    import common  # the pipelines' harness: the dry run's temporary folder, one-line errors

    return common.main_with_dry_run(run, parse(argv), __file__, argv, "bd3lm_variance")

if __name__ == "__main__":
    sys.exit(main())
