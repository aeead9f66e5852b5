"""What the benchmark scripts share: the command line a run records, the `error:` exit, the median wall
time of a timed call, and the end of a run (the load and the command line printed, the result stamped with them and the
machine, as one JSON line on stdout and with --out as a JSON file with repository-relative paths).

`python benchmarks/X.py` puts this folder first on sys.path, so a benchmark imports this module by name
(`import _common`). Tests load benchmarks by path (tests/helpers/scripts.py), with this folder off
sys.path: they call only a benchmark's functions that do not reach this module.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent


def command_line(script: str | os.PathLike, argv: list[str] | None) -> str:
    """`python benchmarks/X.py ARGS`, shell-quoted, as run: `argv` given to main(), or the process's own
    arguments when main() was called without any."""
    args = sys.argv[1:] if argv is None else argv
    return "python " + " ".join(shlex.quote(str(a)) for a in [os.path.relpath(script, REPO), *args])


def exit_on_error(run: Callable[..., int], *args: Any) -> int:
    """run(*args), with a DnadiffError (a missing model, a bad option) as one `error:` line on stderr and exit
    code 2, as the dnadiff commands end."""
    from dnadiff.errors import DnadiffError

    try:
        return run(*args)
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def median_seconds(fn: Callable[[], Any], repeats: int, warmup: bool = False) -> float:
    """Median wall seconds of `repeats` calls of fn() (after one untimed call when `warmup`: allocations,
    caches)."""
    if warmup:
        fn()
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def finish(script: str | os.PathLike, argv: list[str] | None, out: str | os.PathLike | None, text: str,
           result: dict) -> int:
    """The end of a timing run: `text` (what was timed, on which machine, and the table), then the load average
    now and the command line, on stdout; then the result stamped with the command, the machine and that load
    (print_and_save). Returns 0, main's exit code."""
    from dnadiff.machine import load_average, machine_info

    end, cmd = load_average(), command_line(script, argv)
    print(text)
    print(f"end: {end}; command: {cmd}")
    return print_and_save({"command": cmd, "machine": machine_info(), "load_at_end": end, **result}, out)


def print_and_save(result: dict, out: str | os.PathLike | None) -> int:
    """The result as one JSON line on stdout and, when `out` is given, as that JSON file (paths under the
    repository or the data root written relative: dnadiff.utils.portable_paths). Returns 0, main's exit code."""
    print(json.dumps(result))
    return save(result, out)


def save(result: dict, out: str | os.PathLike | None) -> int:
    """With `out`, the result as that JSON file (written whole or not at all), its paths under the repository
    or the data root written relative (dnadiff.utils.portable_paths). Returns 0, main's exit code."""
    from dnadiff.utils import portable_paths, write_json

    if out:
        write_json(out, portable_paths(result))
    return 0


def add_reward_arguments(ap, beta: float = 0.25) -> None:
    """The DRAKES benchmarks' shared arguments: MODEL, --reward SPEC, --target CLASS and --beta (the KL weight)."""
    ap.add_argument("model")
    ap.add_argument("--reward", required=True)
    ap.add_argument("--target", default=None)
    ap.add_argument("--beta", type=float, default=beta)


def reward_finetune_parts(model_dir: str, reward_spec: str, target: str | None, steps: int):
    """What design-finetune's update is made of, for the DRAKES benchmarks: the model to train and a frozen copy
    (both in eval mode: no dropout, so the KL compares deterministic transitions), their denoisers with the
    banned tokens suppressed, the reward and the trajectory grid of `steps` steps."""
    from types import SimpleNamespace

    from dnadiff.checkpoint import load
    from dnadiff.guidance import build_reward
    from dnadiff.model import SuppressTokens
    from dnadiff.reward_tuning import make_grid

    model, pre = load(model_dir), load(model_dir)
    pre.backbone.requires_grad_(False)
    model.backbone.eval()
    pre.backbone.eval()
    banned = model.banned_ids()
    return SimpleNamespace(model=model, denoiser=SuppressTokens(model.denoiser, banned),
                           pretrained=SuppressTokens(pre.denoiser, banned),
                           reward=build_reward(reward_spec, target=target),
                           grid=make_grid(model.schedule, steps, eps=model.sampling_eps),
                           mask_id=model.tokenizer.mask_id, vocab_size=model.tokenizer.vocab_size)
