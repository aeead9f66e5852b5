"""Peak memory of `dnadiff eval MODEL --records BIG.fa --max-windows 8` on a large single-line FASTA.

    python benchmarks/records_memory.py --out records_memory.json          # this checkout's code
    python benchmarks/records_memory.py --code /path/to/older/checkout     # the same, another version

Writes (once, into --workdir) a tiny untrained model directory, a --mb MB single-line FASTA of uniform
random bases (and its gzip copy with --gzip), and a FASTA of one short record. Each command runs in its
own child process (the code of --code on PYTHONPATH, one thread), which reports its peak RSS
(VmHWM of /proc/self/status). Columns: the peak, the peak of the same command on the short file (model,
imports and 8 windows' compute: what the file's size must not change), their difference, and that
difference over the file size. The eval results of the large and short runs are written too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dnadiff.machine import describe_machine, load_average, machine_info  # noqa: E402
from dnadiff.utils import format_table, markdown_table, portable_paths, write_json  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# VmHWM (this process's own high-water mark), not ru_maxrss: on Linux a child's ru_maxrss starts at
# its parent's RSS at the fork (exec keeps the forked copy's high-water mark), a floor that hides growth
CHILD = ("import resource, sys, time\nfrom dnadiff.cli import main\nfrom dnadiff.machine import memory_kib\n"
         "t = time.perf_counter()\nrc = main(['eval', *sys.argv[1:], '-q'])\n"
         "print('PEAK', rc, memory_kib('VmHWM') or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,"
         " time.perf_counter() - t)\n")


def make_inputs(workdir: str, mb: int, with_gzip: bool) -> dict:
    import numpy as np
    import torch

    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import DNATokenizer

    os.makedirs(workdir, exist_ok=True)
    paths = {"model": os.path.join(workdir, "model"), "big": os.path.join(workdir, f"single_line_{mb}mb.fa"),
             "short": os.path.join(workdir, "short.fa")}
    if not os.path.isfile(os.path.join(paths["model"], "config.json")):
        torch.manual_seed(0)
        cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["data.seq_len=128", "sample.length=128"])
        tok = DNATokenizer()
        save_model_dir(paths["model"], cfg, build_backbone(cfg.model.backbone, preset=cfg.model.preset,
                                                           vocab_size=tok.vocab_size, **cfg.model.overrides), tok)
    rng = np.random.default_rng(0)
    if not os.path.isfile(paths["big"]):
        seq = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, mb * 1_000_000, dtype=np.uint8)].tobytes()
        with open(paths["big"] + ".tmp", "wb") as fh:
            fh.write(b">big one line\n" + seq + b"\n")
        os.replace(paths["big"] + ".tmp", paths["big"])
        with open(paths["short"], "wb") as fh:
            fh.write(b">short\n" + seq[:16384] + b"\n")  # 8 windows or more up to seq_len 2048
    if with_gzip:
        paths["big_gz"] = paths["big"] + ".gz"
        if not os.path.isfile(paths["big_gz"]):
            with open(paths["big"], "rb") as src, gzip.open(paths["big_gz"] + ".tmp", "wb", compresslevel=1) as out:
                while block := src.read(1 << 22):
                    out.write(block)
            os.replace(paths["big_gz"] + ".tmp", paths["big_gz"])
    return paths


def peak(code: str, argv: list[str]) -> tuple[float, float]:
    """(peak RSS MiB, seconds) of one eval in a child process running `code`'s dnadiff."""
    env = dict(os.environ, PYTHONPATH=code, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, *argv], env=env, cwd=code, capture_output=True, text=True)
    line = [x for x in out.stdout.splitlines() if x.startswith("PEAK")]
    if out.returncode != 0 or not line or line[-1].split()[1] != "0":
        raise SystemExit(f"error: eval failed: {out.stderr.strip().splitlines()[-1:]}")
    _, _, kib, seconds = line[-1].split()
    return int(kib) / 1024, float(seconds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", default=REPO, help="the dnadiff checkout the children run (default: this one)")
    ap.add_argument("--workdir", default=os.path.join("/tmp", "dnadiff_records_memory"))
    ap.add_argument("--mb", type=int, default=50, help="size of the single-line FASTA in MB (default 50)")
    ap.add_argument("--seq-lens", default="128,1024", help="window lengths (default %(default)s)")
    ap.add_argument("--max-windows", type=int, default=8)
    ap.add_argument("--gzip", action="store_true", help="also the gzip copy of the large file")
    ap.add_argument("--out", help="write the JSON here")
    args = ap.parse_args(argv)
    paths = make_inputs(args.workdir, args.mb, args.gzip)
    print(f"machine: {describe_machine()}; {load_average()}\ncode: {args.code}", flush=True)
    rows, evals = [], {}
    for seq_len in [int(x) for x in args.seq_lens.split(",")]:
        for kind in ["big"] + (["big_gz"] if args.gzip else []):
            common = ["--max-windows", str(args.max_windows), "--seq-len", str(seq_len), "--force"]
            res_big = os.path.join(args.workdir, f"eval_{kind}_{seq_len}.json")
            res_short = os.path.join(args.workdir, f"eval_short_{seq_len}.json")
            big, seconds = peak(args.code, [paths["model"], "--records", paths[kind], *common, "--out", res_big])
            short, _ = peak(args.code, [paths["model"], "--records", paths["short"], *common, "--out", res_short])
            with open(res_big) as fh:
                evals[f"{kind}_{seq_len}"] = json.load(fh)
            size = os.path.getsize(paths[kind]) / 2**20
            rows.append({"file": os.path.basename(paths[kind]), "file_mib": round(size, 1), "seq_len": seq_len,
                         "max_windows": args.max_windows, "peak_mib": round(big, 1),
                         "short_file_peak_mib": round(short, 1),
                         "growth_mib": round(big - short, 1), "growth_over_file": round((big - short) / size, 2),
                         "eval_s": round(seconds, 2)})
            print(format_table([rows[-1]]), f"   [{load_average()}]", flush=True)
    print("\n" + markdown_table(rows))
    print(f"\n{describe_machine()}; {load_average()}")
    if args.out:
        write_json(args.out, portable_paths(
            {"benchmark": "records_memory", "code": args.code, "machine": machine_info(),
                              "rows": rows, "evals": evals, "load_average_end": load_average(), "at": time.time()}))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
