"""The models pipelines/sample_quality.py samples from (also used by few_step.py and infill.py): the Markov chains
fitted on the train split, the cpu-hour networks trained or found in a models folder, and where a linked one lies."""

from __future__ import annotations

import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


TRAINED = {"mamba_ar": "experiments/cpu_hour_mamba_ar", "caduceus_mdlm": "experiments/cpu_hour_caduceus_mdlm"}


def linked_to(path: str) -> str:
    """' (→ TARGET)' when PATH goes through a symbolic link (a --models-dir of links to other runs' models), the
    target relative to the repository where it lies inside it, so a reader of the table knows which model it was."""
    real = Path(path).resolve()
    if real == Path(os.path.abspath(path)):
        return ""
    return f" (→ {os.path.relpath(real, REPO) if real.is_relative_to(REPO) else real})"


def find_model(root: Path | None, name: str) -> str | None:
    """root/NAME/model or root/NAME, the first that is a model directory (a run directory also holds a
    config.yaml: weights must sit beside it)."""
    if root is None:
        return None
    for p in (root / name / "model", root / name):
        if (p / "config.json").is_file() or ((p / "config.yaml").is_file() and any(p.glob("*.safetensors"))):
            return str(p)
    return None


def fit_markov(out: Path, data_over: list[str], order: int, max_order: int, name: str) -> str:
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.training import train

    over = [f"name={name}", f"out_dir={out}", f"model.overrides.order={order}",
            f"model.overrides.max_order={max_order}",
            *data_over]
    return str(train(load_config(RunConfig, "experiments/tiny_dna_markov", over), overwrite=True).model_dir)


def train_model(out: Path, key: str, data_over: list[str], minutes: float, dry: bool, config: str | None = None,
                extra: tuple[str, ...] = ()) -> str:
    """Train model `key` (config TRAINED[key], or `config` with `extra` overrides) for at most `minutes`; a dry
    run: two steps of a tiny network."""
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.training import train

    over = [f"name={key}", f"out_dir={out}", *data_over, f"train.max_minutes={minutes:g}", *extra]
    if dry:
        over += ["train.max_steps=2", "train.batch_size=2", "train.val_batches=1", "train.warmup_steps=1",
                 "model.overrides.d_model=16", "model.overrides.scan_impl=chunked", "train.threads=1"]
    return str(train(load_config(RunConfig, config or TRAINED[key], over), overwrite=True).model_dir)


MDLM_SAMPLERS = [("MDLM ancestral", "ancestral", []), ("MDLM cached", "cached", []),
                 ("MDLM first-hitting", "first_hitting", []), ("MDLM ReMDM", "remdm", []),
                 ("MDLM + RC-symmetric (ancestral)", "ancestral", ["--rc-symmetric"]),
                 # issue 33's fix: windows of the length the model was trained on (results/mdlm_diagnosis.md),
                 # --steps per window, each later window keeping half a window of context
                 ("MDLM semi-AR (trained window)", "semi_ar", ["--trained-window"]),
                 # the same windows, each window's new tokens decoded left to right (inner sampler `ordered`): the
                 # exact left-to-right distribution of the network (results/mdlm_orders.md)
                 ("MDLM semi-AR left-to-right (trained window)", "semi_ar", ["--trained-window", "--left-to-right"]),
                 # and with the strand-averaged denoiser: for a model that is not RC-equivariant (an AR-adapted
                 # Caduceus-PH) each base's prediction averages the two strands' (issue 33's sampling recipe)
                 ("MDLM semi-AR left-to-right + RC-symmetric (trained window)", "semi_ar",
                  ["--trained-window", "--left-to-right", "--rc-symmetric"]),
                 # ... with three quarters of each window as context (stride a quarter window): the same calls per base
                 ("MDLM semi-AR left-to-right + RC-symmetric + quarter stride (trained window)", "semi_ar",
                  ["--trained-window", "--left-to-right", "--rc-symmetric", "--quarter-stride"])]


def prepare_models(work: Path, data_over: list[str], size: dict, models_dir: Path | None, minutes: float,
                   dry: bool, echo, keys=TRAINED) -> tuple[dict, list[str], int, int]:
    """The Markov fits, then the neural models of `keys` (given, or trained with an explicit budget): the models
    by key, a note per neural model, the Markov rows' k and the best k on valid."""
    models, notes = {}, []
    k5 = min(5, size["max_order"])
    models["markov5"] = fit_markov(work / "models", data_over, k5, size["max_order"], "markov_k5")
    models["markov_best"] = fit_markov(work / "models", data_over, -1, size["max_order"], "markov_best")
    best_k = json.loads((Path(models["markov_best"]) / "metrics.json").read_text()).get("order")
    echo(f"Markov chains fitted (best k on valid = {best_k})")
    for key in keys:
        found = find_model(models_dir, key)
        if found is None:
            # the config's own window length (128 bp) unless the samples are shorter: 1,024-bp training
            # windows would cost 8x the tokens a step
            over = data_over if size["length"] < 128 else [o for o in data_over if not o.startswith("data.seq_len=")]
            found = train_model(work / "models", key, over, minutes, dry)
            notes.append(f"{key}: trained here for at most {minutes:g} min (cpu-hour config, train.max_minutes)")
        else:
            notes.append(f"{key}: {found}{linked_to(found)}")
        models[key] = found
    return models, notes, k5, best_k


BD3_ROWS = {"bd3lm4": "BD3 B=4", "bd3lm16": "BD3 B=16", "bd3lm64": "BD3 B=64",
            "bd3lm16_from_ar": "BD3 B=16 (from the AR)"}  # pipelines/block_diffusion.py's rows


def sample_rows(models: dict, k5: int, best_k: int, cpu_hour_dir: str | None,
                mdlm_rows: list[str] | None = None, bd3_dir: str | None = None) -> list[tuple]:
    """(name, model directory or None for real windows, sampler, extra options) of every row."""
    cpu_hour = {k: find_model(Path(cpu_hour_dir), k) for k in TRAINED} if cpu_hour_dir else {}
    rows = [("real test windows (floor: test vs valid)", None, None, []),
            # what every model here was fitted to: the train split's own distance from the valid reference
            ("real train windows (the training data vs valid)", None, None, ["--train-split"]),
            (f"Markov k={k5}", models["markov5"], None, []),
            (f"Markov best k (k={best_k})", models["markov_best"], None, []),
            ("Mamba AR", models["mamba_ar"], None, [])]
    rows += [(name, models["caduceus_mdlm"], sampler, extra) for name, sampler, extra in MDLM_SAMPLERS
             if mdlm_rows is None or name in mdlm_rows]  # no MDLM row: no MDLM model needed (prepare_models)
    if cpu_hour.get("mamba_ar"):
        rows.append(("cpu-hour Mamba AR", cpu_hour["mamba_ar"], None, []))
    if cpu_hour.get("caduceus_mdlm"):
        rows.append(("cpu-hour MDLM ancestral", cpu_hour["caduceus_mdlm"], "ancestral", []))
        rows.append(("cpu-hour MDLM semi-AR (trained window)", cpu_hour["caduceus_mdlm"], "semi_ar",
                     ["--trained-window"]))
    for key, name in BD3_ROWS.items():  # block diffusion: the model's own `block` sampler, block after block
        found = find_model(Path(bd3_dir), key) if bd3_dir else None
        if found:
            rows.append((f"{name} (cpu-hour)", found, None, []))
            if key == "bd3lm4":  # its config decodes a block of 4 in 4 calls (one per base): also 2 per block
                rows.append((f"{name} 2-step blocks (cpu-hour)", found, None, ["--steps=2"]))
                # the inner sampler first_hitting: one base per call at its exact reveal time, where the
                # config's ancestral inner can reveal several in one call (the same 4 calls per block)
                rows.append((f"{name} first-hitting inner (cpu-hour)", found, None, ["--inner=first_hitting"]))
    return rows
