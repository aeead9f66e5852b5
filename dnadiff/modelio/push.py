"""Pushing a dnadiff model to the Hugging Face Hub: stage the model directory, add a model card, upload.

    model.push_to_hub("org/name")          # or push_to_hub(model_dir_or_model, "org/name")

(Resolving a Hub id to a local folder, which loading needs, is modelio/hub.py.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from dnadiff.errors import DnadiffError
from dnadiff.modelio.hub import looks_like_repo_id
from dnadiff.modelio.model_dir import (
    CONFIG_FILE,
    LEGACY_CONFIG_FILE,
    config_json,
    is_model_dir,
    load_config_of,
    portable_config,
    read_metrics,
    save,
)
from dnadiff.utils import write_json


def model_card(config: Any, metrics: dict[str, Any], repo_id: str) -> str:
    """README.md for the Hub: `library_name: dnadiff` metadata, how to load, the recorded metrics."""
    lines = ["---", "library_name: dnadiff", "tags:", "- dnadiff", "- masked-diffusion",
             f"- {config.model.backbone}", f"- {config.objective.name}", "---", "",
             f"# {repo_id}", "",
             f"A dnadiff model: `{config.model.backbone}` backbone, `{config.objective.name}` objective, "
             f"`{config.tokenizer.kind}` tokenizer.", "",
             "```python", "import dnadiff", "", f'model = dnadiff.load("{repo_id}")',
             "x = model.generate(num=4, length=256)", "```", ""]
    if metrics:
        lines += ["## Metrics", "", "| metric | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in metrics.items() if isinstance(v, (int, float, str))]
        lines.append("")
    return "\n".join(lines)


def push_to_hub(model_or_dir: Any, repo_id: str, *, private: bool | None = None, token: str | None = None,
                commit_message: str | None = None, revision: str | None = None, api: Any = None):
    """Upload a dnadiff model (a loaded model, or a model directory) to the Hub repository `repo_id`,
    creating the repository when needed. The folder is staged in a temporary directory (a README.md
    model card is added when there is none); returns the Hub's CommitInfo."""
    if not looks_like_repo_id(repo_id):
        raise DnadiffError(f"{repo_id!r}: not a Hub repository id (org/name)")
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="dnadiff-push-") as tmp:
        stage = Path(tmp) / "model"
        if isinstance(model_or_dir, (str, os.PathLike)):
            if not is_model_dir(model_or_dir):
                raise DnadiffError(f"{model_or_dir}: not a dnadiff model directory")
            # config.json written again: an old config.yaml directory gets one, and one written before
            # portable_config loses its paths of this machine (the data root, absolute data paths)
            legacy = not (Path(model_or_dir) / CONFIG_FILE).is_file()
            shutil.copytree(model_or_dir, stage, ignore=shutil.ignore_patterns(LEGACY_CONFIG_FILE) if legacy else None)
            write_json(stage / CONFIG_FILE, config_json(portable_config(load_config_of(model_or_dir))))
        else:
            save(model_or_dir, stage)
        if not (stage / "README.md").is_file():
            (stage / "README.md").write_text(model_card(load_config_of(stage), read_metrics(stage), repo_id))
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        return api.upload_folder(repo_id=repo_id, folder_path=str(stage), repo_type="model", revision=revision,
                                 commit_message=commit_message or "Upload dnadiff model")
