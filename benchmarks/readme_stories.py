"""Run the README's user stories as a new user would: each shell block marked `<!-- story: NAME -->` in
README.md, in a fresh temporary directory, with `DNADIFF_DATA` unset (a clone: the data bundled in the
package) and a fresh dnadiff cache, through the installed `dnadiff` command, under a time limit.

    python benchmarks/readme_stories.py [--only NAME ...] [--timeout 900] [--out result.json]

Prints the machine, the load average before and after, and a table: story, exit code, seconds (and for a
failed story the last lines of its stderr); the same as JSON (also written to --out). Exit code 1 when a
story fails or runs past the limit. The README quotes the figures with their machine and load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARK = re.compile(r"^<!-- story: ([\w.-]+) -->\n+```bash\n(.*?)^```", flags=re.S | re.M)


def stories(readme: str | None = None) -> list[tuple[str, str]]:
    """(name, shell text) of each story block of the README, in order; a name appears once."""
    text = readme if readme is not None else (REPO / "README.md").read_text(encoding="utf-8")
    found = [(m[1], m[2]) for m in MARK.finditer(text)]
    names = [name for name, _ in found]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise SystemExit(f"error: README.md: story names used twice: {', '.join(duplicated)}")
    return found


def clone_env(tmp: str) -> dict[str, str]:
    """The environment of a user in a fresh clone: no DNADIFF_DATA, an empty dnadiff cache, one thread, and
    this interpreter's `dnadiff` first on PATH."""
    env = {k: v for k, v in os.environ.items() if k != "DNADIFF_DATA"}
    env["DNADIFF_CACHE"] = os.path.join(tmp, ".cache")
    env["OMP_NUM_THREADS"] = "1"
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def run_story(name: str, script: str, timeout: float) -> dict:
    """One story in its own temporary directory: bash -e (the first failing command ends it)."""
    with tempfile.TemporaryDirectory(prefix=f"story_{name}_") as tmp:
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        start = time.perf_counter()
        proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work, env=clone_env(tmp),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)  # the story's whole process group (its dnadiff children too)
            _, err = proc.communicate()
            code = "timeout"
        seconds = time.perf_counter() - start
    tail = [line for line in (err or "").splitlines() if line.strip()][-5:] if code != 0 else []
    return {"story": name, "exit": code, "seconds": round(seconds, 1), "stderr_tail": tail}


def main(argv: list[str] | None = None) -> int:
    from dnadiff.logs import progress_bar
    from dnadiff.machine import describe_machine, load_average, machine_info
    from dnadiff.utils import format_table, portable_paths, write_json

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=None, metavar="NAME", help="run only these stories")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds a story may take (default 900)")
    p.add_argument("--out", default=None, help="also write the JSON here")
    p.add_argument("--list", action="store_true", help="print the stories' names and commands, run nothing")
    args = p.parse_args(argv)
    chosen = [(n, s) for n, s in stories() if not args.only or n in args.only]
    if args.only and len(chosen) != len(set(args.only)):
        known = ", ".join(n for n, _ in stories())
        print(f"error: --only: unknown story name(s) {sorted(set(args.only) - {n for n, _ in chosen})}; "
              f"the README's: {known}", file=sys.stderr)
        return 2
    if args.list:
        for name, script in chosen:
            print(f"# {name}\n{script}")
        return 0
    load_before = load_average()
    rows = [run_story(name, script, args.timeout) for name, script in
            progress_bar(chosen, desc="README stories", unit="story")]
    result = {"machine": machine_info(), "load_before": load_before, "load_after": load_average(),
              "timeout_s": args.timeout, "stories": rows, "total_seconds": round(sum(r["seconds"] for r in rows), 1)}
    print(describe_machine(result["machine"]))
    print(format_table([{k: r[k] for k in ("story", "exit", "seconds")} for r in rows]))
    for r in rows:
        for line in r["stderr_tail"]:
            print(f"  {r['story']}: {line}")
    print(f"total {result['total_seconds']} s\nbefore: {load_before}\nafter:  {result['load_after']}")
    print(json.dumps(result))
    if args.out:
        write_json(args.out, portable_paths(result))
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
