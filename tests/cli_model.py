"""A tiny untrained DNA model directory for command-line tests (no training: about a second)."""

from __future__ import annotations

from pathlib import Path

import torch


def tiny_model_dir(folder: Path, seq_len: int = 32) -> str:
    from dnadiff.backbones import build_backbone
    from dnadiff.checkpoint import save_model_dir
    from dnadiff.config import RunConfig, load_config
    from dnadiff.tokenizers import DNATokenizer

    torch.manual_seed(0)
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"data.seq_len={seq_len}", f"sample.length={seq_len}"])
    tok = DNATokenizer()
    backbone = build_backbone(cfg.model.backbone, preset=cfg.model.preset, vocab_size=tok.vocab_size,
                              **cfg.model.overrides)
    return str(save_model_dir(folder / "model", cfg, backbone, tok, {"steps": 0}))
