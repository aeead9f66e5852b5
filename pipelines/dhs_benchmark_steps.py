"""The steps of pipelines/dhs_benchmark.py through the CLI: one in-process `dnadiff` command, a row's model
trained (or kept), and one cell type's samples drawn (kept across reruns for the same command and weights).
pipelines/dhs_design.py, dhs_classification.py and few_step.py run their commands through `dnadiff` here too.
Last, --carry-from: an earlier run's rows added to this run's table (carry_rows)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import common

CONFIGS = {"markov": "experiments/dhs_markov", "ar": "experiments/dhs_cond_ar", "bd3": "experiments/dhs_cond_bd3lm",
           "cfg": "experiments/dhs_cond_mdlm",
           "cfg_chr22": "experiments/dhs_cond_mdlm", "cg": "experiments/dhs_mdlm"}
CFG_ROWS = ("cfg", "cfg_chr22")  # sampled with a label and a CFG weight chosen on the validation split
# cfg_chr22 (issue 47 §4): the cfg row's config, budget and protocol, its network started from the genome-pretrained
# chr22 MDLM (`model.init_from=`; the label embedding and the backbone's cond_proj are new: training/init_labels.py)
CHR22_DEFAULT = "runs/cpu_hour/caduceus_mdlm/model"  # pipelines/cpu_hour.py's Caduceus MDLM (d64 x 2, 128 bp)
# the same network (the cpu-hour recipe's architecture) trained one step on the bundled chr22 sample: the start of
# the cfg_chr22 row at --scale tiny and in dry runs
CHR22_TINY = ["experiments/tiny_dna_mdlm", "model.overrides.d_model=64", "model.overrides.n_layer=2"]


SHORT_STEP = ["train.max_steps=1", "train.val_every=1", "train.ckpt_every=1", "train.val_batches=1",
              "train.warmup_steps=0", "train.max_minutes=null", "train.batch_size=8"]


def dnadiff(argv: list[str], log) -> dict:
    """One in-process `dnadiff` command (an error stops the pipeline); its wall and CPU seconds."""
    import contextlib
    import io

    from dnadiff.cli import main as dnadiff_main

    w0, c0 = time.time(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):  # the commands' tables: their JSON files keep them
        code = dnadiff_main([str(a) for a in argv])
    if code != 0:
        raise SystemExit(f"error: `dnadiff {' '.join(map(str, argv))}` exited with {code}")
    out = {"command": "dnadiff " + " ".join(map(str, argv)), "wall_s": round(time.time() - w0, 1),
           "cpu_s": round(time.process_time() - c0, 1)}
    log(f"  {out['command']}  ({out['wall_s']} s wall)")
    return out


def chr22_start(given: str | None, out: Path, made_here: bool, threads: int, log) -> str | None:
    """The chr22 MDLM the cfg_chr22 row starts from: one trained a step here (tiny scale, dry runs), --chr22-model
    (missing: an error), or CHR22_DEFAULT when it exists (else None: the row is skipped, with the reason)."""
    if made_here:
        run_dir = out / "models" / "chr22_start"
        dnadiff(["train", *CHR22_TINY, *SHORT_STEP, "--run-dir", run_dir, "--threads", threads, "--overwrite", "-q"],
                log)
        return str(run_dir / "model")
    path = Path(given or CHR22_DEFAULT)
    if any((path / name).is_file() for name in ("config.json", "config.yaml")):  # the current and the older layout
        return str(path)
    if given:
        raise SystemExit(f"error: --chr22-model {given}: not a dnadiff model directory (no config.json)")
    log(f"cfg_chr22: skipped: no chr22 MDLM at {CHR22_DEFAULT} (train it with pipelines/cpu_hour.py, or give "
        "--chr22-model DIR)")
    return None


def train_row(row: str, out: Path, scale: dict, threads: int, dry: bool, log, init_from: str | None = None) -> dict:
    run_dir = out / "models" / row
    model = run_dir / "model"
    if (model / "config.json").is_file() and not dry:
        log(f"{row}: model kept from an earlier run ({model})")
        info = {"command": f"dnadiff train {CONFIGS[row]} --run-dir {run_dir} --threads {threads} (an earlier run)",
                "wall_s": None, "cpu_s": None}
    else:
        extra = list(scale["train"].get(row, scale["train"].get("*", [])))
        if dry and row != "markov":
            extra = SHORT_STEP
        if init_from:
            extra = [*extra, f"model.init_from={init_from}"]
        info = dnadiff(["train", CONFIGS[row], *extra, "--run-dir", run_dir, "--threads", threads, "--overwrite",
                        "-q"], log)
    metrics = json.loads((model / "metrics.json").read_text())
    info.update(config=f"configs/{CONFIGS[row]}.yaml", model=str(model), init_from=init_from,
                steps=metrics.get("steps"), parameters=metrics.get("parameters"),
                val_bits_per_base=metrics.get("val_bits_per_token"), orders=metrics.get("orders"),
                train_wall_s=metrics.get("wall_seconds_this_session", metrics.get("wall_seconds")))
    return info


def read_samples(fasta: Path) -> list[str]:
    from dnadiff.data import read_fasta

    return [s for _, s in read_fasta(fasta)]


def generate(row: str, model: str, cell: str, num: int, seed: int, path: Path, scale: dict, threads: int,
             reward: str | None, weight: float | None, log) -> tuple[list[str], dict]:
    common_args = ["--num", num, "--length", 200, "--seed", seed, "--out", path, "--threads", threads, "-q"]
    if row in ("markov", "ar", "bd3"):  # the label only (bd3: its own block sampler, the config's calls per block)
        argv = ["sample", model, "--class", cell, *common_args]
    elif row in CFG_ROWS:
        argv = ["sample", model, "--class", cell, "--guidance", weight, "--steps", scale["steps"], *common_args]
    else:  # cg: the reward classifier's gradient (first-order classifier guidance)
        argv = ["design", model, "--reward", f"classifier:{reward}", "--target", cell, "--method", "cg_grad",
                "--steps", scale["steps"], *common_args]
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = {"command": "dnadiff " + " ".join(map(str, argv)), "model": fingerprint_of(model),
             "reward": fingerprint_of(reward) if row == "cg" else None}

    def make() -> dict:
        for old in (path, Path(str(path) + ".json"), path.with_suffix(".json")):
            old.unlink(missing_ok=True)
        return dnadiff(argv, log)

    info = common.stamped(path.with_suffix(".done.json"), stamp, make, log,
                          f"{path} (same command and model)", ready=path.exists())
    return read_samples(path), info


def fingerprint_of(model: str) -> str:
    """Content fingerprint of a model directory (kept samples are reused only for the same weights)."""
    from dnadiff.eval import fingerprint

    return fingerprint(model)


def carry_rows(result: dict, old_path: str, order: tuple, log) -> dict:
    """Rows of an earlier run's JSON (`--carry-from`) added to `result` where this run did not make them, when
    both runs share the data, scale, seeds and number per cell type, and both made the real row: its scores
    depend only on the data and the judges (the evaluation oracle's target rate and Fréchet space), so it must
    come out the same (each overall metric within 1e-6 + 1e-3 x |value|; a retrained oracle whose file bytes
    differ, e.g. a zip timestamp in its .npz, passes only if it scores alike). Every row both runs made is
    compared (`check`: the largest |difference| of its overall means). Judges added since (the neural oracle,
    the discriminator columns) are absent from the carried rows: their samples are not re-scored."""
    path = Path(old_path)
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"error: --carry-from {old_path}: cannot read it as JSON ({e})") from None
    same = {"data sha256": (old.get("data", {}).get("sha256"), result["data"]["sha256"]),
            "scale": (old.get("scale"), result["scale"]), "seeds": (old.get("seeds"), result["seeds"]),
            "num_per_cell_type": (old.get("num_per_cell_type"), result["num_per_cell_type"])}
    for what, (was, now) in same.items():
        if was != now:
            raise SystemExit(f"error: --carry-from {old_path}: its {what} ({was}) differs from this run's ({now})")
    if "real" not in old["rows"] or "real" not in result["rows"]:
        raise SystemExit(f"error: --carry-from {old_path}: both runs need the real row (it checks that the judges "
                         "score alike)")
    check = {}
    for row in (r for r in result["rows"] if r in old["rows"]):
        a, b = old["summary"][row]["overall"], result["summary"][row]["overall"]
        pairs = {k: (a[k]["mean"], b[k]["mean"]) for k in a if k in b and a[k] and b[k]
                 and a[k].get("mean") is not None and b[k].get("mean") is not None}
        worst = max(pairs, key=lambda k: abs(pairs[k][0] - pairs[k][1]), default=None)
        check[row] = {"metrics": len(pairs), "max_abs_diff": abs(pairs[worst][0] - pairs[worst][1]) if worst else None,
                      "worst_metric": worst}
        log(f"--carry-from: row {row} made by both runs: {len(pairs)} overall metrics, max |difference| "
            f"{check[row]['max_abs_diff']} ({worst})")
        if row == "real":
            off = [k for k, (x, y) in pairs.items() if abs(x - y) > 1e-6 + 1e-3 * abs(x)]
            if off:
                raise SystemExit(f"error: --carry-from {old_path}: the real row's overall {off[0]} is "
                                 f"{pairs[off[0]][0]} there and {pairs[off[0]][1]} here: the judges score differently")
    carried = [row for row in old["rows"] if row not in result["rows"]]
    names = dict(zip(old.get("cell_types", []), result["cell_types"]))  # a cell type renamed since (hESCT0 -> hESC)
    for row in carried:
        for key in ("summary", "per_seed", "models", "generation"):
            result[key][row] = renamed(old[key][row], names)
        if row == "cfg" and old.get("cfg_weights"):
            result["cfg_weights"] = renamed(old["cfg_weights"], names)
    result["rows"] = [row for row in order if row in result["rows"] or row in carried]
    fingerprints = {role[:-5]: {"there": (old["oracles"].get(role) or {}).get("fingerprint"),
                                "here": (result["oracles"].get(role) or {}).get("fingerprint")}
                    for role in ("reward_meta", "evaluation_meta")}
    earlier = old.get("carried") or {}  # rows the earlier run had itself carried: their own run's command stays
    result["carried"] = {"from": path.as_posix(), "command": old.get("command"), "rows": carried, "check": check,
                         "oracle_fingerprints": fingerprints,
                         "earlier": {"command": earlier.get("command"), "earlier": earlier.get("earlier"),
                                     "rows": [row for row in earlier.get("rows", []) if row in carried]}
                         if set(earlier.get("rows", [])) & set(carried) else None}
    log(f"--carry-from: rows {', '.join(carried) or '(none)'} carried from {old_path}")
    return result


def renamed(value, names: dict):
    """`value` with every dict key in `names` replaced by its new name (nested dicts and lists)."""
    if isinstance(value, dict):
        return {names.get(k, k): renamed(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v, names) for v in value]
    return value
