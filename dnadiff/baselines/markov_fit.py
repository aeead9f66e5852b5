"""`dnadiff train` for `model.backbone: markov`: count n-grams on the train split, pick the order on
the valid split, write a run directory with a model directory inside. No Lightning, no gradients.

Data: the train intervals of the run's genome + BED cut into seq_len tiles (the windows the neural
models are trained on; contexts never cross a tile, as they never cross a window), tiles with more
N than data.max_n_frac skipped (as the neural training windows are); both strands are counted when
data.rc_prob > 0 (the expectation of the neural models' reverse-complement augmentation) unless
model.overrides.both_strands says otherwise. With order -1 every k in 0..max_order is scored on
the valid split (all tiles, through the `ar` objective: the positions and units of `dnadiff eval`)
and the lowest bits/base wins.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Iterator

import numpy as np
import torch

from dnadiff.backbones import build_backbone
from dnadiff.backbones.markov import (
    MarkovChain,
    base_codes,
    count_ngrams,
    reverse_complement_codes,
    with_order,
)
from dnadiff.baselines.fits import COUNT_FITS
from dnadiff.config import RunConfig, replace
from dnadiff.data.datasets import genome_paths
from dnadiff.data.fasta import Genome, read_bed
from dnadiff.data.records import tile_array
from dnadiff.diffusion import build_objective
from dnadiff.errors import DnadiffError
from dnadiff.modelio.model_dir import recorded_config


def split_tiles(cfg: RunConfig, tokenizer, split: str, max_n_frac: float = 1.0,
                chunk: int = 4096) -> Iterator[np.ndarray]:
    """Token-id tiles Int64[T, seq_len] of one split (the tail of an interval right-padded with PAD),
    in chunks of at most `chunk` tiles: the windows GenomeWindows(mode="tile", stride=seq_len) gives."""
    if cfg.data.kind != "genome":
        raise DnadiffError(f"data.kind: a Markov chain is fitted on a genome + BED, got {cfg.data.kind!r}")
    fasta, bed = genome_paths(cfg)
    genome = Genome(fasta)
    intervals = [iv for iv in read_bed(bed, genome) if iv.split == split]
    if not intervals:
        raise DnadiffError(f"{bed}: the BED has no intervals in split {split!r}")
    L = cfg.data.seq_len
    buf: list[np.ndarray] = []
    for iv in intervals:
        ids = tokenizer.encode_array(genome.fetch(iv.chrom, iv.start, iv.end), where=f"{fasta}:{iv.chrom}")
        tiles, lengths = tile_array(ids, L, tokenizer.pad_id)
        if max_n_frac < 1.0:
            keep = (tiles == tokenizer.n_id).sum(axis=1) / lengths <= max_n_frac
            tiles = tiles[keep]
        buf.append(tiles)
        if sum(len(b) for b in buf) >= chunk:
            yield np.concatenate(buf)
            buf = []
    if buf:
        yield np.concatenate(buf)


def fit_counts(cfg: RunConfig, tokenizer, max_n: int, both_strands: bool) -> tuple[list[np.ndarray], int]:
    """n-gram counts (n = 1..max_n) of the train split, and the number of train bases counted."""
    counts, bases = None, 0
    for tiles in split_tiles(cfg, tokenizer, "train", cfg.data.max_n_frac):
        codes = base_codes(tiles)
        bases += int((codes >= 0).sum())
        counts = count_ngrams(codes, max_n, counts)
        if both_strands:
            counts = count_ngrams(reverse_complement_codes(codes), max_n, counts)
    if counts is None or bases == 0:
        raise DnadiffError("the train split has no A/C/G/T bases to count")
    return counts, bases


def eval_items(tiles: np.ndarray, tokenizer, mask_n: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) of tiles, as GenomeWindows builds them (N and PAD not real)."""
    ids = torch.as_tensor(tiles, dtype=torch.long)
    real = ids != tokenizer.pad_id
    if mask_n:
        real &= ids != tokenizer.n_id
    return ids, real.long()


@torch.no_grad()
def bits_per_base(backbone: MarkovChain, ids: torch.Tensor, mask: torch.Tensor, batch: int = 512,
                  bos_id: int | None = None) -> tuple[float, int]:
    """Exact bits/base of the `ar` objective over (ids, mask) windows, and the number of scored bases.
    `bos_id`: the objective's context token (the [BOS] a DNA model directory records: every real base
    scored, the first from the empty context; None: each window's first base is context only)."""
    obj = build_objective("ar", bos_id=bos_id)
    nats, n = 0.0, 0
    for s in range(0, len(ids), batch):
        out = obj.loss(lambda x, t: backbone(x), ids[s : s + batch], mask[s : s + batch])
        nats += float(out.nll.double().sum())
        n += int(out.num_tokens.sum())
    return (nats / max(n, 1) / math.log(2), n)


def fit_markov(cfg: RunConfig, tokenizer, echo=print) -> tuple[MarkovChain, dict]:
    """The fitted chain (order resolved) and what fitting measured."""
    if not cfg.data.mask_n:
        raise DnadiffError("data.mask_n: a chain over A/C/G/T cannot score N; keep data.mask_n=true")
    overrides = dict(cfg.model.overrides)
    overrides.setdefault("vocab_size", tokenizer.vocab_size)
    proto: MarkovChain = build_backbone("markov", preset=cfg.model.preset, **overrides)
    mc = proto.config
    both = mc.both_strands if mc.both_strands is not None else cfg.data.rc_prob > 0
    top = mc.order if mc.order >= 0 else mc.max_order
    t0 = time.time()
    counts, bases = fit_counts(cfg, tokenizer, top + 1, both)
    full = MarkovChain(dataclasses.replace(mc, order=top, both_strands=both)).set_counts(counts)
    metrics: dict = {"train_bases": bases, "both_strands": both, "smoothing": mc.smoothing,
                     "count_seconds": round(time.time() - t0, 2)}
    if mc.order < 0:
        # the positions `dnadiff eval` of the saved model directory scores: its recorded `ar` bos_id
        bos_id = recorded_config(cfg, tokenizer).objective.options.get("bos_id")
        valid = np.concatenate(list(split_tiles(cfg, tokenizer, "valid")))
        ids, mask = eval_items(valid, tokenizer)
        by_order = {}
        for k in range(top + 1):
            bits, n = bits_per_base(with_order(full, k), ids, mask, bos_id=bos_id)
            by_order[k] = bits
            echo(f"  order {k:2d}: valid {bits:.4f} bits/base ({n} bases)")
        best = min(by_order, key=lambda k: (by_order[k], k))
        metrics.update(valid_bits_per_base_by_order={str(k): v for k, v in by_order.items()}, valid_bases=n,
                       val_bits_per_token=by_order[best], val_nats_per_token=by_order[best] * math.log(2))
        chain = with_order(full, best)
    else:
        chain = full
    metrics.update(order=chain.order, parameters=chain.num_counts(), discounts=[round(d, 6) for d in chain.discounts],
                   wall_seconds_this_session=round(time.time() - t0, 2), steps=0)
    return chain, metrics


def check_count_run(cfg: RunConfig, tokenizer) -> None:
    """The run settings a count model (markov, markov_classes) needs: the ar objective, no init_from, DNA."""
    if cfg.objective.name != "ar":
        raise DnadiffError(f"objective.name: Markov chains are autoregressive models; set objective.name=ar "
                           f"(got {cfg.objective.name!r})")
    if cfg.model.init_from:
        raise DnadiffError("model.init_from: Markov chains are fitted from counts, not initialised from a model")
    if getattr(tokenizer, "kind", "dna") != "dna":
        raise DnadiffError("tokenizer.kind: Markov chains over A/C/G/T need the DNA tokenizer")


@COUNT_FITS.register("markov")
def fit_for_run(cfg: RunConfig, tokenizer):
    """What `dnadiff train` runs for markov (COUNT_FITS["markov"]): checks the run's settings, fits, and
    returns (chain, metrics, the config to save); training.run owns the run directory."""
    check_count_run(cfg, tokenizer)
    chain, metrics = fit_markov(cfg, tokenizer)
    return chain, metrics, replace(cfg, **{"model.overrides": dataclasses.asdict(chain.config)})
