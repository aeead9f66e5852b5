"""A small convolutional classifier read on both strands: the judge of generated DNA (issue 46).

    model = ConvJudge(num_classes=2)                             # or ConvJudgeConfig(channels=..., ...)
    history = fit_judge(model, train_seqs, train_labels, valid_seqs, valid_labels, seed=0)
    probs = model.predict_proba(sequences)                       # Float64[N, C], both strands averaged
    save_judge(path, model, classes, {"role": "evaluation"}); model, meta = load_judge(path)

Two users: the classifier two-sample test (eval/discriminator.py: generated vs real) and the DHS neural
evaluation oracle (pipelines/dhs_oracles.py: four cell types). A k-mer model's samples match the k-mer
statistics a k-mer judge reads; a convolutional network reads motifs, their co-occurrence and spacing.

Network (one-hot input, channels A C G T, Float32[N, 4, L]):
  Conv1d(4, C, k0) -> ReLU -> MaxPool(pool)                      motif detectors
  `blocks` x [x + Conv1d(C, C, k, dilation 2^i) -> ReLU]          residual, dilated: spacing and grammar
  concat(global max pool, global mean pool) -> Dropout -> Linear(2C, num_classes)
Both strands: logits(x) = (f(x) + f(rc(x))) / 2, rc(x) = x flipped along positions and channels (the channel
order A C G T reversed is T G C A, the complement), so the judge gives a sequence and its reverse complement
exactly the same probabilities (training included). Letters other than A/C/G/T are all-zero columns.

Training (fit_judge): AdamW, cross-entropy, shuffled minibatches; the weights of the epoch with the lowest
validation loss are kept (early stopping with `patience`). Seeded: the same seed, data and thread count give
bit-identical weights (torch's CPU kernels are deterministic for a fixed thread count).

Directory layout (a classifier directory as heads/saved.py's, told apart by classifier.json "backbone":
"conv_judge"): classifier.json {"format", "backbone": "conv_judge", "config", "num_classes", "classes", ...info}
and classifier.pt (a weights-only state dict). Only scoring code loads it (eval/oracle.py load_oracle);
heads/saved.load_classifier_dir refuses it (an evaluation oracle for its role, any other for its kind).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from dnadiff.errors import DnadiffError

BACKBONE = "conv_judge"  # classifier.json "backbone" of a ConvJudge directory
WEIGHTS = "classifier.pt"

_ONE_HOT = np.zeros((256, 4), dtype=np.float32)  # byte -> one-hot row (A C G T; anything else zeros)
for _i, _b in enumerate("ACGT"):
    _ONE_HOT[ord(_b), _i] = 1.0
    _ONE_HOT[ord(_b.lower()), _i] = 1.0


def one_hot(seqs: Sequence[str], length: int | None = None) -> torch.Tensor:
    """Float32[N, 4, L]: sequences one-hot encoded, right-padded with zero columns to `length` (default:
    the longest); a longer sequence is an error (cut sequences before)."""
    length = max((len(s) for s in seqs), default=0) if length is None else int(length)
    out = np.zeros((len(seqs), length, 4), dtype=np.float32)
    for i, s in enumerate(seqs):
        if len(s) > length:
            raise DnadiffError(f"sequence {i} is {len(s)} bp, longer than {length}")
        out[i, : len(s)] = _ONE_HOT[np.frombuffer(s.encode("ascii", "replace"), dtype=np.uint8)]
    return torch.from_numpy(out).transpose(1, 2).contiguous()


@dataclasses.dataclass
class ConvJudgeConfig:
    channels: int = 64
    first_kernel: int = 15
    pool: int = 4
    blocks: int = 2  # residual dilated blocks (dilation 1, 2, 4, ...)
    kernel: int = 5
    dropout: float = 0.2


class ConvJudge(nn.Module):
    """f(x) on one strand; forward() averages the logits of both strands (module docstring)."""

    backbone = BACKBONE

    def __init__(self, num_classes: int = 2, config: ConvJudgeConfig | None = None, classes: Sequence[str] = ()):
        super().__init__()
        cfg = config or ConvJudgeConfig()
        self.config, self.num_classes = cfg, int(num_classes)
        self.classes = [str(c) for c in classes] or [str(k) for k in range(self.num_classes)]
        c = cfg.channels
        self.stem = nn.Conv1d(4, c, cfg.first_kernel, padding=cfg.first_kernel // 2)
        self.pool = nn.MaxPool1d(cfg.pool, ceil_mode=True) if cfg.pool > 1 else nn.Identity()
        self.blocks = nn.ModuleList(
            nn.Conv1d(c, c, cfg.kernel, dilation=2**i, padding=(cfg.kernel // 2) * 2**i) for i in range(cfg.blocks))
        self.dropout = nn.Dropout(cfg.dropout)
        self.linear = nn.Linear(2 * c, self.num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Float[N, 2C] pooled features of one strand; x Float[N, 4, L]."""
        h = self.pool(torch.relu(self.stem(x)))  # (N, C, L/pool)
        for conv in self.blocks:
            h = h + torch.relu(conv(h))
        return torch.cat([h.amax(dim=-1), h.mean(dim=-1)], dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Float[N, num_classes] logits averaged over the two strands."""
        both = torch.cat([x, x.flip(1, 2)])  # (2N, 4, L): forward strands, then reverse complements
        logits = self.linear(self.dropout(self.features(both)))
        return 0.5 * (logits[: x.shape[0]] + logits[x.shape[0]:])

    @torch.no_grad()
    def predict_logits(self, sequences: Sequence[str], batch_size: int = 512) -> np.ndarray:
        """Float64[N, C] strand-averaged logits in eval mode."""
        was = self.training
        self.eval()
        length = max((len(s) for s in sequences), default=0)
        out = [self(one_hot(sequences[i: i + batch_size], length)).double().numpy()
               for i in range(0, len(sequences), batch_size)]
        self.train(was)
        return np.concatenate(out) if out else np.zeros((0, self.num_classes))

    def predict_proba(self, sequences: Sequence[str], batch_size: int = 512) -> np.ndarray:
        """Float64[N, C] class probabilities (softmax of the strand-averaged logits)."""
        logits = self.predict_logits([str(s).upper() for s in sequences], batch_size)
        logits = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return p / p.sum(axis=1, keepdims=True)

    @torch.no_grad()
    def embed(self, sequences: Sequence[str], batch_size: int = 512) -> np.ndarray:
        """Float64[N, 2C] the head's input averaged over both strands (the Fréchet embedding)."""
        was = self.training
        self.eval()
        length = max((len(s) for s in sequences), default=0)
        out = []
        for i in range(0, len(sequences), batch_size):
            x = one_hot([str(s).upper() for s in sequences[i: i + batch_size]], length)
            out.append((0.5 * (self.features(x) + self.features(x.flip(1, 2)))).double().numpy())
        self.train(was)
        return np.concatenate(out) if out else np.zeros((0, 2 * self.config.channels))


def fit_judge(model: ConvJudge, train: Sequence[str], train_labels: Sequence[int], valid: Sequence[str],
              valid_labels: Sequence[int], *, epochs: int = 30, patience: int = 5, lr: float = 3e-3,
              weight_decay: float = 1e-2, batch_size: int = 64, seed: int = 0, progress=None,
              time_limit_s: float | None = None, cpu_limit_s: float | None = None) -> dict:
    """Train `model` in place; keeps the weights of the epoch with the lowest validation loss (early stopping
    after `patience` epochs without improvement; no epoch starts after `time_limit_s` wall seconds or
    `cpu_limit_s` CPU seconds of this process's training).
    progress: None or fn(epoch, train_loss, valid_loss, valid_acc).
    Returns {"best_epoch", "epochs_run", "valid_loss", "valid_accuracy", "history"}."""
    if len(train) == 0 or len(valid) == 0:
        raise DnadiffError("fit_judge: needs training and validation sequences")
    length = max(max(len(s) for s in train), max(len(s) for s in valid))
    x, y = one_hot([s.upper() for s in train], length), torch.as_tensor(np.asarray(train_labels), dtype=torch.long)
    xv, yv = one_hot([s.upper() for s in valid], length), torch.as_tensor(np.asarray(valid_labels), dtype=torch.long)
    rng = np.random.default_rng(seed)
    start, cpu_start = time.monotonic(), time.process_time()
    with torch.random.fork_rng(devices=[]):  # seeded init and dropout; the caller's global RNG is untouched
        torch.manual_seed(seed)
        for m in model.modules():  # the seed decides the initial weights, not the construction order
            if isinstance(m, (nn.Conv1d, nn.Linear)):
                m.reset_parameters()
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        best = (math.inf, -1, None, float("nan"))  # (valid loss, epoch, state, valid accuracy)
        history = []
        for epoch in range(epochs):
            model.train()
            order = torch.from_numpy(rng.permutation(len(train)))
            total = 0.0
            for i in range(0, len(train), batch_size):
                idx = order[i: i + batch_size]
                loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += loss.item() * len(idx)
            model.eval()
            with torch.no_grad():
                logits = torch.cat([model(xv[i: i + 512]) for i in range(0, len(valid), 512)])
                vloss = float(nn.functional.cross_entropy(logits, yv))
                vacc = float((logits.argmax(-1) == yv).float().mean())
            history.append({"epoch": epoch, "train_loss": total / len(train), "valid_loss": vloss,
                            "valid_accuracy": vacc})
            if progress is not None:
                progress(epoch, total / len(train), vloss, vacc)
            if vloss < best[0]:
                best = (vloss, epoch, {k: v.clone() for k, v in model.state_dict().items()}, vacc)
            elif epoch - best[1] >= patience:
                break
            if time_limit_s is not None and time.monotonic() - start > time_limit_s:
                break
            if cpu_limit_s is not None and time.process_time() - cpu_start > cpu_limit_s:
                break
    model.load_state_dict(best[2])
    model.eval()
    return {"best_epoch": best[1], "epochs_run": len(history), "valid_loss": best[0], "valid_accuracy": best[3],
            "history": history}


def save_judge(path: str | os.PathLike, model: ConvJudge, info: dict[str, Any] | None = None) -> Path:
    """Write `model` to directory `path` (classifier.pt, then classifier.json; each atomically)."""
    from dnadiff.heads.saved import FORMAT
    from dnadiff.utils import atomic_write

    meta = {"format": FORMAT, "backbone": BACKBONE, "config": dataclasses.asdict(model.config),
            "num_classes": model.num_classes, "classes": model.classes,
            "num_parameters": int(sum(p.numel() for p in model.parameters())), **(info or {})}
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, buf)
    atomic_write(out / WEIGHTS, buf.getvalue())
    atomic_write(out / "classifier.json", json.dumps(meta, indent=2, default=str) + "\n")
    return out


def load_judge(path: str | os.PathLike, meta: dict | None = None) -> tuple[ConvJudge, dict]:
    """(ConvJudge in eval mode, classifier.json) of a directory written by save_judge."""
    folder = Path(path)
    where = folder / "classifier.json"
    if meta is None:
        try:
            meta = json.loads(where.read_text())
        except FileNotFoundError:
            raise DnadiffError(f"{path}: not a classifier directory (no classifier.json)") from None
        except json.JSONDecodeError as exc:
            raise DnadiffError(f"{where}: invalid JSON ({exc.msg})") from None
    try:
        config = ConvJudgeConfig(**meta["config"])
        classes = [str(c) for c in meta["classes"]]
    except (KeyError, TypeError) as exc:
        raise DnadiffError(f"{where}: a conv_judge classifier needs config and classes ({exc!r})") from None
    model = ConvJudge(len(classes), config, classes)
    try:
        state = torch.load(folder / WEIGHTS, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise DnadiffError(f"{path}: not a conv_judge classifier directory (needs {WEIGHTS})") from None
    except Exception as exc:  # noqa: BLE001 - never unpickle: a pickle can run code
        raise DnadiffError(f"{folder / WEIGHTS}: not a weights-only torch file ({type(exc).__name__})") from None
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError) as exc:
        raise DnadiffError(f"{folder / WEIGHTS}: does not match {where.name} "
                           f"({str(exc).splitlines()[0][:150]})") from None
    return model.eval(), meta


__all__ = ["BACKBONE", "ConvJudge", "ConvJudgeConfig", "fit_judge", "load_judge", "one_hot", "save_judge"]
