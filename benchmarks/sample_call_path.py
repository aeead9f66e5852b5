"""The path of one `dnadiff sample` call from the command line to the network, measured (issue 50 target:
at most 8 files): the Python stack at the first forward call of the backbone, its dnadiff frames in call
order, the files they are in and the hops (frames).

    python benchmarks/sample_call_path.py            # a tiny untrained model in a temp folder; prints the path
    python benchmarks/sample_call_path.py --json     # the same as JSON

The count is of the frames inside the package (dnadiff/) from `dnadiff.cli.main` (`python -m dnadiff` adds
dnadiff/__main__.py) to the backbone's forward; torch's own module-call frames are not hops.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))


def call_path(model_dir: str) -> list[tuple[str, str]]:
    """(file relative to the package root, function) of each dnadiff frame when the backbone first runs."""
    import torch

    import dnadiff
    from dnadiff.cli import main

    root = Path(dnadiff.__file__).resolve().parent.parent
    seen: list[list[tuple[str, str]]] = []

    def hook(module, args, output):
        # the first module to finish is the innermost one: its stack holds the whole path; it is cut at the
        # network's entry, the first frame in dnadiff/backbones/ (what runs inside the network is not a hop)
        if not seen and type(module).__module__.startswith("dnadiff.backbones"):
            frames = [(str(Path(f.filename).resolve().relative_to(root)), f.name) for f in traceback.extract_stack()
                      if Path(f.filename).resolve().is_relative_to(root / "dnadiff")]
            entry = next(i for i, (f, _) in enumerate(frames) if f.startswith("dnadiff/backbones/"))
            seen.append(frames[: entry + 1])

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            with contextlib.redirect_stdout(io.StringIO()):  # the statistics table
                rc = main(["sample", model_dir, "-n", "1", "--length", "16", "--steps", "2", "--threads", "1", "-q",
                           "--out", os.path.join(tmp, "s.fa")])
    finally:
        handle.remove()
    if rc != 0 or not seen:
        raise SystemExit(f"error: dnadiff sample failed (exit {rc})")
    return seen[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from helpers.cli_model import tiny_model_dir

    with tempfile.TemporaryDirectory() as tmp:
        path = call_path(tiny_model_dir(Path(tmp)))
    files = list(dict.fromkeys(f for f, _ in path))
    if args.json:
        print(json.dumps({"hops": len(path), "files": files, "frames": path}, indent=1))
    else:
        for f, fn in path:
            print(f"  {f}: {fn}")
        print(f"{len(path)} hops through {len(files)} files: {', '.join(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
