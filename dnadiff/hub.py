"""Hugging Face Hub: load a model by its Hub id from the local cache, and publish a model directory.

    model = dnadiff.load("org/name")            # the local HF cache only (no network)
    model = dnadiff.load("org/name", local_files_only=False)   # download when missing
    model.push_to_hub("org/name")               # config.json + model.safetensors (+ tokenizer/) + README.md

A dnadiff model directory already is a Hub model folder (config.json with `model_type: dnadiff`,
model.safetensors), so publishing uploads the folder as written by `save_model_dir`, plus a
model card naming the library. Cache lookups go through `huggingface_hub.snapshot_download`, which
honours HF_HOME / HF_HUB_CACHE like every other Hugging Face library.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from dnadiff.errors import DnadiffError

# "org/name" as the Hub spells repository ids (no leading dot or dash, one slash)
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


def looks_like_repo_id(name: str) -> bool:
    return bool(_REPO_ID.match(name)) and ".." not in name


def resolve_model_path(path_or_id: str | os.PathLike, local_files_only: bool = True, revision: str | None = None,
                       cache_dir: str | os.PathLike | None = None) -> Path:
    """A local path as given; a Hub id "org/name" that is not a local path -> its snapshot folder in the
    Hugging Face cache (downloaded first only when `local_files_only` is False)."""
    path = Path(path_or_id)
    name = str(path_or_id)
    if path.exists() or not looks_like_repo_id(name):
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = snapshot_download(name, revision=revision, cache_dir=cache_dir, local_files_only=local_files_only)
    except LocalEntryNotFoundError:
        raise DnadiffError(
            f"{name}: no such local directory, and not in the Hugging Face cache; download it with "
            f"`hf download {name}` or dnadiff.load({name!r}, local_files_only=False)") from None
    except Exception as exc:  # network, auth, unknown repository: one line, no Hub traceback
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise DnadiffError(f"{name}: could not get it from the Hugging Face Hub ({first})") from None
    return Path(folder)


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
    from dnadiff.checkpoint import is_model_dir, load_config_of, read_metrics

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
            if not (Path(model_or_dir) / "config.json").is_file():  # an old config.yaml directory: rewrite it
                from dnadiff.checkpoint import load_model_dir

                load_model_dir(model_or_dir).save_pretrained(stage)
            else:
                shutil.copytree(model_or_dir, stage)
        else:
            model_or_dir.save_pretrained(stage)
        if not (stage / "README.md").is_file():
            (stage / "README.md").write_text(model_card(load_config_of(stage), read_metrics(stage), repo_id))
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        return api.upload_folder(repo_id=repo_id, folder_path=str(stage), repo_type="model", revision=revision,
                                 commit_message=commit_message or "Upload dnadiff model")
