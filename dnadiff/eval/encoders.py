"""Samples through a trained dnadiff classifier: an in-house Fréchet distance, and held-out accuracy.

    from dnadiff.heads.saved import load_classifier_dir
    model, meta = load_classifier_dir("runs/ft/classifier")
    emb = Embedder(model)
    res = frechet_metric(emb, samples, reference)             # {"distance", ...}
    acc = classifier_accuracy(model, meta["classes"], samples, ["promoter"] * len(samples))

Fréchet distance between Gaussians fitted to two embedding sets (the FID of Heusel et al. 2017; the DFM
"FBD" and the "SFID" of DNA generation papers use the same formula with their own published encoders):
    d² = ||μ1 − μ2||² + Tr(Σ1 + Σ2 − 2 (Σ1 Σ2)^{1/2}),
with Tr (Σ1 Σ2)^{1/2} = Tr (Σ1^{1/2} Σ2 Σ1^{1/2})^{1/2}, the trace of the square root of a symmetric PSD
matrix (sum of the square roots of its eigenvalues), which stays real and stable when the covariances are
singular (fewer sequences than dimensions). Means and covariances are the sample ones (ddof = 1).
The embedding is the classifier's own pooled backbone feature vector (the input of its linear head;
averaged over the strands when the classifier conjoins them), or, for a generative model directory, the
mean over real positions of its backbone features on the clean sequence (BackboneEncoder: t = 0, no class
label). It is an in-house encoder: its distances are comparable between runs that use the same directory,
never with published SFID/FBD values.

Held-out classifier accuracy on class-conditional samples (the UDLM protocol, Schiff et al. 2024): the
share of samples generated for class c that the classifier assigns to c, beside the mean p(c | x).
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from dnadiff.denoiser import capabilities_of
from dnadiff.errors import DnadiffError
from dnadiff.logs import log, progress_bar
from dnadiff.tokenizers.dna import DNATokenizer

NOT_COMPARABLE = ("in-house Fréchet distance under a dnadiff classifier's pooled features; "
                  "not comparable with published SFID/FBD numbers")


# ---- the Fréchet distance -----------------------------------------------------------------------------
def _psd_sqrt(a: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh((a + a.T) / 2)
    return (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T


def frechet_distance(mu1: np.ndarray, cov1: np.ndarray, mu2: np.ndarray, cov2: np.ndarray) -> float:
    """Squared Fréchet (2-Wasserstein) distance between N(mu1, cov1) and N(mu2, cov2)."""
    mu1, mu2 = np.atleast_1d(np.asarray(mu1, np.float64)), np.atleast_1d(np.asarray(mu2, np.float64))
    cov1, cov2 = np.atleast_2d(np.asarray(cov1, np.float64)), np.atleast_2d(np.asarray(cov2, np.float64))
    if mu1.shape != mu2.shape or cov1.shape != cov2.shape or cov1.shape != (mu1.size, mu1.size):
        raise DnadiffError(f"frechet_distance: shapes {mu1.shape}, {cov1.shape} vs {mu2.shape}, {cov2.shape}")
    s1 = _psd_sqrt(cov1)
    cross = np.linalg.eigvalsh(s1 @ cov2 @ s1)  # eigenvalues of Σ1^½ Σ2 Σ1^½ (PSD)
    tr_sqrt = float(np.sqrt(np.clip(cross, 0.0, None)).sum())
    d = float(((mu1 - mu2) ** 2).sum() + np.trace(cov1) + np.trace(cov2) - 2.0 * tr_sqrt)
    return max(d, 0.0)


def gaussian_fit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample covariance (ddof = 1) of the rows of x (n, D), n >= 2."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise DnadiffError(f"Fréchet distance: needs at least 2 embeddings, got {x.shape[0] if x.ndim else 0}")
    return x.mean(axis=0), np.cov(x, rowvar=False, ddof=1).reshape(x.shape[1], x.shape[1])


def frechet_from_embeddings(x: np.ndarray, y: np.ndarray) -> float:
    return frechet_distance(*gaussian_fit(x), *gaussian_fit(y))


# ---- running a classifier on strings ---------------------------------------------------------------------
def _max_length(model) -> int | None:
    return capabilities_of(getattr(model, "backbone", None)).max_length  # a k-mer LR has no network: None


def _batches(model, seqs: Sequence[str], batch_size: int, where: str):
    """(ids, attention_mask) batches of right-padded token ids, on the model's device."""
    tok = DNATokenizer()
    limit = _max_length(model)
    device = next(model.parameters()).device
    for i in range(0, len(seqs), batch_size):
        part = [tok.encode_array(s, f"{where} {i + j + 1}") for j, s in enumerate(seqs[i : i + batch_size])]
        longest = max(len(p) for p in part)
        if limit and longest > limit:
            raise DnadiffError(f"{where}: a {longest}-bp sequence is longer than the classifier accepts ({limit})")
        ids = torch.full((len(part), longest), tok.pad_id, dtype=torch.long)
        mask = torch.zeros((len(part), longest), dtype=torch.long)
        for r, p in enumerate(part):
            ids[r, : len(p)] = torch.from_numpy(p)
            mask[r, : len(p)] = 1
        yield ids.to(device), mask.to(device)


class BackboneEncoder(torch.nn.Module):
    """A dnadiff backbone as an encoder: features(ids, t = 0) mean-pooled over the real positions, passed
    through an identity `head` (so Embedder reads it like a classifier's pooled vector)."""

    def __init__(self, backbone: torch.nn.Module):
        super().__init__()
        self.backbone = backbone
        self.head = torch.nn.Identity()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        t = None
        if capabilities_of(self.backbone).time_conditioned:  # clean input: diffusion time 0
            t = torch.zeros(input_ids.shape[0], device=input_ids.device)
        kw = {} if attention_mask is None else {"attention_mask": attention_mask}
        hidden = self.backbone.features(input_ids, t, **kw)  # (B, L, H)
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape, device=input_ids.device)
        w = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, L, 1)
        pooled = torch.where(w > 0, hidden, torch.zeros((), dtype=hidden.dtype, device=hidden.device)).sum(1)
        return self.head(pooled / w.sum(1).clamp(min=1.0))  # (B, H)


EMBEDDING_VERSION = 1  # bump when the pooled vector of a directory changes meaning: old stores are ignored


def fingerprint(folder: str | os.PathLike) -> str:
    """A content hash of a model or classifier directory (every file's relative name and bytes) and of
    this module's embedding rule: the key of its stored embeddings (retrained weights: another key)."""
    h = hashlib.sha256(f"dnadiff-embedding-v{EMBEDDING_VERSION}".encode())
    root = Path(folder)
    for f in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:32]


def _digest(seq: str) -> str:
    return hashlib.sha1(seq.encode()).hexdigest()


class Embedder:
    """Pooled features of a SequenceClassifier: the vector its head sees (captured by a forward hook on
    `model.head`, averaged over the head calls of one forward, i.e. over strands for ph/ps conjoining).
    Embeddings are cached per sequence, so the floor's real subsets are not re-embedded; with `store` (an
    .npz file, keyed by the embedder's fingerprint) the vectors of sequences embedded with persist=True
    (the reference windows) are kept on disk for the next process, and read from it instead of the model."""

    def __init__(self, model, batch_size: int = 64, name: str = "", store: str | os.PathLike | None = None):
        if not hasattr(model, "head") and not hasattr(model, "embed"):  # embed: a k-mer LR (eval/kmer_oracle.py)
            raise DnadiffError(f"{name or 'embedder'}: not a dnadiff classifier (no head)")
        self.model, self.batch_size, self.name = model.eval(), int(batch_size), name
        self._cache: dict[str, np.ndarray] = {}
        self.store = Path(store) if store else None
        self._disk: dict[str, np.ndarray] = self._read_store() if self.store else {}
        self.store_hits = 0  # sequences read from the store instead of the model (tests, logs)

    def _read_store(self) -> dict[str, np.ndarray]:
        try:
            with np.load(self.store, allow_pickle=False) as z:
                keys, vectors = z["keys"], z["vectors"]
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:  # damaged: rebuilt, not trusted
            log.warning("%s: unreadable stored embeddings (%s); embedding again", self.store, exc)
            return {}
        if keys.ndim != 1 or vectors.ndim != 2 or len(keys) != len(vectors):
            log.warning("%s: stored embeddings of the wrong shape; embedding again", self.store)
            return {}
        return dict(zip(keys.tolist(), vectors))

    def _write_store(self) -> None:
        """Atomically (temporary name, then rename): a concurrent reader sees the old or the new file."""
        import io

        from dnadiff.utils import atomic_write

        buf = io.BytesIO()
        np.savez(buf, keys=np.array(list(self._disk), dtype="U40"), vectors=np.stack(list(self._disk.values())))
        try:
            self.store.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.store, buf.getvalue())
        except (OSError, DnadiffError) as exc:  # a read-only cache folder costs time, not the result
            log.warning("%s: cannot store embeddings (%s)", self.store, exc)

    @torch.no_grad()
    def _embed(self, seqs: list[str], progress: bool) -> np.ndarray:
        if not hasattr(self.model, "head"):  # a k-mer LR: its class-score vector (eval/kmer_oracle.py)
            return np.asarray(self.model.embed(seqs), dtype=np.float64)
        seen: list[torch.Tensor] = []
        handle = self.model.head.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].detach()))
        out = []
        try:
            bar = progress_bar(total=len(seqs), desc="embedding", unit="seq", disable=not progress)
            for ids, mask in _batches(self.model, seqs, self.batch_size, self.name or "embedder"):
                seen.clear()
                self.model(ids, mask)
                out.append(torch.stack(seen).double().mean(0).cpu().numpy())  # (B, D)
                bar.update(ids.shape[0])
            bar.close()
        finally:
            handle.remove()
        return np.concatenate(out)

    def __call__(self, seqs: Sequence[str], progress: bool = False, persist: bool = False) -> np.ndarray:
        """(n, D) pooled vectors; persist=True: these sequences' vectors also go to (and come from) the store."""
        seqs = [str(s).upper() for s in seqs]
        todo = list(dict.fromkeys(s for s in seqs if s not in self._cache))
        if persist and self._disk:
            for s in todo:
                if (row := self._disk.get(_digest(s))) is not None:
                    self._cache[s] = row
                    self.store_hits += 1
            todo = [s for s in todo if s not in self._cache]
        if todo:
            for s, row in zip(todo, self._embed(todo, progress)):
                self._cache[s] = row
            if persist and self.store:
                self._disk.update((_digest(s), self._cache[s]) for s in todo)
                self._write_store()
        return np.stack([self._cache[s] for s in seqs])


def frechet_metric(
    embedder: Embedder, samples: Sequence[str], reference: Sequence[str], progress: bool = False
) -> dict:
    """The in-house Fréchet distance of samples vs reference under `embedder`, labelled as such."""
    x, y = embedder(samples, progress), embedder(reference, progress, persist=True)  # the reference: stored
    return {"distance": frechet_from_embeddings(x, y), "dim": int(x.shape[1]), "embedder": embedder.name,
            "note": NOT_COMPARABLE}


# ---- held-out classifier accuracy -------------------------------------------------------------------------
def class_index(label: str | int, classes: Sequence[str], where: str = "class") -> int:
    """A class name of the classifier, or an index into its classes."""
    from dnadiff.data.class_names import class_position, known_names

    names = [str(c) for c in classes]
    text = str(label)
    position = class_position(text, names)  # a spelling or its alias (hESC / hESCT0)
    if position is not None:
        return position
    if text.lstrip("-").isdigit() and 0 <= int(text) < len(names):
        return int(text)
    raise DnadiffError(f"{where} {text!r}: the classifier knows the classes {known_names(names)}")


@torch.no_grad()
def predict_proba(model, seqs: Sequence[str], batch_size: int = 64, where: str = "samples") -> np.ndarray:
    """Class probabilities (n, C) from the classifier's forward (its own strand conjoining); a k-mer LR
    (eval/kmer_oracle.py) gives its own."""
    if not isinstance(model, torch.nn.Module) and hasattr(model, "predict_proba"):
        return model.predict_proba([str(s).upper() for s in seqs])
    out = [model(ids, mask).double().softmax(-1).cpu().numpy()
           for ids, mask in _batches(model.eval(), list(seqs), batch_size, where)]
    return np.concatenate(out)


def classifier_accuracy(model, classes: Sequence[str], samples: Sequence[str], labels: Sequence[str | int],
                        batch_size: int = 64) -> dict:
    """Accuracy of a held-out classifier on samples generated for `labels` (one per sample)."""
    if len(labels) != len(samples):
        raise DnadiffError(f"classifier accuracy: {len(labels)} labels for {len(samples)} samples")
    target = np.array([class_index(lab, classes) for lab in labels], dtype=np.int64)
    prob = predict_proba(model, samples, batch_size)
    pred = prob.argmax(axis=1)
    per_class = {}
    for c in np.unique(target):
        sel = target == c
        per_class[str(classes[c])] = {"num": int(sel.sum()), "accuracy": float((pred[sel] == c).mean())}
    return {
        "accuracy": float((pred == target).mean()),
        "mean_probability": float(prob[np.arange(len(target)), target].mean()),
        "num_samples": int(len(target)),
        "per_class": per_class,
        "predicted": {str(classes[c]): int((pred == c).sum()) for c in range(prob.shape[1])},
    }
