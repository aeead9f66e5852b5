"""A tiny untrained DNA model directory for command-line tests (no training: about a second)."""

from __future__ import annotations

from pathlib import Path

import torch

TINY_CONFIG = "experiments/tiny_dna_mdlm"


def tiny_model_dir(folder: Path, seq_len: int = 32, overrides: list[str] | tuple[str, ...] = (),
                   base: str | None = TINY_CONFIG, metrics: dict | None = None) -> str:
    """FOLDER/model: the `base` config (None: the defaults) with `overrides`, seeded fresh weights.
    `metrics` defaults to {"steps": 0}."""
    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import DNATokenizer

    torch.manual_seed(0)
    cfg = load_config(RunConfig, base, [f"data.seq_len={seq_len}", f"sample.length={seq_len}", *overrides])
    tok = DNATokenizer()
    backbone = build_backbone(cfg.model.backbone, preset=cfg.model.preset, vocab_size=tok.vocab_size,
                              **cfg.model.overrides)
    return str(save_model_dir(folder / "model", cfg, backbone, tok, {"steps": 0} if metrics is None else metrics))
