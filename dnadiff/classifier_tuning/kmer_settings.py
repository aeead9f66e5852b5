"""The options of the k-mer LR baseline row (`model.backbone: kmer_lr` in a finetune config): it is no
backbone, so `load_finetune_config` checks its `model.overrides` here instead of against BACKBONES."""

from __future__ import annotations

from typing import Any

from dnadiff.errors import DnadiffError

DEFAULTS = {"ks": [3, 4, 5, 6], "c_grid": [1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0], "both_strands": True, "max_iter": 2000}


def kmer_options(overrides: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(overrides) - set(DEFAULTS))
    if unknown:
        raise DnadiffError(f"model.overrides: unknown k-mer LR option(s) {', '.join(unknown)} "
                           f"(known: {', '.join(DEFAULTS)})")
    opts = {**DEFAULTS, **overrides}
    ks = [int(k) for k in opts["ks"]]
    if not ks or any(not 1 <= k <= 8 for k in ks):
        raise DnadiffError(f"model.overrides.ks: k-mer sizes must be in 1..8, got {opts['ks']}")
    if not opts["c_grid"] or any(float(c) <= 0 for c in opts["c_grid"]):
        raise DnadiffError(f"model.overrides.c_grid: needs positive C values, got {opts['c_grid']}")
    return {"ks": ks, "c_grid": [float(c) for c in opts["c_grid"]], "both_strands": bool(opts["both_strands"]),
            "max_iter": int(opts["max_iter"])}


def check_kmer_model(model: Any) -> bool:
    """config_options.check_options' `check_model`: True (checked here) when `model` is the k-mer LR row."""
    if getattr(model, "backbone", None) != "kmer_lr":
        return False
    kmer_options(dict(model.overrides))  # a typo fails at load time, listing the known options
    return True
