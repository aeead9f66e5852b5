"""An MDLM's likelihood in a fixed decoding order against its random-order bound, the Markov chain and an AR.

    DNADIFF_DATA=../shared/data python benchmarks/mdlm_orders.py \
        --mdlm "AR-adapted Caduceus-PH MDLM=runs/cpu_hour/caduceus_mdlm_from_ar/model" \
        --mdlm "Caduceus-PS MLM -> MDLM=runs/cpu_hour/caduceus_mlm_mdlm/model" \
        --ar "Mamba AR it was adapted from=runs/cpu_hour/caduceus_mdlm_from_ar_ar/model" \
        --markov-dir runs/cpu_hour/markov_best/model --split test --windows 2000 \
        --orders left_to_right --threads 1 --out results/mdlm_orders
    python benchmarks/mdlm_orders.py --dry-run     # a tiny model on the bundled chr22 sample (seconds)

Per MDLM: the bound (MDLM eq. 11, --t-samples stratified times per window, as pipelines/cpu_hour.py) and,
per --orders, the EXACT NLL of decoding in that order (dnadiff/eval/ordered_nll.py: the distribution the
`ordered` sampler draws, and what `semi_ar` with inner="ordered" draws window by window). For a model
without time input the bound is the average of these over random orders, so an order can be better or
worse than the bound; each is a proper likelihood. Every row is scored on the same windows (n evenly
spread over the split, the first MDLM's data settings, as the cpu-hour table) and paired per window with
the Markov chain (dnadiff/eval/paired.py: mean ± SE). --ar adds exact-NLL rows (an AR model) for reference.
--denoisers rc_symmetric scores each order with the strand-averaged denoiser p̄ = ½ p(x) + ½ RC[p(RC x)]
(samplers/wrappers.py): an exact NLL too (one order of another any-order model), the distribution
`dnadiff sample --rc-symmetric` draws.
Writes OUT.json and OUT.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def named(items: list[str], flag: str) -> list[tuple[str, str]]:
    from dnadiff.errors import DnadiffError

    out = []
    for item in items:
        name, sep, path = item.rpartition("=")
        if not sep or not name or not path:
            raise DnadiffError(f"{flag} {item!r}: want NAME=MODEL_DIR")
        out.append((name, path))
    return out


def windows(model, data_cfg, split: str, n: int):
    """n windows evenly spread over the split (benchmarks/padded_windows.py), cut with `data_cfg` (the first
    MDLM's data settings, so every model scores the same windows)."""
    from padded_windows import windows_of

    from dnadiff.config import replace

    model.config = replace(model.config, data=data_cfg)
    return windows_of(model, split, n)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mdlm", action="append", default=[], metavar="NAME=DIR", help="an MDLM model directory")
    ap.add_argument("--ar", action="append", default=[], metavar="NAME=DIR", help="an exact-NLL model for reference")
    ap.add_argument("--markov-dir", default=None, help="the Markov chain every row is paired with")
    ap.add_argument("--split", default="valid", choices=("valid", "test"))
    ap.add_argument("--windows", type=int, default=2000, help="windows evenly spread over the split (0 = all)")
    ap.add_argument("--orders", default="left_to_right", help="comma-separated: left_to_right,right_to_left,random")
    ap.add_argument("--t-samples", type=int, default=16, help="stratified t-samples per window for the bound")
    ap.add_argument("--denoisers", default="plain",
                    help="comma-separated: plain (the network), rc_symmetric (strand-averaged, as `dnadiff sample "
                         "--rc-symmetric`); each order is scored with each")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="output stem (OUT.json, OUT.md)")
    ap.add_argument("--dry-run", action="store_true", help="a tiny model trained for 2 steps on the bundled sample")
    import _common

    return _common.exit_on_error(run, ap.parse_args(argv), argv)


def dry_models(tmp: Path) -> tuple[list[tuple[str, str]], str]:
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.training import train

    over = ["train.max_steps=2", "train.batch_size=2", "train.val_batches=1", "train.warmup_steps=1",
            "train.threads=1", "data.seq_len=16", "model.overrides.d_model=16", "model.overrides.scan_impl=chunked",
            f"out_dir={tmp}", "name=mdlm"]
    mdlm = train(load_config(RunConfig, "experiments/cpu_hour_caduceus_mdlm",
                             [*over, "data.fasta=null", "data.bed=null", "train.max_minutes=1"]), overwrite=True)
    markov = train(load_config(RunConfig, "experiments/tiny_dna_markov",
                               [f"out_dir={tmp}", "name=markov", "model.overrides.order=2", "data.fasta=null",
                                "data.bed=null", "data.seq_len=16"]), overwrite=True)
    return [("tiny MDLM", str(mdlm.model_dir))], str(markov.model_dir)


def run(args, argv) -> int:
    import torch

    from dnadiff.checkpoint import load
    from dnadiff.errors import DnadiffError
    from dnadiff.eval import describe_difference, evaluate_model, paired_difference
    from dnadiff.eval.ordered_nll import ORDERS, evaluate_ordered
    from dnadiff.machine import describe_machine, load_average
    from dnadiff.utils import atomic_write, format_table, markdown_table, portable_paths, write_json

    torch.set_num_threads(args.threads)
    orders = [o for o in args.orders.split(",") if o]
    denoisers = [d for d in args.denoisers.split(",") if d]
    if not denoisers or set(denoisers) - {"plain", "rc_symmetric"}:
        raise DnadiffError(f"--denoisers {args.denoisers!r}: choose from plain, rc_symmetric")
    bad = [o for o in orders if o not in ORDERS]
    if bad:
        raise DnadiffError(f"--orders: unknown {bad}; choose from {', '.join(ORDERS)}")
    t0 = time.time()
    tmp = None
    mdlms, ars, markov_dir = named(args.mdlm, "--mdlm"), named(args.ar, "--ar"), args.markov_dir
    n, t_samples = args.windows, args.t_samples
    if args.dry_run:
        tmp = tempfile.TemporaryDirectory()
        mdlms, markov_dir = dry_models(Path(tmp.name))
        ars, n, t_samples = [], 8, 2
    if not mdlms:
        raise DnadiffError("--mdlm NAME=DIR: at least one MDLM model directory")
    for flag, name, path in [("--mdlm", *m) for m in mdlms] + [("--ar", *a) for a in ars] + (
            [("--markov-dir", "Markov", markov_dir)] if markov_dir else []):
        if not Path(path, "config.json").is_file() and not Path(path, "config.yaml").is_file():
            raise DnadiffError(f"{flag} {name}: {path} is not a model directory (no config.json)")
    data_cfg = load(mdlms[0][1]).config.data
    rows = []
    for name, path in mdlms:
        model = load(path)
        data = windows(model, data_cfg, args.split, n)
        t1 = time.time()
        bound = evaluate_model(model, data, batch_size=16, num_samples=t_samples, stratify_repeats=t_samples > 1,
                               progress=False, per_sequence=True, seed=1000)
        rows.append({"row": f"{name}: bound ({t_samples} t-samples)", "model_dir": path, "kind": "bound",
                     "scores": bound, "seconds": round(time.time() - t1, 1)})
        for order in orders:
            for rc in [d == "rc_symmetric" for d in denoisers]:
                t1 = time.time()
                res = evaluate_ordered(model, data, order=order, batch_size=args.batch_size,
                                       progress=not args.dry_run, rc_symmetric=rc)
                rows.append({"row": f"{name}: {order.replace('_', '-')} order" + (", RC-symmetric" if rc else ""),
                             "model_dir": path, "kind": f"exact ({order}{', strand-averaged' if rc else ''})",
                             "scores": res, "seconds": round(time.time() - t1, 1)})
        print(f"{name}: {len(data)} windows scored in {time.time() - t0:.0f} s", file=sys.stderr)
    def exact(path: str) -> dict:  # an AR or Markov model's exact NLL, per window
        model = load(path)
        return evaluate_model(model, windows(model, data_cfg, args.split, n), batch_size=16, progress=False,
                              per_sequence=True)

    rows += [{"row": name, "model_dir": path, "kind": "exact", "scores": exact(path)} for name, path in ars]
    markov = exact(markov_dir) if markov_dir else None
    lines = []
    for r in rows:
        if markov is not None:
            r["vs_markov"] = paired_difference(r["scores"], markov)
            lines.append("- " + describe_difference(r["vs_markov"], r["row"], "Markov"))
    table = [{"row": r["row"], "kind": r["kind"],
              f"{args.split} bits/base": f"{r['scores']['bits_per_token']:.4f} ± {r['scores']['bits_std_error']:.4f}",
              "vs Markov (paired)": (f"{r['vs_markov']['mean']:+.4f} ± {r['vs_markov']['std_error']:.4f}"
                                     if "vs_markov" in r else "-"),
              "> 2 SE": ("yes" if r["vs_markov"]["beyond_2se"] else "no") if "vs_markov" in r else "-",
              "lower on": f"{r['vs_markov']['wins']:.0%}" if "vs_markov" in r else "-"} for r in rows]
    if markov is not None:
        table.append({"row": "Markov chain", "kind": "exact",
                      f"{args.split} bits/base": f"{markov['bits_per_token']:.4f} ± {markov['bits_std_error']:.4f}",
                      "vs Markov (paired)": "-", "> 2 SE": "-", "lower on": "-"})
    print(format_table(table))
    print("\n".join(lines))
    if tmp is not None:
        tmp.cleanup()
        return 0
    quoted = (f"'{a}'" if " " in a else a for a in (argv or sys.argv[1:]))
    command = "python benchmarks/mdlm_orders.py " + " ".join(quoted)
    summary = {"command": command, "split": args.split, "windows": n, "t_samples": t_samples, "orders": orders,
               "denoisers": denoisers,
               "machine": describe_machine(), "load_average_at_end": load_average(),
               "wall_seconds": round(time.time() - t0, 1), "markov_dir": markov_dir,
               "rows": [{k: v for k, v in r.items() if k != "scores"} | {
                   "bits_per_token": r["scores"]["bits_per_token"], "bits_std_error": r["scores"]["bits_std_error"],
                   "num_sequences": r["scores"]["num_sequences"]} for r in rows],
               "markov_bits_per_token": None if markov is None else markov["bits_per_token"], "table": table,
               "versus_markov": lines}
    if args.out:
        write_json(args.out + ".json", portable_paths(summary))
        md = ["# An MDLM's likelihood by decoding order (exact) vs its bound, the Markov chain and an AR", "",
              f"Command: `{command}`  ",
              f"Wall time: {summary['wall_seconds'] / 60:.1f} min; machine: {summary['machine']}; "
              f"{summary['load_average_at_end'] or 'load n/a'} at the end  ",
              f"{args.split} split, {n} windows evenly spread (the cpu-hour table's windows), every row on the same "
              "windows, ± the SE over windows; exact rows: -log p_σ(x) of decoding in order σ "
              "(dnadiff/eval/ordered_nll.py), the distribution `dnadiff sample --sampler ordered` draws", "",
              markdown_table(table, list(table[0])), "", *lines]
        atomic_write(args.out + ".md", portable_paths("\n".join(md) + "\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
