"""Scoring sequences with an oracle classifier: the DHS benchmark's evaluation oracle (issue 34 §3-§4).

    model, meta = load_oracle("runs/dhs_oracles/eval_oracle")          # role: evaluation is allowed here
    probs = predict_proba(model, sequences)                             # Float64[N, C]
    table = accuracy_table(probs, labels, meta["classes"])              # real sequences with known labels
    report = score_fasta("samples.fasta", "runs/dhs_oracles/eval_oracle", target="HepG2")

The DRAKES protocol (Wang et al., ICLR 2025, arXiv 2410.13643; its DNA benchmark judges designs with an
oracle trained on held-out data): a generator is steered or fine-tuned with a *reward* classifier and
judged by an *evaluation* oracle of another kind trained on other data, so that success measured by the
oracle is not the reward model's own blind spots. The target-cell-type rate of a set of
generated sequences is the share the oracle assigns to the cell type they were generated for
(argmax of its class probabilities, both strands averaged as the classifier was trained); its accuracy
on real test sequences is the ceiling those rates are compared with.

Only scoring reads an evaluation oracle: `load_oracle` passes allow_evaluation=True to
heads/saved.load_classifier_dir, whose default (every guidance and fine-tuning path, `--reward
classifier:DIR`) refuses a directory marked `role: evaluation`.
"""

from __future__ import annotations

import os
import re
from typing import Sequence

import numpy as np
import torch

from dnadiff.errors import DnadiffError

CLASS_FIELD = re.compile(r"(?:^|\s)class=(\S+)")  # `dnadiff sample` headers: ">sample_0 class=HepG2 ..."


def load_oracle(path: str | os.PathLike, device: str | torch.device = "cpu"):
    """(SequenceClassifier in eval mode, metadata) of a classifier directory, evaluation oracles included; a
    k-mer LR directory (classifier.json backbone kmer_lr) gives a KmerLRClassifier (eval/kmer_oracle.py), a
    conv_judge directory a ConvJudge (eval/conv_judge.py: the DHS neural evaluation oracle)."""
    import json
    from pathlib import Path

    from dnadiff.eval.conv_judge import BACKBONE as JUDGE
    from dnadiff.eval.conv_judge import load_judge
    from dnadiff.eval.kmer_oracle import BACKBONE, load_kmer_classifier
    from dnadiff.heads.saved import load_classifier_dir

    meta_path = Path(path) / "classifier.json"
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError:
            meta = None  # load_classifier_dir says what is wrong with it
        if isinstance(meta, dict) and meta.get("backbone") == BACKBONE:
            load_classifier_dir(path, allow_evaluation=True, kmer_lr_ok=True)  # the same format and role checks
            return load_kmer_classifier(path, meta), meta
        if isinstance(meta, dict) and meta.get("backbone") == JUDGE:
            load_classifier_dir(path, allow_evaluation=True, kmer_lr_ok=True)  # the same format and role checks
            return load_judge(path, meta)
    return load_classifier_dir(path, map_location=device, allow_evaluation=True)


@torch.no_grad()
def predict_proba(model, sequences: Sequence[str], batch_size: int = 256) -> np.ndarray:
    """Float64[N, C]: the classifier's class probabilities of each sequence (upper-case A/C/G/T/N; sequences
    of different lengths are right-padded with attention_mask 0, as in `dnadiff finetune`)."""
    from dnadiff.eval.conv_judge import ConvJudge
    from dnadiff.eval.kmer_oracle import KmerLRClassifier
    from dnadiff.tokenizers.dna import DNATokenizer

    if batch_size < 1:
        raise DnadiffError(f"batch_size must be >= 1, got {batch_size}")
    if isinstance(model, (KmerLRClassifier, ConvJudge)):  # scikit-learn's / the one-hot judge's own probabilities
        return model.predict_proba([str(s).upper() for s in sequences])
    tok = DNATokenizer()
    device = next(model.parameters()).device
    out = []
    for i in range(0, len(sequences), batch_size):
        chunk = sequences[i : i + batch_size]
        length = max(len(s) for s in chunk)
        ids = torch.full((len(chunk), length), tok.pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), length), dtype=torch.long)
        for r, s in enumerate(chunk):
            ids[r, : len(s)] = torch.from_numpy(tok.encode_array(s, where=f"sequence {i + r}").astype(np.int64))
            mask[r, : len(s)] = 1
        logits = model(ids.to(device), mask.to(device)).double()
        out.append(logits.softmax(-1).cpu().numpy())
    if not out:
        return np.zeros((0, int(getattr(model, "num_classes", 0))))
    return np.concatenate(out)


def accuracy_table(probs: np.ndarray, labels: Sequence[int], classes: Sequence[str]) -> dict:
    """4-way (C-way) accuracy, per-class accuracy (recall: the share of each true class predicted as
    itself), the confusion matrix (rows: true, columns: predicted) and the counts."""
    labels = np.asarray(labels, dtype=np.int64)
    if probs.shape != (len(labels), len(classes)):
        raise DnadiffError(f"probabilities of shape {probs.shape} for {len(labels)} labels and {len(classes)} classes")
    pred = probs.argmax(axis=1)
    confusion = np.zeros((len(classes), len(classes)), dtype=np.int64)
    np.add.at(confusion, (labels, pred), 1)
    per_class = {c: (float(confusion[k, k] / confusion[k].sum()) if confusion[k].sum() else None)
                 for k, c in enumerate(classes)}
    return {"n": int(len(labels)), "accuracy": float((pred == labels).mean()) if len(labels) else None,
            "per_class": per_class, "counts": {c: int(confusion[k].sum()) for k, c in enumerate(classes)},
            "confusion": confusion.tolist(), "classes": list(classes)}


def target_rate(probs: np.ndarray, targets: Sequence[int], classes: Sequence[str]) -> dict:
    """The target-cell-type rate: the share of sequences the oracle assigns (argmax) to their target class,
    overall and per target class, with the mean probability of the target and the predicted classes."""
    targets = np.asarray(targets, dtype=np.int64)
    pred = probs.argmax(axis=1)
    hit = pred == targets
    p_target = probs[np.arange(len(targets)), targets] if len(targets) else np.zeros(0)
    per = {}
    for k, c in enumerate(classes):
        rows = targets == k
        if rows.any():
            per[c] = {"n": int(rows.sum()), "rate": float(hit[rows].mean()),
                      "mean_p_target": float(p_target[rows].mean()),
                      "predicted": {c2: int((pred[rows] == k2).sum()) for k2, c2 in enumerate(classes)}}
    return {"n": int(len(targets)), "rate": float(hit.mean()) if len(targets) else None,
            "mean_p_target": float(p_target.mean()) if len(targets) else None, "per_class": per}


def fasta_targets(headers: Sequence[str], target: str | None, classes: Sequence[str], where: str) -> list[int]:
    """Class index of each record: `target` for all of them, else each header's class=NAME."""
    from dnadiff.data.class_names import class_position, known_names

    def index(name: str, what: str) -> int:
        position = class_position(name, classes)  # a spelling or its alias (hESC / hESCT0)
        if position is None:
            raise DnadiffError(f"{what}: {name!r} is not one of the oracle's classes {known_names(classes)}")
        return position

    if target is not None:
        return [index(target, "target")] * len(headers)
    out = []
    for h in headers:
        found = CLASS_FIELD.search(h)
        if not found:
            raise DnadiffError(f"{where}: record {h.split()[0] if h else '?'!r} has no class=NAME in its header; "
                               "give the target cell type")
        out.append(index(found.group(1), f"{where}: record {h.split()[0]!r} class"))
    return out


def score_fasta(fasta: str | os.PathLike, oracle: str | os.PathLike, target: str | None = None,
                batch_size: int = 256, model_and_meta=None) -> dict:
    """Target-cell-type rate of the sequences in `fasta` under the classifier directory `oracle`.
    target: the cell type every record was generated for; None: each header's class=NAME.
    model_and_meta: an already loaded (model, meta) of `oracle` (several FASTA files, one load)."""
    from dnadiff.data.records import read_fasta

    model, meta = model_and_meta or load_oracle(oracle)
    classes = [str(c) for c in meta.get("classes", [])]
    records = read_fasta(fasta, full_headers=True)
    targets = fasta_targets([h for h, _ in records], target, classes, str(fasta))
    probs = predict_proba(model, [s for _, s in records], batch_size)
    return {"fasta": str(fasta), "oracle": str(oracle), "oracle_role": meta.get("role"),
            "oracle_backbone": meta.get("backbone"), "classes": classes, **target_rate(probs, targets, classes)}


__all__ = ["accuracy_table", "fasta_targets", "load_oracle", "predict_proba", "score_fasta", "target_rate"]
