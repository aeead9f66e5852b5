"""One order-k Markov chain per class: the classical class-conditional baseline (issue 34 §2).

    backbone = build_backbone("markov_classes", preset="auto", orders=[3, 5, 4, 4, 5])  # C classes + pooled
    logits = backbone(input_ids, labels=2)          # class 2's chain; labels None (or C): the pooled chain

A model directory holds C + 1 chains (backbones/markov.py, each with its own order k_c chosen on the
validation sequences of its class; the last one fitted on every class, the "no label" chain), so
`dnadiff sample DIR --class K562` draws from the K562 chain through the autoregressive sampler and
`dnadiff eval DIR` scores with the pooled chain, as a class-conditional network does with its null label.
Labels reach it as they reach `ClassConditional` (backbones/conditioning.py): `labels=` of forward, one
int or Long[B] (the null label C for the pooled chain). `takes_labels` tells model_dir.wrap_conditional
that no label embedding goes in front of it. `dnadiff train` fits it with baselines/markov_classes_fit.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from dnadiff.backbones.base import BACKBONES
from dnadiff.backbones.markov import MAX_ORDER, CountBackbone, MarkovChain, MarkovConfig
from dnadiff.errors import DnadiffError


@dataclass(frozen=True)
class ClassMarkovConfig:
    vocab_size: int = 12
    orders: tuple = ()  # k of each class's chain, then the pooled chain's; () until fitted (order chosen on valid)
    max_order: int = 10  # the largest k the fit tries on the validation split
    smoothing: str = "kn"  # kn | wb (backbones/markov.py)
    discount: float = -1.0
    both_strands: Optional[bool] = None  # count reverse complements too; None: when data.rc_prob > 0

    def __post_init__(self):
        object.__setattr__(self, "orders", tuple(int(k) for k in self.orders))
        if any(not 0 <= k <= MAX_ORDER for k in self.orders):
            raise DnadiffError(f"model.overrides.orders: every order must be in 0..{MAX_ORDER}, "
                               f"got {list(self.orders)}")
        if len(self.orders) == 1:
            raise DnadiffError("model.overrides.orders: one order per class and one for the pooled chain (>= 2)")
        if not 0 <= self.max_order <= MAX_ORDER:
            raise DnadiffError(f"model.overrides.max_order: must be in 0..{MAX_ORDER}, got {self.max_order}")
        MarkovConfig(vocab_size=self.vocab_size, smoothing=self.smoothing, discount=self.discount)  # same checks

    def chain_config(self, order: int) -> MarkovConfig:
        return MarkovConfig(vocab_size=self.vocab_size, order=order, max_order=self.max_order,
                            smoothing=self.smoothing, discount=self.discount, both_strands=self.both_strands)


@BACKBONES.register("markov_classes")
class ClassMarkovChains(CountBackbone):
    """Causal, class-conditional: logits[r, i] = log P_{c_r}(x_{i+1} | the A/C/G/T run ending at x_i)."""

    Config = ClassMarkovConfig
    name = "markov_classes"
    what = "Markov chains have"
    takes_labels = True  # labels go to forward as they do to ClassConditional; no label embedding in front

    def __init__(self, config: ClassMarkovConfig):
        super().__init__(config)
        self.chains = nn.ModuleList(MarkovChain(config.chain_config(k)) for k in config.orders)

    @property
    def num_classes(self) -> int:
        return max(len(self.chains) - 1, 0)

    @property
    def null_label(self) -> int:
        return self.num_classes

    def set_chains(self, chains: list[MarkovChain]) -> "ClassMarkovChains":
        """Take fitted chains (C classes, then the pooled one) whose orders are the config's."""
        if [c.order for c in chains] != list(self.config.orders):
            raise DnadiffError(f"markov_classes: chains of orders {[c.order for c in chains]}, "
                               f"config orders {list(self.config.orders)}")
        for mine, theirs in zip(self.chains, chains):
            mine.set_counts(theirs.counts())
        return self

    def refresh(self) -> "ClassMarkovChains":
        for chain in self.chains:
            chain.refresh()
        return self

    def _labels(self, labels, batch: int, device) -> Tensor:
        if labels is None:
            labels = self.null_label
        if isinstance(labels, int):
            labels = torch.full((batch,), labels, dtype=torch.long, device=device)
        labels = torch.as_tensor(labels, device=device).long()
        labels = labels.expand(batch) if labels.dim() == 0 else labels
        if labels.shape != (batch,) or bool(((labels < 0) | (labels > self.null_label)).any()):
            raise DnadiffError(f"markov_classes: labels must be {batch} class ids in 0..{self.null_label} "
                               f"({self.null_label}: no label)")
        return labels

    def forward(self, input_ids: Tensor, t: Tensor | None = None, labels: Tensor | int | None = None,
                attention_mask: Tensor | None = None, cond: Tensor | None = None) -> Tensor:
        """attention_mask is not needed (causal: right padding never reaches a real position)."""
        if not self.chains:
            raise DnadiffError("markov_classes: no chains yet (orders empty); fit it with `dnadiff train`")
        if cond is not None:
            raise DnadiffError("markov_classes: pass class labels (labels=), not a conditioning vector")
        rows = self._labels(labels, input_ids.shape[0], input_ids.device)
        out = None
        for c in torch.unique(rows).tolist():
            pick = rows == c
            logits = self.chains[c](input_ids[pick])
            if out is None:
                out = logits.new_empty((*input_ids.shape, logits.shape[-1]))
            out[pick] = logits
        return out

    def num_counts(self) -> int:
        return sum(c.num_counts() for c in self.chains)

    def extra_repr(self) -> str:
        return f"orders={list(self.config.orders)}, smoothing={self.config.smoothing}, counts={self.num_counts()}"


def from_chains(chains: list[MarkovChain], config: ClassMarkovConfig) -> ClassMarkovChains:
    """The backbone of fitted chains (C classes, then the pooled one), their orders written into the config."""
    cfg = dataclasses.replace(config, orders=tuple(c.order for c in chains))
    return ClassMarkovChains(cfg).set_chains(chains)
