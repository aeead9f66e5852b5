"""Order-k Markov chain over A/C/G/T as a causal "backbone" (the classical baseline of tab. 6).

    backbone = build_backbone("markov", preset="auto", order=5)     # counts all zero = uniform
    backbone.set_counts(count_ngrams(tiles, order + 1))              # or: dnadiff train with model.backbone=markov
    logits = backbone(input_ids)                                     # (B, L, V): position i predicts i+1

Because it obeys the causal backbone contract, the `ar` objective scores it (same positions and
bits/base as the neural AR models), `dnadiff eval`, `dnadiff sample` and `dnadiff metrics --oracle`
use it unchanged, and a model directory stores its n-gram counts as safetensors buffers.

Smoothing (config `smoothing`):
- `kn`: interpolated Kneser–Ney (Kneser & Ney 1995; the interpolated form of Chen & Goodman 1999,
  "An empirical study of smoothing techniques for language modeling", eq. 17 with one discount
  per order): P(w|h) = max(a(hw) − D, 0)/A(h) + D·N1+(h•)/A(h) · P_lower(w|h'), with raw counts
  a = c at the top order and continuation counts a(h'w) = N1+(•h'w) (distinct left extensions)
  at the lower orders, and the uniform 1/4 below order 0. D = n1/(n1 + 2·n2) per order (Ney,
  Essen & Kneser 1994; Chen & Goodman eq. 21), n_r = number of n-grams seen exactly r times; when
  an order has no singletons (n1 = 0, e.g. low orders on megabases) D = 0.5 keeps every
  probability > 0. `discount` > 0 fixes D for every order.
- `wb`: interpolated Witten–Bell (Witten & Bell 1991; Chen & Goodman eq. 12):
  P(w|h) = (c(hw) + N1+(h•)·P_lower(w|h')) / (c(h) + N1+(h•)), raw counts at every order.
A context h never seen (A(h) = 0) gives P_lower. h' is h without its oldest base.

N and every other non-A/C/G/T token break the chain: the context of a position is the run of
A/C/G/T bases since the last break (at most `order` bases), as in `dnadiff.eval.dna_metrics`. The
`ar` objective never scores N (mask_n); the base right after an N is scored with the context
reset, and with the [BOS] context of DNA AR model directories the first base of a window is scored
too (order-0 context), exactly as for the neural AR models (diffusion/ar.py). A position with j < order bases of context
(window start, after an N) uses the order-j model whose top level has raw counts: those bases are
ordinary genome positions, not a "sentence start".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import Tensor, nn

from dnadiff.backbones.base import BACKBONES, Backbone
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.dna import DNATokenizer, complement_codes

# A C G T (docs/architecture.md)
BASE_IDS = (DNATokenizer.a_id, DNATokenizer.c_id, DNATokenizer.g_id, DNATokenizer.t_id)
NEG_INF = -1e6  # the SUBS constant: exp() is exactly 0 in float32, sums with 0 stay finite
MAX_ORDER = 12  # 4^13 counts (537 MB as float64) is the most a model directory should hold


@dataclass(frozen=True)
class MarkovConfig:
    vocab_size: int = 12
    order: int = -1  # context length k; -1: `dnadiff train` picks k in 0..max_order on the valid split
    max_order: int = 10
    smoothing: str = "kn"  # kn (interpolated Kneser-Ney) | wb (interpolated Witten-Bell)
    discount: float = -1.0  # kn: fixed D in (0, 1]; <= 0: estimated per order, n1/(n1 + 2 n2)
    both_strands: Optional[bool] = None  # count reverse complements too; None: when data.rc_prob > 0

    def __post_init__(self):
        if not -1 <= self.order <= MAX_ORDER:
            raise DnadiffError(f"model.overrides.order: must be -1 (auto) or 0..{MAX_ORDER}, got {self.order}")
        if not 0 <= self.max_order <= MAX_ORDER:
            raise DnadiffError(f"model.overrides.max_order: must be in 0..{MAX_ORDER}, got {self.max_order}")
        if self.smoothing not in ("kn", "wb"):
            raise DnadiffError(f"model.overrides.smoothing: expected kn or wb, got {self.smoothing!r}")
        if self.discount > 1:
            raise DnadiffError(f"model.overrides.discount: must be <= 1, got {self.discount}")
        if self.vocab_size <= max(BASE_IDS):
            raise DnadiffError(f"model.overrides.vocab_size: the DNA vocabulary needs > {max(BASE_IDS)}")


def base_codes(ids):
    """Token ids -> 2-bit base codes A0 C1 G2 T3, anything else -1 (a break), Int64 of the same shape;
    a torch tensor (on its device) or anything numpy reads."""
    if isinstance(ids, Tensor):
        codes = torch.full(ids.shape, -1, dtype=torch.long, device=ids.device)
    else:
        ids = np.asarray(ids)
        codes = np.full(ids.shape, -1, dtype=np.int64)
    for code, tok in enumerate(BASE_IDS):
        codes[ids == tok] = code
    return codes


# ----------------------------------------------------------------------------- counting


def count_ngrams(tiles: np.ndarray, max_n: int, counts: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """n-gram counts for n = 1..max_n of codes tiles Int[T, L] (A0 C1 G2 T3, -1 = N/pad: a break).

    Returns [c_1, ..., c_max_n], c_n Float64[4^n] indexed by the n-gram read as a base-4 number,
    oldest base most significant (so the last j bases of a context are `index % 4**j`). No n-gram
    spans a break or a tile boundary. Adds into `counts` when given."""
    tiles = np.atleast_2d(np.asarray(tiles, dtype=np.int64))
    counts = counts if counts is not None else [np.zeros(4**n, dtype=np.float64) for n in range(1, max_n + 1)]
    valid = tiles >= 0
    codes = np.where(valid, tiles, 0)
    idx, ok = codes, valid  # (T, L - n + 1): n-grams ending at columns n-1 .. L-1
    for n in range(1, max_n + 1):
        if n > 1:
            if idx.shape[1] <= 1:
                break
            idx = idx[:, 1:] + codes[:, : idx.shape[1] - 1] * 4 ** (n - 1)
            ok = ok[:, 1:] & valid[:, : ok.shape[1] - 1]
        counts[n - 1] += np.bincount(idx[ok], minlength=4**n)
    return counts


def reverse_complement_codes(tiles: np.ndarray) -> np.ndarray:
    """Reverse complement of code tiles (A<->T, C<->G; breaks stay breaks)."""
    return complement_codes(tiles)[:, ::-1]


# ----------------------------------------------------------------------------- smoothing


def estimate_discount(a: np.ndarray) -> float:
    """Kneser-Ney discount D = n1 / (n1 + 2 n2) of one order's counts; 0.5 when no n-gram is a singleton."""
    n1, n2 = int(np.sum(a == 1)), int(np.sum(a == 2))
    return n1 / (n1 + 2 * n2) if n1 > 0 else 0.5


def _interpolate(a: np.ndarray, lower: np.ndarray, smoothing: str, discount: float) -> np.ndarray:
    """One order: a Float64[4^j, 4] counts, lower Float64[4^(j-1) or 1, 4] -> P Float64[4^j, 4]."""
    low = np.tile(lower, (a.shape[0] // lower.shape[0], 1))  # row h -> lower[h % 4^(j-1)]
    total = a.sum(axis=1, keepdims=True)  # A(h)
    types = (a > 0).sum(axis=1, keepdims=True)  # N1+(h.)
    seen = total > 0
    safe = np.where(seen, total, 1.0)
    if smoothing == "kn":
        p = np.maximum(a - discount, 0.0) / safe + discount * types / safe * low
    else:  # Witten-Bell
        p = (a + types * low) / np.where(seen, total + types, 1.0)
    return np.where(seen, p, low)


def probability_tables(counts: list[np.ndarray], order: int, smoothing: str = "kn",
                       discount: float = -1.0) -> tuple[list[np.ndarray], list[float]]:
    """[T_0, ..., T_order], T_j Float64[4^j, 4] = P(next | last j bases), and the top-order discounts.

    T_j uses raw counts c_{j+1} at its top level; below it KN uses the continuation chain Q_{j-1}
    (Q_i from N1+(• h' w) = distinct left extensions in c_{i+2}), WB uses T_{j-1}."""
    if len(counts) < order + 1:
        raise DnadiffError(f"an order-{order} chain needs counts of 1..{order + 1}-grams, got {len(counts)}")
    uniform = np.full((1, 4), 0.25)
    tables, discounts = [], []
    cont = [uniform]  # cont[i + 1] = Q_i (continuation-count chain), cont[0] = uniform
    for j in range(order + 1):
        raw = counts[j].reshape(4**j, 4)
        d = discount if discount > 0 else estimate_discount(raw)
        lower = cont[j] if smoothing == "kn" else (tables[j - 1] if j else uniform)
        tables.append(_interpolate(raw, lower, smoothing, d))
        discounts.append(d)
        if smoothing == "kn" and j < order:  # Q_j for the next order's lower level
            a = (counts[j + 1].reshape(4, 4 ** (j + 1)) > 0).sum(axis=0).astype(np.float64).reshape(4**j, 4)
            dq = discount if discount > 0 else estimate_discount(a)
            cont.append(_interpolate(a, cont[j], "kn", dq))
    return tables, discounts


# ----------------------------------------------------------------------------- the model


class CountBackbone(Backbone):
    """What the count backbones share (MarkovChain here, ClassMarkovChains in markov_classes.py): causal, no
    time input, no hidden features, no gradients; tables rebuilt from the counts after a load."""

    PRESETS = {"auto": {}, "tiny": {"max_order": 4}}
    is_causal = True
    hidden_size = 0
    neural = False  # counts, no gradients or features: the network contract tests skip it (tests/test_markov.py);
    # `dnadiff train` fits it with baselines.COUNT_FITS[its name] (baselines/markov_fit.py, markov_classes_fit.py)
    what = "a Markov chain has"  # the error of `features`

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.vocab_size = config.vocab_size
        # zero-size anchor: code that asks `next(model.parameters()).device` works; not a trainable weight
        self.device_anchor = nn.Parameter(torch.zeros(0), requires_grad=False)

    def refresh(self) -> "CountBackbone":
        """Rebuild the tables from the count buffers."""
        return self

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        out = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self.refresh()
        return out

    def features(self, input_ids: Tensor, t: Tensor | None = None, cond: Tensor | None = None, **kw) -> Tensor:
        raise DnadiffError(f"{self.name}: {self.what} no hidden features (use the k-mer LR baseline to classify)")


@BACKBONES.register("markov")
class MarkovChain(CountBackbone):
    """Causal backbone: logits[:, i] = log P(x_{i+1} | the A/C/G/T run ending at x_i, at most k bases)."""

    Config = MarkovConfig
    name = "markov"

    def __init__(self, config: MarkovConfig):
        super().__init__(config)
        if config.order >= 0:
            for n in range(1, config.order + 2):
                self.register_buffer(f"counts_{n}", torch.zeros(4**n, dtype=torch.float64))
        self.register_buffer("log_table", torch.zeros(0, 4), persistent=False)
        self.register_buffer("offsets", torch.zeros(0, dtype=torch.long), persistent=False)
        self.discounts: list[float] = []
        if config.order >= 0:
            self.refresh()

    @property
    def order(self) -> int:
        return self.config.order

    def counts(self) -> list[np.ndarray]:
        return [getattr(self, f"counts_{n}").detach().cpu().numpy() for n in range(1, self.order + 2)]

    def set_counts(self, counts: list[np.ndarray]) -> "MarkovChain":
        """Take counts of 1..(order+1)-grams (extra higher orders are ignored) and rebuild the tables."""
        if self.order < 0:
            raise DnadiffError("markov: order -1 (auto) must be resolved before counts are set")
        for n in range(1, self.order + 2):
            getattr(self, f"counts_{n}").copy_(torch.as_tensor(np.asarray(counts[n - 1], dtype=np.float64)))
        return self.refresh()

    def refresh(self) -> "MarkovChain":
        tables, self.discounts = probability_tables(self.counts(), self.order, self.config.smoothing,
                                                    self.config.discount)
        device = self.device_anchor.device
        with np.errstate(divide="ignore"):
            flat = np.log(np.concatenate(tables, axis=0))  # (sum_j 4^j, 4) natural-log conditionals
        self.log_table = torch.as_tensor(np.maximum(flat, NEG_INF), dtype=torch.float32, device=device)
        self.offsets = torch.as_tensor(np.cumsum([0] + [4**j for j in range(self.order)]), dtype=torch.long,
                                       device=device)
        return self

    def tables(self) -> list[np.ndarray]:
        """[T_0, ..., T_k] as probabilities (Float64), for inspection and tests."""
        return probability_tables(self.counts(), self.order, self.config.smoothing, self.config.discount)[0]

    def num_counts(self) -> int:
        return sum(4**n for n in range(1, self.order + 2)) if self.order >= 0 else 0

    def forward(self, input_ids: Tensor, t: Tensor | None = None, cond: Tensor | None = None) -> Tensor:
        if self.order < 0:
            raise DnadiffError("markov: the order is not chosen yet (order -1); fit it with `dnadiff train`")
        if cond is not None:
            raise DnadiffError("markov: a Markov chain takes no conditioning vector")
        k = self.order
        x = input_ids.long()  # (B, L)
        base = base_codes(x)  # (B, L)
        valid = base >= 0
        pos = torch.arange(x.shape[1], device=x.device).expand_as(x)
        last_break = torch.cummax(torch.where(valid, torch.full_like(x, -1), pos), dim=1).values
        ctx_len = (pos - last_break).clamp(max=k)  # (B, L): bases of context ending at position i
        digits = base.clamp(min=0)
        ctx = torch.zeros_like(x)  # last k bases as base-4, newest least significant
        for d in range(k):
            shifted = torch.nn.functional.pad(digits, (d, 0))[:, : x.shape[1]]
            ctx = ctx + shifted * 4**d
        row = self.offsets[ctx_len] + torch.remainder(ctx, torch.pow(4, ctx_len))  # (B, L)
        log_p = self.log_table[row]  # (B, L, 4)
        logits = torch.full((*x.shape, self.vocab_size), NEG_INF, dtype=log_p.dtype, device=x.device)
        logits[..., list(BASE_IDS)] = log_p
        return logits

    def extra_repr(self) -> str:
        return f"order={self.order}, smoothing={self.config.smoothing}, counts={self.num_counts()}"


def with_order(backbone: MarkovChain, order: int) -> MarkovChain:
    """The same counts truncated to a lower order (what fitting that order directly would give)."""
    cfg = dataclasses.replace(backbone.config, order=order)
    return MarkovChain(cfg).set_counts(backbone.counts())
