"""A fitted k-mer logistic regression as a classifier directory: the DHS evaluation oracle (issue 34 §3).

    save_kmer_classifier(path, pipeline, ks, both_strands, classes, {"role": "evaluation"})
    model = load_kmer_classifier(path, meta)       # KmerLRClassifier; dnadiff.eval.oracle.load_oracle calls it
    probs = model.predict_proba(sequences)         # Float64[N, C], equal to the fitted pipeline's

Layout (a classifier directory as heads/saved.py's, told apart by classifier.json "backbone": "kmer_lr"):
  classifier.json  {"format": "dnadiff-classifier", "backbone": "kmer_lr", "ks", "both_strands",
                    "num_classes", "classes", "num_features", ...info (e.g. "role": "evaluation")}
  classifier.npz   scale (Float64[F]: the StandardScaler's per-feature scale, no centring), coef
                   (Float64[C or 1, F]), intercept (Float64[C or 1]): plain arrays, read with allow_pickle=False
Both files are written to a temporary name and renamed. A k-mer LR has no gradient through a one-hot input,
so heads/saved.load_classifier_dir (guidance, fine-tuning) never builds one: it refuses the directory in one
line (an evaluation oracle with the same message as a neural one); only scoring code loads it, here.

Features (kmer_features): for every k in `ks` the k-mer frequencies of the sequence, counted on both strands
(the sequence and its reverse complement) when `both_strands`, k-mers with a non-A/C/G/T letter skipped, each
k's block normalised to sum 1. The probabilities are scikit-learn's own (the scaler and the logistic
regression rebuilt from the stored arrays, not re-implemented), so the saved model predicts exactly what the
fitted one did. Its embedding for the in-house Fréchet distance (Embedder) is the vector of class scores
(decision function, C values): a linear model's only learned representation of a sequence.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from dnadiff.errors import DnadiffError

BACKBONE = "kmer_lr"  # classifier.json "backbone" of a k-mer LR directory
WEIGHTS = "classifier.npz"
ARRAYS = ("scale", "coef", "intercept")


def kmer_features(seqs: Sequence[str], ks: Sequence[int] = (3, 4, 5, 6), both_strands: bool = True):
    """Sparse CSR Float64[N, sum 4^k]: per-k k-mer frequencies (forward + reverse complement)."""
    from scipy import sparse

    from dnadiff.eval.dna_metrics import encode, kmer_codes
    from dnadiff.tokenizers.dna import complement_codes

    offsets = np.cumsum([0] + [4**k for k in ks])
    rows, cols, vals = [], [], []
    for i, s in enumerate(seqs):
        fwd = encode(s)
        strands = [fwd, complement_codes(fwd)[::-1]] if both_strands else [fwd]
        for b, k in enumerate(ks):
            codes = np.concatenate([kmer_codes(c, k) for c in strands])
            if codes.size == 0:
                continue
            u, n = np.unique(codes, return_counts=True)
            rows.append(np.full(u.size, i))
            cols.append(u + offsets[b])
            vals.append(n / codes.size)
    if not rows:
        return sparse.csr_matrix((len(seqs), int(offsets[-1])))
    return sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(len(seqs), int(offsets[-1])))


class KmerLRClassifier:
    """k-mer features -> StandardScaler(with_mean=False) -> LogisticRegression, from a fitted pipeline or its
    stored arrays. predict_proba / decision_function / embed take sequences (strings)."""

    backbone = BACKBONE

    def __init__(self, pipeline, ks: Sequence[int], both_strands: bool, classes: Sequence[str]):
        self.pipeline, self.ks, self.both_strands = pipeline, [int(k) for k in ks], bool(both_strands)
        self.classes = [str(c) for c in classes]
        self.num_classes = len(self.classes)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], ks, both_strands: bool, classes) -> "KmerLRClassifier":
        """Rebuild the fitted scikit-learn pipeline from its arrays (fitted-state attributes set directly)."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        scale, coef, intercept = (np.asarray(arrays[k], dtype=np.float64) for k in ARRAYS)
        scaler = StandardScaler(with_mean=False)
        scaler.scale_, scaler.var_, scaler.mean_ = scale, scale**2, None
        scaler.n_features_in_, scaler.n_samples_seen_ = scale.shape[0], 0
        lr = LogisticRegression()
        lr.coef_, lr.intercept_ = coef, intercept
        lr.classes_ = np.arange(len(classes))  # labels are class indices in dnadiff finetune
        lr.n_features_in_, lr.n_iter_ = coef.shape[1], np.zeros(1, dtype=np.int32)
        return cls(make_pipeline(scaler, lr), ks, both_strands, classes)

    def arrays(self) -> dict[str, np.ndarray]:
        scaler, lr = self.pipeline[0], self.pipeline[-1]
        scale = scaler.scale_ if scaler.scale_ is not None else np.ones(lr.coef_.shape[1])
        return {"scale": np.asarray(scale, dtype=np.float64), "coef": np.asarray(lr.coef_, dtype=np.float64),
                "intercept": np.asarray(lr.intercept_, dtype=np.float64)}

    def features(self, sequences: Sequence[str]):
        return kmer_features([str(s).upper() for s in sequences], self.ks, self.both_strands)

    def predict_proba(self, sequences: Sequence[str]) -> np.ndarray:
        """Float64[N, C]: class probabilities (scikit-learn's predict_proba)."""
        if len(sequences) == 0:
            return np.zeros((0, self.num_classes))
        return self.pipeline.predict_proba(self.features(sequences))

    def decision_function(self, sequences: Sequence[str]) -> np.ndarray:
        """Float64[N, C] class scores (Float64[N, 1] for two classes, scikit-learn's single margin)."""
        d = self.pipeline.decision_function(self.features(sequences))
        return d.reshape(len(sequences), -1)

    embed = decision_function  # the Fréchet embedding (module docstring)

    def eval(self) -> "KmerLRClassifier":  # the torch classifiers' call, a no-op here
        return self


def save_kmer_classifier(path: str | os.PathLike, model: KmerLRClassifier, info: dict[str, Any] | None = None) -> Path:
    """Write `model` to directory `path` (classifier.npz, then classifier.json; each atomically)."""
    from dnadiff.heads.saved import FORMAT
    from dnadiff.utils import atomic_write  # local: tests monkeypatch dnadiff.utils.atomic_write

    arrays = model.arrays()
    meta = {"format": FORMAT, "backbone": BACKBONE, "ks": model.ks, "both_strands": model.both_strands,
            "num_classes": model.num_classes, "classes": model.classes,
            "num_features": int(arrays["coef"].shape[1]), **(info or {})}
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write(out / WEIGHTS, buf.getvalue())
    atomic_write(out / "classifier.json", json.dumps(meta, indent=2, default=str) + "\n")
    return out


def load_kmer_classifier(path: str | os.PathLike, meta: dict | None = None) -> KmerLRClassifier:
    """A KmerLRClassifier from a directory written by save_kmer_classifier (`meta`: its classifier.json, read)."""
    folder = Path(path)
    if meta is None:
        try:
            meta = json.loads((folder / "classifier.json").read_text())
        except FileNotFoundError:
            raise DnadiffError(f"{path}: not a classifier directory (no classifier.json)") from None
        except json.JSONDecodeError as exc:
            raise DnadiffError(f"{folder / 'classifier.json'}: invalid JSON ({exc.msg})") from None
    where = folder / "classifier.json"
    try:
        ks = [int(k) for k in meta["ks"]]
        both, classes = bool(meta["both_strands"]), [str(c) for c in meta["classes"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise DnadiffError(f"{where}: a k-mer LR classifier needs ks, both_strands and classes ({exc!r})") from None
    weights = folder / WEIGHTS
    if not weights.is_file():
        raise DnadiffError(f"{path}: not a k-mer LR classifier directory (needs classifier.json and {WEIGHTS})")
    try:
        with np.load(weights, allow_pickle=False) as z:
            missing = [k for k in ARRAYS if k not in z.files]
            if missing:
                raise DnadiffError(f"{weights}: missing array(s) {', '.join(missing)}")
            arrays = {k: z[k] for k in ARRAYS}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DnadiffError(f"{weights}: unreadable ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})") from None
    n_feat = int(sum(4**k for k in ks))
    rows = 1 if len(classes) == 2 else len(classes)
    if (arrays["scale"].shape != (n_feat,) or arrays["coef"].shape != (rows, n_feat)
            or arrays["intercept"].shape != (rows,)):
        raise DnadiffError(f"{weights}: arrays of shapes {[arrays[k].shape for k in ARRAYS]} do not match "
                           f"{where.name} (ks {ks}: {n_feat} features, {len(classes)} classes)")
    return KmerLRClassifier.from_arrays(arrays, ks, both, classes)


__all__ = ["BACKBONE", "KmerLRClassifier", "kmer_features", "load_kmer_classifier", "save_kmer_classifier"]
