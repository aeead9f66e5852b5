"""Wall time of the README's Python API block, run as a user would: a fresh Python process in an
empty directory (imports included), on this machine at its current load.

    python benchmarks/readme_python_block.py [--repeats 1] [--out result.json]

Prints the machine, the load average before and after, each run's seconds and their median, as a
table and as JSON (also written to --out). The README quotes the number with its machine and load.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common

REPO = Path(__file__).resolve().parent.parent


def python_block() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", readme, flags=re.S | re.M)
    return next(b for b in blocks if "dnadiff.load(" in b)


def main(argv: list[str] | None = None) -> int:
    from dnadiff.logs import progress_bar
    from dnadiff.machine import describe_machine, load_average, machine_info
    from dnadiff.utils import format_table

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    code = python_block()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    load_before = load_average()
    times = []
    for _ in progress_bar(range(args.repeats), desc="README python block", unit="run"):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], cwd=tmp, env=env, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
    result = {"machine": machine_info(), "load_before": load_before, "load_after": load_average(),
              "seconds": [round(t, 1) for t in times], "median_seconds": round(statistics.median(times), 1)}
    print(describe_machine(result["machine"]))
    print(format_table([{"runs": len(times), "median_s": result["median_seconds"], "min_s": min(result["seconds"]),
                         "max_s": max(result["seconds"])}]))
    print(f"before: {load_before}\nafter:  {result['load_after']}")
    return _common.print_and_save(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
