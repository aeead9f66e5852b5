"""Training streams: a step-indexed view of a data set, so `--resume` is exact and ranks share work.

Training sample g (0, 1, 2, ... over the whole run) is a pure function of (seed, g): a random
crop for genomes, or element g of a per-epoch permutation for fixed data sets. The train loader
starts at the sample after the last one consumed, so a resumed run sees exactly the batches an
uninterrupted run would.

Distributed runs: the stream is cut into micro-batches of `batch_size` samples, global micro-batch
G = (samples G·B .. G·B + B - 1); rank r of W takes G = r, r + W, r + 2W, ... So at each optimizer step
the W ranks together consume exactly the W·B samples that one process with accumulate = W consumes
(the same global batch), and the per-step noise is seeded by G too (training/module.py): a 2-process
run equals a 1-process run with twice the gradient accumulation.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, Sampler

from dnadiff.errors import DnadiffError


class PermutedStream(Dataset):
    """Index g -> base[perm_e[g mod n]] with a fresh permutation per epoch e = g // n."""

    def __init__(self, base: Dataset, length: int, seed: int):
        self.base, self.length, self.seed = base, int(length), int(seed)
        self._perm_epoch, self._perm = -1, None

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, g: int):
        n = len(self.base)
        epoch = g // n
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(n)
            self._perm_epoch = epoch
        return self.base[int(self._perm[g % n])]


class RepeatedStream(IterableDataset):
    """An iterable (streaming) data set read round after round; this rank's samples are the stream
    positions of its micro-batches (blocks of `block` positions, every world-th block from `rank`)
    after the first `skip` (so a resumed run continues where the last one stopped, given the same
    source files and worker count)."""

    def __init__(self, base: IterableDataset, skip: int = 0, rank: int = 0, world: int = 1, limit: int | None = None,
                 block: int = 1):
        self.base, self.skip, self.rank, self.world, self.limit = base, skip, rank, world, limit
        self.block = max(1, int(block))

    def __iter__(self):
        position, taken, empty_rounds = 0, 0, 0
        while self.limit is None or taken < self.limit:
            seen_any = False
            for item in self.base:
                seen_any = True
                if position >= self.skip and ((position - self.skip) // self.block) % self.world == self.rank:
                    if isinstance(item, dict):
                        item = {**item, "sample_index": torch.tensor(position)}
                    yield item
                    taken += 1
                    if self.limit is not None and taken >= self.limit:
                        return
                position += 1
            if not seen_any:
                empty_rounds += 1
                if empty_rounds > 1:
                    raise DnadiffError("the streaming training data yields no items")


class StreamSampler(Sampler):
    """Yields this rank's global sample indices: the micro-batches G = r, r + W, ... (G·B .. G·B + B - 1)
    from sample `start` on (a multiple of W·B), below `total`; B = `block` (the batch size)."""

    def __init__(self, total: int, start: int = 0, rank: int = 0, world: int = 1, block: int = 1):
        self.total, self.start, self.rank, self.world, self.block = total, start, rank, world, max(1, int(block))

    def __iter__(self):
        first = self.start // self.block + self.rank  # global micro-batch index
        for g in range(first, self.total // self.block, self.world):
            yield from range(g * self.block, (g + 1) * self.block)

    def __len__(self) -> int:
        # The whole stream's length, also when resuming at `start`: one epoch is the whole run, and on
        # resume Lightning restores its batch index within that epoch and stops at len(loader), so the
        # batches still to come are exactly len - restored index (what the iterator yields from start).
        blocks = self.total // self.block
        return max(0, (blocks - self.rank + self.world - 1) // self.world) * self.block


class IndexedStream(Dataset):
    """A map-style stream whose items also carry their global sample index (`sample_index`)."""

    def __init__(self, base: Dataset):
        self.base = base

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, g: int):
        item = self.base[g]
        return {**item, "sample_index": torch.tensor(g)} if isinstance(item, dict) else item


def rank_batches(n: int, batch_size: int, rank: int, world: int) -> list[list[int]]:
    """Validation batches of one rank: the batches b = rank, rank + world, ... of the 1-process
    loader over n items (so the ranks together evaluate each item once, in the same batches)."""
    starts = range(rank * batch_size, n, world * batch_size)
    return [list(range(s, min(s + batch_size, n))) for s in starts]
