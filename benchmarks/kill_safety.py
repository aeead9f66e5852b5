"""Kill-safety: SIGKILL `dnadiff train` / `dnadiff finetune` at random moments, resume, compare.

    python benchmarks/kill_safety.py                      # 5 kills each for train and finetune
    python benchmarks/kill_safety.py --only train --kills 3 --steps 24 --out ks.json

For each command: one uninterrupted reference run, then a run that is killed `--kills` times
(SIGKILL: no cleanup code runs) and resumed with `--resume` after each kill, then finished.
Three kinds of kill, mixed in a seeded random order:
  random     an outside SIGKILL at a random moment after training started (uniform over the
             reference run's training time);
  tmp-poll   an outside SIGKILL the moment a temporary checkpoint file (*.tmp) is seen in the
             output folder, i.e. while a checkpoint is being written (polled every ms);
  mid-write  the child kills itself after writing exactly half of the bytes of its n-th
             checkpoint (train) or run record (finetune) to the temporary file: a guaranteed
             "killed during a checkpoint write".
After every kill each checkpoints/*.ckpt must load with torch.load(weights_only=True) (no
truncated checkpoint is ever visible under a final name) and each finetune run record must parse.
At the end the model.safetensors must equal the reference's bit for bit (train), and the
results.json the reference's except wall-clock fields (finetune). Children run with one thread
(OMP_NUM_THREADS=1) so that float reductions are the same in every process.
Prints a table and a JSON report; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TRAIN_OVERRIDES = ["data.seq_len=32", "train.batch_size=4", "train.val_every=8", "train.val_batches=1",
                   "train.ckpt_every=1", "train.log_every=1", "train.progress=false", "train.warmup_steps=1",
                   "sample.length=32", "sample.steps=4"]
FINETUNE_OVERRIDES = ["data.max_train=320", "data.max_test=48", "data.max_len=100", "protocol.seeds=[0,1,2,3]",
                      "train.epochs=1", "train.batch_size=8", "train.progress=false", "train.threads=1"]

# Run inside the child: kill the process after half of the n-th matching write (a checkpoint write).
MID_WRITE = r"""
import os, signal, sys
import importlib
sys.path.insert(0, os.environ["KS_TESTS"])
from helpers.half_write import HalfThenStop
mod = importlib.import_module(os.environ["KS_MODULE"])
nth, match = int(os.environ["KS_NTH"]), os.environ["KS_MATCH"]
count = [0]
real_open = open

def patched_open(path, mode="r", *args, **kwargs):
    fh = real_open(path, mode, *args, **kwargs)
    if "w" in mode and match in os.path.basename(str(path)):
        count[0] += 1
        if count[0] == nth:
            return HalfThenStop(fh, lambda: os.kill(os.getpid(), signal.SIGKILL))
    return fh

mod.open = patched_open  # module globals shadow the builtin open
from dnadiff.cli import main
sys.exit(main(sys.argv[1:]))
"""


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- the two jobs


class TrainJob:
    name = "train"
    module, match = "dnadiff.training.checkpoint_io", ".ckpt"

    def __init__(self, root: Path, steps: int):
        self.root, self.steps = root, steps

    def args(self, out: Path, resume: bool) -> list[str]:
        return ["train", "experiments/tiny_dna_mdlm", *TRAIN_OVERRIDES, f"train.max_steps={self.steps}",
                "--run-dir", str(out), "--resume" if resume else "--overwrite"]

    def can_resume(self, out: Path) -> bool:
        return (out / "checkpoints" / "last.ckpt").is_file()

    def writing_dir(self, out: Path) -> Path:
        return out / "checkpoints"

    def units(self) -> int:
        return self.steps

    def progress(self, out: Path) -> int:
        """Steps checkpointed so far (from the stepN.ckpt names; they hold N + 1 steps)."""
        names = glob.glob(str(out / "checkpoints" / "step*.ckpt"))
        return max((int(Path(n).stem[4:]) + 1 for n in names if Path(n).stem[4:].isdigit()), default=0)

    def tmp_files(self, out: Path) -> list[str]:
        d = out / "checkpoints"
        return [n for n in (os.listdir(d) if d.is_dir() else []) if n.endswith(".tmp")]

    def check_files(self, out: Path) -> dict:
        """Every *.ckpt loads with weights_only=True; the step of last.ckpt."""
        import torch

        bad, step = [], None
        for f in sorted(glob.glob(str(out / "checkpoints" / "*.ckpt"))):
            try:
                state = torch.load(f, map_location="cpu", weights_only=True)
                if f.endswith("last.ckpt"):
                    step = int(state["global_step"])
            except Exception as exc:  # a truncated or corrupt checkpoint under a final name
                bad.append(f"{os.path.basename(f)}: {str(exc).splitlines()[0][:80]}")
        tmp = [os.path.basename(p) for p in glob.glob(str(out / "checkpoints" / ".*.tmp"))]
        return {"unreadable": bad, "last_step": step, "leftover_tmp": tmp}

    def compare(self, ref: Path, out: Path) -> dict:
        from dnadiff.weights import read_weights

        a, b = ref / "model" / "model.safetensors", out / "model" / "model.safetensors"
        if not b.is_file():
            return {"equal": False, "detail": "no model.safetensors after the final resume"}
        wa, wb = read_weights(a), read_weights(b)
        tensors_equal = wa.keys() == wb.keys() and all(wa[k].equal(wb[k]) for k in wa)
        same_bytes = sha256(a) == sha256(b)
        return {"equal": bool(tensors_equal and same_bytes), "same_file_bytes": same_bytes,
                "tensors_equal": bool(tensors_equal), "sha256": sha256(b)[:16]}


class FinetuneJob:
    name = "finetune"
    module, match = "dnadiff.utils", ".json."

    def __init__(self, root: Path, steps: int):
        self.root = root

    def args(self, out: Path, resume: bool) -> list[str]:
        return ["finetune", "experiments/tiny_finetune", *FINETUNE_OVERRIDES, "--out", str(out),
                *(["--resume"] if resume else [])]

    def can_resume(self, out: Path) -> bool:
        return True  # a finetune job restarts from its recorded runs (none recorded: from scratch)

    def writing_dir(self, out: Path) -> Path:
        return out

    def units(self) -> int:
        return 4  # protocol.seeds in FINETUNE_OVERRIDES: one run each

    def progress(self, out: Path) -> int:
        return len(glob.glob(str(out / "runs" / "*" / "*.json")))

    def tmp_files(self, out: Path) -> list[str]:
        return [os.path.relpath(p, out) for p in glob.glob(str(out / "**" / ".*.tmp"), recursive=True)]

    def check_files(self, out: Path) -> dict:
        bad, done = [], 0
        if (out / "results.json").is_file():
            try:
                json.loads((out / "results.json").read_text())
            except Exception as exc:
                bad.append(f"results.json: {str(exc)[:80]}")
        for f in sorted(glob.glob(str(out / "runs" / "*" / "*.json"))):
            try:
                json.loads(Path(f).read_text())["result"]
                done += 1
            except Exception as exc:
                bad.append(f"{os.path.relpath(f, out)}: {str(exc)[:80]}")
        return {"unreadable": bad, "runs_recorded": done, "leftover_tmp": self.tmp_files(out)}

    @staticmethod
    def _strip(d):
        if isinstance(d, dict):
            return {k: FinetuneJob._strip(v) for k, v in d.items() if k not in ("wall_s", "machine", "log_dir")}
        if isinstance(d, list):
            return [FinetuneJob._strip(v) for v in d]
        return d

    def compare(self, ref: Path, out: Path) -> dict:
        if not (out / "results.json").is_file():
            return {"equal": False, "detail": "no results.json after the final resume"}
        a = self._strip(json.loads((ref / "results.json").read_text()))
        b = self._strip(json.loads((out / "results.json").read_text()))
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        return {"equal": not diff, "differing_keys": diff,
                "test_accuracy_mean": b.get("summary", {}).get("accuracy", {}).get("mean")}


# ----------------------------------------------------------------------------- driver


def launch(job, out: Path, resume: bool, mid_write_nth: int | None = None) -> subprocess.Popen:
    if mid_write_nth is None:
        cmd = [sys.executable, "-m", "dnadiff", *job.args(out, resume)]
        env = child_env()
    else:
        cmd = [sys.executable, "-c", MID_WRITE, *job.args(out, resume)]
        env = {**child_env(), "KS_MODULE": job.module, "KS_NTH": str(mid_write_nth), "KS_MATCH": job.match,
               "KS_TESTS": str(REPO / "tests")}  # tests/helpers/half_write.py
    log = open(out.parent / f"{out.name}.log", "ab")
    return subprocess.Popen(cmd, cwd=str(REPO), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for_training(proc: subprocess.Popen, job, out: Path, timeout: float) -> float | None:
    """Seconds until the child writes its first file in the checkpoint folder (None: it ended first)."""
    t0 = time.time()
    before = set(os.listdir(job.writing_dir(out))) if job.writing_dir(out).is_dir() else set()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            return None
        d = job.writing_dir(out)
        if d.is_dir() and set(os.listdir(d)) != before:
            return time.time() - t0
        time.sleep(0.005)
    return None


def kill(proc: subprocess.Popen) -> bool:
    """SIGKILL the child; False if it had already exited."""
    if proc.poll() is not None:
        return False
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def run_reference(job, out: Path) -> tuple[float, float]:
    """Uninterrupted run: (median seconds per unit of progress (step / finetune run), total seconds)."""
    t0 = time.time()
    proc = launch(job, out, resume=False)
    seen, stamps = 0, []
    while proc.poll() is None:
        p = job.progress(out)
        if p > seen:
            seen, stamps = p, stamps + [time.time()]
        time.sleep(0.002)
    if proc.returncode != 0:
        raise SystemExit(f"reference {job.name} run failed (exit {proc.returncode}); see {out}.log")
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
    return (gaps[len(gaps) // 2] if gaps else 1.0), time.time() - t0


def one_job(job, work: Path, kills: int, rng: random.Random) -> dict:
    ref, out = work / f"{job.name}_ref", work / f"{job.name}_killed"
    unit_time, t_total = run_reference(job, ref)
    kinds = ["mid-write", "tmp-poll"] + ["random"] * max(0, kills - 2)
    rng.shuffle(kinds)
    kinds = kinds[:kills]
    events, started = [], False
    for i, kind in enumerate(kinds):
        resume = started and job.can_resume(out)
        # mid-write: one of the files this child will still write (2 per train step, 1 per finetune run + results)
        left = job.units() - job.progress(out)
        nth = rng.randint(1, max(1, left * (2 if job.name == "train" else 1))) if kind == "mid-write" else None
        t0 = time.time()
        proc = launch(job, out, resume=resume, mid_write_nth=nth)
        started = True
        ev = {"kill": i + 1, "kind": kind, "resumed": resume}
        if kind == "mid-write":
            rc = proc.wait()
            ev["killed"] = rc == -signal.SIGKILL
            ev["detail"] = f"self-kill after half of write #{nth}" if ev["killed"] else f"finished first (exit {rc})"
        else:
            if wait_for_training(proc, job, out, timeout=1800) is None:
                ev.update(killed=False, detail=f"finished before the kill (exit {proc.returncode})")
            elif kind == "random":  # a random step ahead, then a random moment within that step
                now = job.progress(out)
                target = min(job.units() - 1, now + rng.randint(0, max(0, (job.units() - now) // 2)))
                delay = rng.uniform(0.0, unit_time)
                while proc.poll() is None and job.progress(out) < target:
                    time.sleep(0.002)
                deadline = time.time() + delay
                while time.time() < deadline and proc.poll() is None:
                    time.sleep(0.002)
                ev["killed"] = kill(proc)
                ev["detail"] = f"{delay:.2f} s after unit {target} was recorded"
            else:  # tmp-poll: kill while a temporary checkpoint file exists
                seen, old = None, set(job.tmp_files(out))  # leftovers of earlier kills do not count
                while proc.poll() is None and seen is None:
                    names = [n for n in job.tmp_files(out) if n not in old]
                    seen = names[0] if names else None
                    if seen is None:
                        time.sleep(0.001)
                ev["killed"] = kill(proc)
                ev["detail"] = f"while {seen} existed" if seen else "no temp file seen before it finished"
        ev["seconds"] = round(time.time() - t0, 2)
        ev.update(job.check_files(out))
        events.append(ev)
    final = launch(job, out, resume=started and job.can_resume(out))
    rc = final.wait()
    result = {"job": job.name, "reference_seconds": round(t_total, 1), "seconds_per_unit": round(unit_time, 3),
              "kills": events, "final_exit": rc,
              **job.compare(ref, out), "final_files": job.check_files(out)}
    result["no_truncated_file"] = all(not e["unreadable"] for e in events) and not result["final_files"]["unreadable"]
    result["ok"] = bool(rc == 0 and result["equal"] and result["no_truncated_file"])
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["train", "finetune"], default=None)
    p.add_argument("--kills", type=int, default=5)
    p.add_argument("--steps", type=int, default=30, help="training steps of the tiny train job (default 30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", default=None, help="working folder (default: a temporary one, removed)")
    p.add_argument("--out", default=None, help="write the JSON report here")
    args = p.parse_args(argv)
    from dnadiff.utils import format_table, portable_paths, write_json

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="dnadiff_kill_"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    jobs = [j for j in (TrainJob, FinetuneJob) if args.only in (None, j.name)]
    try:
        results = [one_job(j(work, args.steps), work, args.kills, rng) for j in jobs]
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    rows = []
    for r in results:
        for e in r["kills"]:
            state = e.get("last_step", e.get("runs_recorded"))
            rows.append({"job": r["job"], "kill": e["kill"], "kind": e["kind"], "killed": e["killed"],
                         "resumed": e["resumed"], "state_after": state, "unreadable": len(e["unreadable"]),
                         "tmp_left": len(e["leftover_tmp"]), "detail": e["detail"]})
    print(format_table(rows))
    print()
    print(format_table([{"job": r["job"], "final_exit": r["final_exit"], "equal_to_uninterrupted": r["equal"],
                         "no_truncated_file": r["no_truncated_file"], "reference_s": r["reference_seconds"],
                         "ok": r["ok"]} for r in results]))
    report = {"seed": args.seed, "kills": args.kills, "train_steps": args.steps, "results": results}
    print(json.dumps(report, indent=1, default=str))
    if args.out:
        write_json(args.out, portable_paths(report))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
