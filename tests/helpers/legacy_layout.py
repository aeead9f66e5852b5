"""Turn a model directory into the layout of older dnadiff versions (config.yaml, no config.json)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml


def to_legacy_layout(model_dir) -> Path:
    """Rewrite model_dir/config.json as the config.yaml older versions wrote; returns its path."""
    model_dir = Path(model_dir)
    data = json.loads((model_dir / "config.json").read_text())
    for marker in ("model_type", "dnadiff_version"):
        data.pop(marker)
    (model_dir / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (model_dir / "config.json").unlink()
    return model_dir / "config.yaml"
