"""`dnadiff train` for `model.backbone: markov_classes`: one Markov chain per class of a labelled data set
(data.kind dhs or benchmark), each order chosen on the validation sequences of its class. No gradients.

For every class c the n-grams (n = 1..max_order+1) of its training sequences are counted (both strands
when data.rc_prob > 0 unless model.overrides.both_strands says otherwise; a sequence's pads and N break
the chain), the chain of every order k in 0..max_order is scored on the validation sequences of class c
through the `ar` objective (bits/base over the positions `dnadiff eval` scores, with the model
directory's [BOS] context), and the lowest bits/base wins (ties: the smaller k). The pooled chain (the
"no label" one, last) is fitted on every class and its order chosen on the whole validation split. A
class with no validation sequences is refused: its order could not be chosen.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import torch

from dnadiff.backbones import build_backbone
from dnadiff.backbones.markov import MarkovChain, base_codes, count_ngrams, reverse_complement_codes, with_order
from dnadiff.backbones.markov_classes import ClassMarkovChains, from_chains
from dnadiff.baselines.fits import COUNT_FITS
from dnadiff.baselines.markov_fit import bits_per_base, check_count_run
from dnadiff.config import RunConfig, replace
from dnadiff.data.datasets import build_split_dataset
from dnadiff.errors import DnadiffError
from dnadiff.modelio.model_dir import recorded_config


def labelled_split(cfg: RunConfig, tokenizer, split: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list]:
    """(input_ids Long[N, L], attention_mask Long[N, L], labels Long[N], class names) of one split."""
    if cfg.data.kind not in ("dhs", "benchmark"):
        raise DnadiffError(f"data.kind: per-class Markov chains need labelled sequences (dhs or benchmark), "
                           f"got {cfg.data.kind!r}")
    ds = build_split_dataset(cfg, tokenizer, split)
    classes = getattr(ds, "classes", None) or list(getattr(getattr(ds, "data", None), "classes", []))
    if len(ds) == 0:
        raise DnadiffError(f"data: the {split} split has no sequences")
    items = [ds[i] for i in range(len(ds))]
    ids = torch.stack([it["input_ids"] for it in items]).long()
    mask = torch.stack([it["attention_mask"] for it in items]).long()
    labels = torch.stack([torch.as_tensor(it["labels"]) for it in items]).long()
    return ids, mask, labels, list(classes)


def class_counts(ids: torch.Tensor, mask: torch.Tensor, max_n: int, both_strands: bool) -> tuple[list[np.ndarray], int]:
    """n-gram counts (n = 1..max_n) of the real A/C/G/T bases of these rows, and how many bases were counted."""
    codes = base_codes(ids.numpy())
    codes = np.where(mask.numpy() > 0, codes, -1)  # pads and N: breaks
    counts = count_ngrams(codes, max_n)
    if both_strands:
        counts = count_ngrams(reverse_complement_codes(codes), max_n, counts)
    return counts, int((codes >= 0).sum())


def choose_order(full: MarkovChain, ids: torch.Tensor, mask: torch.Tensor, bos_id) -> tuple[MarkovChain, dict]:
    """The order of `full` (truncated) with the lowest validation bits/base, and every order's figure."""
    by_order = {k: bits_per_base(with_order(full, k), ids, mask, bos_id=bos_id)[0] for k in range(full.order + 1)}
    best = min(by_order, key=lambda k: (by_order[k], k))
    return with_order(full, best), by_order


def fit_class_markov(cfg: RunConfig, tokenizer, echo=print) -> tuple[ClassMarkovChains, dict, list]:
    """The fitted chains (C classes + pooled), what the fit measured, and the class names."""
    if not cfg.data.mask_n:
        raise DnadiffError("data.mask_n: a chain over A/C/G/T cannot score N; keep data.mask_n=true")
    overrides = dict(cfg.model.overrides)
    overrides.setdefault("vocab_size", tokenizer.vocab_size)
    if overrides.get("orders"):
        raise DnadiffError("model.overrides.orders: the orders are chosen on the validation split; leave them unset")
    proto = build_backbone("markov_classes", preset=cfg.model.preset, **overrides).config
    both = proto.both_strands if proto.both_strands is not None else cfg.data.rc_prob > 0
    proto = dataclasses.replace(proto, both_strands=both)
    bos_id = recorded_config(cfg, tokenizer).objective.options.get("bos_id")
    t0 = time.time()
    train_ids, train_mask, train_y, classes = labelled_split(cfg, tokenizer, "train")
    valid_ids, valid_mask, valid_y, _ = labelled_split(cfg, tokenizer, "valid")
    if cfg.model.num_classes and cfg.model.num_classes != len(classes):
        raise DnadiffError(f"model.num_classes is {cfg.model.num_classes}, the data has {len(classes)} classes "
                           f"({', '.join(classes)})")
    top = proto.max_order
    chains, per_class = [], {}
    pooled_counts = None
    for c, name in enumerate([*classes, None]):
        if name is None:
            counts, bases = pooled_counts, sum(v["train_bases"] for v in per_class.values())
            v_ids, v_mask = valid_ids, valid_mask
        else:
            rows, v_rows = train_y == c, valid_y == c
            if not bool(rows.any()) or not bool(v_rows.any()):
                raise DnadiffError(f"data: class {name!r} has {int(rows.sum())} training and {int(v_rows.sum())} "
                                   "validation sequences; each class needs both")
            counts, bases = class_counts(train_ids[rows], train_mask[rows], top + 1, both)
            pooled_counts = counts if pooled_counts is None else [a + b for a, b in zip(pooled_counts, counts)]
            v_ids, v_mask = valid_ids[v_rows], valid_mask[v_rows]
        full = MarkovChain(proto.chain_config(top)).set_counts(counts)
        chain, by_order = choose_order(full, v_ids, v_mask, bos_id)
        label = name if name is not None else "(pooled)"
        echo(f"  {label}: order {chain.order}, valid {by_order[chain.order]:.4f} bits/base "
             f"({len(v_ids)} sequences)")
        per_class[label] = {"order": chain.order, "train_bases": bases, "valid_sequences": len(v_ids),
                            "valid_bits_per_base_by_order": {str(k): round(v, 6) for k, v in by_order.items()}}
        chains.append(chain)
    model = from_chains(chains, proto)
    pooled = per_class["(pooled)"]
    metrics = {"classes": classes, "orders": list(model.config.orders), "both_strands": both,
               "smoothing": proto.smoothing, "per_class": per_class, "parameters": model.num_counts(),
               "val_bits_per_token": pooled["valid_bits_per_base_by_order"][str(pooled["order"])],
               "wall_seconds_this_session": round(time.time() - t0, 2), "steps": 0}
    metrics["val_nats_per_token"] = metrics["val_bits_per_token"] * math.log(2)
    return model, metrics, classes


@COUNT_FITS.register("markov_classes")
def fit_for_run(cfg: RunConfig, tokenizer):
    """What `dnadiff train` runs for markov_classes: checks, fits, and returns (chains, metrics, config to save:
    the orders, model.num_classes and model.class_names, so `dnadiff sample --class NAME` finds the class)."""
    check_count_run(cfg, tokenizer)
    model, metrics, classes = fit_class_markov(cfg, tokenizer)
    saved_overrides = {**dataclasses.asdict(model.config), "orders": list(model.config.orders)}
    saved = replace(cfg, **{"model.overrides": saved_overrides, "model.num_classes": len(classes),
                            "model.class_names": list(classes)})
    return model, metrics, saved
