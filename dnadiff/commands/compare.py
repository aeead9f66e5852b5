"""`dnadiff compare A B`: two results paired on what they both scored, the difference ± its standard error."""

from __future__ import annotations

import argparse
import os
from typing import Any

from dnadiff.errors import DnadiffError

HELP = "paired difference of two finetune results (accuracy) or two eval JSONs (bits/base), ± SE"
DESCRIPTION = """Compare two results on the same items, paired per item (dnadiff/eval/paired.py):

  dnadiff compare runs/ft_caduceus runs/ft_kmer_lr       # two `dnadiff finetune` output folders
  dnadiff compare mdlm.json markov.json --out diff.json  # two `dnadiff eval --out` JSONs

Finetune outputs (OUT or OUT/results.json): accuracy of A minus B paired per test sequence (each
sequence's outcome averaged over a row's runs), mean ± SE = sd(d_i) / sqrt(N). Both must have scored
the same test sequences (data set, classes, --max-test subsample). Eval JSONs: bits/base of A minus B
per window (negative: A better), from the per-window values `dnadiff eval --out` records; both must
have scored the same windows (same data, --seq-len, --max-windows). |mean| > 2 SE is the usual
two-sided ~95% test. Prints a table on stdout; --out FILE also writes the comparison as JSON."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", help="a `dnadiff finetune` output folder (or its results.json), or an eval JSON")
    p.add_argument("b", metavar="B", help="the same kind of result as A, scored on the same items")
    p.add_argument("--out", default=None, help="also write the comparison here as JSON")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out file")


def read_result(path: str) -> tuple[str, dict[str, Any], str]:
    """(kind 'finetune' | 'eval', the JSON, the file read) of a finetune output folder, a results.json
    or an eval JSON."""
    import json

    file = os.path.join(path, "results.json") if os.path.isdir(path) else path
    if not os.path.isfile(file):
        if os.path.isdir(path):
            raise DnadiffError(f"{path}: no results.json (not a `dnadiff finetune` output folder)")
        raise DnadiffError(f"{path}: file not found")
    try:
        with open(file, encoding="utf-8") as fh:
            data = json.load(fh)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DnadiffError(f"{file}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    if isinstance(data, dict) and isinstance(data.get("runs"), list) and "selected_lr" in data:
        return "finetune", data, file
    if isinstance(data, dict) and "num_windows" in data and ("bits_per_base" in data or "bits_per_token" in data):
        if "sequence_nats" not in data:
            raise DnadiffError(f"{file}: an eval JSON without per-window values (written before they were "
                               "recorded); rerun `dnadiff eval ... --out` to pair it")
        return "eval", data, file
    raise DnadiffError(f"{file}: neither a `dnadiff finetune` results.json nor a `dnadiff eval --out` JSON")


def display_names(a: str, b: str) -> tuple[str, str]:
    """Short names for the table: the folder (or file stem) of each argument; A and B when they tie."""
    def name(path: str) -> str:
        path = os.path.normpath(path)
        if os.path.basename(path) == "results.json":
            path = os.path.dirname(path) or path
        return os.path.splitext(os.path.basename(path))[0] if os.path.isfile(path) else os.path.basename(path)

    na, nb = name(a), name(b)
    return (na, nb) if na and nb and na != nb else ("A", "B")


def check_same_tests(a: dict[str, Any], b: dict[str, Any], fa: str, fb: str) -> None:
    """Refuse two finetune results whose test sequences differ: another data set, other classes or
    another subsample (data.max_test, data.subsample_seed pick the test sequences, protocol.py)."""
    def what(r: dict[str, Any]) -> dict[str, Any]:
        data = (r.get("config") or {}).get("data") or {}
        return {"data set": os.path.basename(os.path.normpath(str(r.get("dataset", "")))), "classes": r.get("classes"),
                "test sequences": r.get("num_test"), "data.max_test": data.get("max_test"),
                "data.subsample_seed": data.get("subsample_seed")}

    wa, wb = what(a), what(b)
    for key in wa:
        if wa[key] != wb[key]:
            raise DnadiffError(f"{fa} and {fb} were tested on different sequences ({key} {wa[key]!r} vs "
                               f"{wb[key]!r}): they do not pair")


def check_same_windows(a: dict[str, Any], b: dict[str, Any], fa: str, fb: str) -> None:
    """Refuse two eval JSONs that scored other windows: another window length, data or window count
    (paired_difference then checks every window's scored tokens)."""
    unit_a = "base" if "bits_per_base" in a else "token"
    unit_b = "base" if "bits_per_base" in b else "token"
    da, db = (os.path.normpath(str(r.get("data", ""))) for r in (a, b))
    for key, va, vb in (("unit", unit_a, unit_b), ("seq_len", a.get("seq_len"), b.get("seq_len")),
                        ("data", da, db), ("num_windows", a.get("num_windows"), b.get("num_windows"))):
        if va != vb:
            raise DnadiffError(f"{fa} and {fb} scored different windows ({key} {va!r} vs {vb!r}): they do not pair")


def compare(a_path: str, b_path: str) -> dict[str, Any]:
    """The comparison record: {"kind", "unit", "a", "b", "mean", "std_error", ...} (eval/paired.py's keys)."""
    from dnadiff.eval.paired import paired_accuracy, paired_difference

    kind_a, a, fa = read_result(a_path)
    kind_b, b, fb = read_result(b_path)
    if kind_a != kind_b:
        raise DnadiffError(f"{fa} is a {kind_a} result and {fb} a {kind_b} result: they do not pair")
    if kind_a == "finetune":
        check_same_tests(a, b, fa, fb)
        try:
            d = paired_accuracy(a["runs"], b["runs"])
        except DnadiffError as exc:  # name the files, not rows "a"/"b"
            raise DnadiffError(f"{fa} vs {fb}: {exc}") from None
        unit = "accuracy"
    else:
        check_same_windows(a, b, fa, fb)
        try:
            d = paired_difference(a, b)
        except DnadiffError as exc:
            raise DnadiffError(f"{fa} vs {fb}: {exc}") from None
        unit = "bits/base" if "bits_per_base" in a else "bits/token"
    return {"kind": kind_a, "unit": unit, "a": a_path, "b": b_path, **d}


def summary_row(res: dict[str, Any], name_a: str, name_b: str) -> dict[str, Any]:
    """One table row: the two means, the paired difference, its SE, z = |mean| / SE and the verdict.
    Accuracy: higher is better; bits: lower is better."""
    mean, se = res["mean"], res["std_error"]
    z = abs(mean) / se if se > 0 else (float("inf") if mean else 0.0)
    better_a = mean > 0 if res["kind"] == "finetune" else mean < 0
    verdict = "within 2 SE" if not res["beyond_2se"] else f"{name_a if better_a else name_b} better"
    count = "test sequences" if res["kind"] == "finetune" else "windows"
    return {"A": name_a, "B": name_b, "unit": res["unit"], "A mean": res["a_mean"], "B mean": res["b_mean"],
            "A − B": mean, "SE": se, "z": z, count: res.get("n_sequences", res.get("n_windows")), "verdict": verdict}


def run(args: argparse.Namespace) -> int:
    from dnadiff.eval.paired import describe_accuracy_difference, describe_difference
    from dnadiff.logs import log
    from dnadiff.utils import format_table, refuse_existing, write_json

    res = compare(args.a, args.b)  # the inputs read and checked first, then the destination
    if args.out:
        refuse_existing([args.out], args.force)
    name_a, name_b = display_names(args.a, args.b)
    print(format_table([summary_row(res, name_a, name_b)]))
    describe = describe_accuracy_difference if res["kind"] == "finetune" else describe_difference
    log.info("%s", describe(res, name_a, name_b))
    if args.out:
        write_json(args.out, res)
        log.info("wrote %s", args.out)
    return 0


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: the two results as read (their kind and file) and where the comparison would go."""
    sides = {}
    for key in ("a", "b"):
        kind, _, file = read_result(getattr(args, key))
        sides[key] = {"path": getattr(args, key), "file": file, "kind": kind}
    return {"compare": {**sides, "out": args.out, "force": args.force}}


__all__ = ["compare", "read_result", "resolved_config", "summary_row"]
