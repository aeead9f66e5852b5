"""The default thread count against one thread on a busy machine: `dnadiff sample` timed end to end.

    python benchmarks/threads.py                       # 3 rounds, 2 busy-loop processes, all three arms
    python benchmarks/threads.py --repeats 5 --busy 1 --arms default,1 --out results/threads.json

What a user meets (dnadiff/threads.py): `dnadiff sample MODEL -n 4 --length 64 --steps 64` run as
a child process, with a competing CPU-bound load on the machine (`--busy` processes spinning in a
Python loop, started before the first run, given `--settle` seconds to raise the load average that
the default reads, and stopped at the end). Arms, interleaved round by round so that a change of
the machine's load hits all of them alike:

    default   no --threads and no OMP_NUM_THREADS: the command's default (free cores at start)
    1         --threads 1
    N         --threads N for N = the physical cores (torch's own default before --threads existed)

Each run records wall time and the CPU time (user + system) of the child, and the load average
when it started; for `default`, the thread count the default rule gives at that moment. The model
is the tiny DNA config (Caduceus d32 x 2) saved untrained in a temporary folder (`--model DIR` to
use another): sampling costs the same whatever the weights. Prints a table (medians and minima over
the rounds) and the JSON (also to --out).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import _common

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dnadiff.machine import (  # noqa: E402
    available_cores,
    describe_machine,
    load_average,
)
from dnadiff.threads import CHILD_ENV_VARS, free_cores  # noqa: E402
from dnadiff.utils import format_table  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUSY_LOOP = "while True:\n    pass\n"


def tiny_model(folder: str) -> str:
    """The tiny DNA config's network, seeded and untrained, saved as a model directory in `folder`."""
    import torch

    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import DNATokenizer

    torch.manual_seed(0)
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["data.seq_len=64", "sample.length=64"])
    tok = DNATokenizer()
    backbone = build_backbone(cfg.model.backbone, preset=cfg.model.preset, vocab_size=tok.vocab_size,
                              **cfg.model.overrides)
    return str(save_model_dir(os.path.join(folder, "model"), cfg, backbone, tok, {"steps": 0}))


def child_env() -> dict:
    """This repository's code; no thread variables, so that the `default` arm meets the default."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for var in CHILD_ENV_VARS:
        env.pop(var, None)
    return env


def run_sample(model: str, arm: str, args: argparse.Namespace, out: str) -> dict:
    """One `dnadiff sample` run as a child process: wall and CPU seconds, the load when it started."""
    cmd = [sys.executable, "-m", "dnadiff", "sample", model, "-n", str(args.num), "--length", str(args.length),
           "--steps", str(args.steps), "--sampler", "ancestral", "--out", out, "--force", "-q"]
    if arm != "default":
        cmd += ["--threads", arm]
    load = os.getloadavg()[0]
    threads = free_cores() if arm == "default" else int(arm)  # what the child's default rule reads now
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed ({proc.returncode}): {err.strip()[-500:]}")
    return {"arm": arm, "threads": threads, "wall_s": round(wall, 3),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "load_1min": round(load, 2)}


def summarise(runs: list[dict], arms: list[str]) -> list[dict]:
    rows = []
    for arm in arms:
        mine = [r for r in runs if r["arm"] == arm]
        walls, cpus = [r["wall_s"] for r in mine], [r["cpu_s"] for r in mine]
        rows.append({"arm": "default" if arm == "default" else f"--threads {arm}",
                     "threads": "/".join(str(t) for t in sorted({r["threads"] for r in mine})),
                     "runs": len(mine), "wall_median_s": round(statistics.median(walls), 2),
                     "wall_min_s": round(min(walls), 2), "cpu_median_s": round(statistics.median(cpus), 2),
                     "cpu_min_s": round(min(cpus), 2)})
    one = next((r for r in rows if r["arm"] == "--threads 1"), None)
    for r in rows:
        if one is not None:
            r["wall_vs_1_thread"] = round(r["wall_median_s"] / one["wall_median_s"], 2)
    return rows


def main(argv: list[str] | None = None) -> int:
    from tqdm.auto import tqdm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a model directory (default: the tiny config, untrained)")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; each runs every arm once (default 3)")
    ap.add_argument("--busy", type=int, default=2, help="competing busy-loop processes (default 2; 0: none)")
    ap.add_argument("--settle", type=float, default=20.0,
                    help="seconds the busy processes run before the first round (default 20)")
    ap.add_argument("--arms", default=None,
                    help="comma list of default and thread counts (default: default,1,CORES)")
    ap.add_argument("-n", "--num", type=int, default=4)
    ap.add_argument("--length", type=int, default=64)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--out", default=None, help="write the JSON here")
    args = ap.parse_args(argv)
    cores = available_cores()
    arms = (args.arms or f"default,1,{cores}").split(",")
    arms = list(dict.fromkeys(a.strip() for a in arms if a.strip()))
    for arm in arms:
        if arm != "default" and not (arm.isdigit() and int(arm) > 0):
            ap.error(f"--arms: {arm!r} is neither default nor a positive thread count")
    if args.repeats < 1 or args.busy < 0:
        ap.error("--repeats must be >= 1 and --busy >= 0")

    print(describe_machine(), file=sys.stderr)
    print(f"before: {load_average()}", file=sys.stderr)
    busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(args.busy)]
    runs: list[dict] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            model = args.model or tiny_model(tmp)
            if busy and args.settle > 0:
                time.sleep(args.settle)
            print(f"busy ({args.busy} spinning process{'es' if args.busy != 1 else ''}): {load_average()}",
                  file=sys.stderr)
            with tqdm(total=args.repeats * len(arms), desc="sample runs", unit="run") as bar:
                for round_ in range(args.repeats):
                    for arm in arms:
                        row = run_sample(model, arm, args, os.path.join(tmp, f"s_{arm}.fa"))
                        runs.append({"round": round_, **row})
                        bar.set_postfix(arm=arm, wall=row["wall_s"])
                        bar.update()
    finally:
        for p in busy:
            p.terminate()
        for p in busy:
            p.wait()
    rows = summarise(runs, arms)
    title = (f"\n`dnadiff sample MODEL -n {args.num} --length {args.length} --steps {args.steps}` under {args.busy} "
             f"busy-loop processes, {args.repeats} interleaved rounds; {describe_machine()}")
    return _common.finish(__file__, argv, args.out, title + "\n" + format_table(rows), {
        "busy_processes": args.busy, "sample": {"num": args.num, "length": args.length, "steps": args.steps},
        "summary": rows, "runs": runs})


if __name__ == "__main__":
    sys.exit(main())
