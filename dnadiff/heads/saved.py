"""A fine-tuned classifier as a loadable directory (what `dnadiff finetune` keeps of its best run).

    save_classifier_dir(path, classifier, classes, info)      # classifier.json + classifier.pt
    model, meta = load_classifier_dir(path)                   # SequenceClassifier in eval mode

Layout (no Lightning, no run config needed to load):
  classifier.json  {"format": "dnadiff-classifier", "backbone": registry name, "backbone_config": {...},
                    "num_classes", "classes", "pooling", "conjoin", "noisy", ...info}
                   info may hold "role": "reward" | "evaluation" (finetune's model.role). An evaluation
                   oracle only scores: load_classifier_dir refuses it unless the caller scores
                   (allow_evaluation=True), so nothing that generates or guides reads it by accident.
  classifier.pt    the SequenceClassifier state_dict (best-validation weights)
A k-mer LR directory (backbone "kmer_lr", classifier.npz instead of classifier.pt; dnadiff/eval/kmer_oracle.py)
is refused here after the role check: it is no torch module, so only scoring code (eval/oracle.py) loads it;
so is a one-hot convolutional judge (backbone "conv_judge", dnadiff/eval/conv_judge.py: the DHS neural oracle).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from pathlib import Path
from typing import Any

import torch

from dnadiff.backbones import BACKBONES, build_backbone_from_config
from dnadiff.errors import DnadiffError
from dnadiff.heads.classifier import SequenceClassifier

FORMAT = "dnadiff-classifier"
ROLES = ("reward", "evaluation")  # classifier.json "role" (absent: unmarked, usable as a reward)
EVALUATION = "evaluation"
KMER_LR = "kmer_lr"  # classifier.json backbone of a k-mer LR directory (dnadiff/eval/kmer_oracle.py)
CONV_JUDGE = "conv_judge"  # ... of a one-hot convolutional judge (dnadiff/eval/conv_judge.py), scoring only


def save_classifier_dir(
    path: str | os.PathLike, classifier, classes: list[str], info: dict[str, Any] | None = None
) -> Path:
    """Write `classifier` (a SequenceClassifier) to directory `path` atomically per file."""
    from dnadiff.utils import atomic_write  # local: tests monkeypatch dnadiff.utils.atomic_write

    backbone = classifier.backbone
    name = BACKBONES.name_of(backbone)
    if name is None:
        raise DnadiffError(f"cannot save a classifier over an unregistered backbone {type(backbone).__name__}")
    meta = {
        "format": FORMAT, "backbone": name, "backbone_config": dataclasses.asdict(backbone.config),
        "num_classes": int(classifier.num_classes), "classes": list(classes), "pooling": classifier.pooling,
        "conjoin": classifier.conjoin, "noisy": False, **(info or {}),
    }
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in classifier.state_dict().items()}, buf)
    atomic_write(out / "classifier.pt", buf.getvalue())
    atomic_write(out / "classifier.json", json.dumps(meta, indent=2, default=str) + "\n")
    return out


def load_classifier_dir(path: str | os.PathLike, map_location: str | torch.device = "cpu",
                        allow_evaluation: bool = False, kmer_lr_ok: bool = False):
    """(SequenceClassifier in eval mode, metadata dict) from a directory written by save_classifier_dir.
    A directory marked `role: evaluation` (an evaluation oracle) is refused in one line unless
    `allow_evaluation` (callers that only score: `dnadiff eval --classifier`, dnadiff/eval/oracle.py).
    A k-mer LR or conv_judge directory is refused after those checks; kmer_lr_ok=True (eval/oracle.py, which
    loads it itself) returns (None, metadata) for it instead."""
    folder = Path(path)
    meta_path, weights = folder / "classifier.json", folder / "classifier.pt"
    if not folder.is_dir():
        raise DnadiffError(f"{path}: no such classifier directory")
    if not meta_path.is_file():
        raise DnadiffError(f"{path}: not a classifier directory (needs classifier.json and classifier.pt; "
                           "`dnadiff finetune` writes one as OUT/classifier)")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise DnadiffError(f"{meta_path}: invalid JSON ({exc.msg})") from None
    if not isinstance(meta, dict):
        raise DnadiffError(f"{meta_path}: expected a JSON object")
    if meta.get("format") != FORMAT:
        raise DnadiffError(f"{meta_path}: format is {meta.get('format')!r}, expected {FORMAT!r}")
    role = meta.get("role")
    if role is not None and role not in ROLES:
        raise DnadiffError(f"{meta_path}: role is {role!r}, expected one of {', '.join(ROLES)}")
    if role == EVALUATION and not allow_evaluation:
        raise DnadiffError(f"{path}: an evaluation oracle (classifier.json role: evaluation) only scores; guidance "
                           "and fine-tuning may not read it (give the reward classifier)")
    if meta.get("backbone") == KMER_LR and kmer_lr_ok:
        return None, meta
    if meta.get("backbone") == KMER_LR:  # dnadiff/eval/kmer_oracle.py: no torch module, nothing to differentiate
        raise DnadiffError(f"{path}: a k-mer LR classifier (classifier.json backbone: kmer_lr) only scores "
                           "(dnadiff.eval.oracle.load_oracle); guidance and fine-tuning need a neural classifier")
    if meta.get("backbone") == CONV_JUDGE and kmer_lr_ok:
        return None, meta
    if meta.get("backbone") == CONV_JUDGE:  # dnadiff/eval/conv_judge.py: reads one-hot, not the tokenizer's ids
        raise DnadiffError(f"{path}: a conv_judge classifier (classifier.json backbone: conv_judge) only scores "
                           "(dnadiff.eval.oracle.load_oracle); guidance and fine-tuning read a `dnadiff finetune` "
                           "classifier")
    if not weights.is_file():
        raise DnadiffError(f"{path}: not a classifier directory (needs classifier.json and classifier.pt; "
                           "`dnadiff finetune` writes one as OUT/classifier)")
    backbone = build_backbone_from_config(meta["backbone"], dict(meta["backbone_config"]))
    model = SequenceClassifier(backbone, int(meta["num_classes"]), pooling=meta["pooling"], conjoin=meta["conjoin"])
    try:  # weights_only: a file holding anything but tensors and containers (a pickle can run code) is refused
        state = torch.load(weights, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch's own text suggests weights_only=False, the one thing never to do here
        raise DnadiffError(f"{weights}: not a weights-only torch file (refusing to unpickle it: pickles can run "
                           f"code; {type(exc).__name__}); save the classifier with `dnadiff finetune`") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise DnadiffError(f"{weights}: expected a state dict of tensors")
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise DnadiffError(f"{weights}: does not match {meta_path.name} ({str(exc).splitlines()[0][:150]})") from None
    return model.to(map_location).eval(), meta


__all__ = ["EVALUATION", "FORMAT", "ROLES", "load_classifier_dir", "save_classifier_dir"]
