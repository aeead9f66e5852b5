"""Random draws of the samplers: categorical draws (float64 exponential race) and the streams
that hand each loop step its randomness.

  SharedStream  one torch.Generator (or torch's global one) for the whole batch: draws depend on
                the batch layout (the historical behaviour; pinned tests use it).
  SeedStream    counter-based: the draws of sequence r (global index) at loop step i (and sub-loop
                key k, e.g. a semi_ar window) come from a torch generator seeded with
                splitmix64(seed, r, k.., i) (Steele et al. 2014's finaliser), so a sequence's sample
                does not depend on how the batch is chunked. Each row costs one small generator per
                step that draws.
A step sees a `StepRandom`: `rand(shape)` -> Float[B, *shape] uniforms (float64 by default),
`randint(high)` -> Long[B], `categorical(probs)` -> one draw per row.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError

_MASK64 = (1 << 64) - 1


def _exp_race(p: Tensor, u: Tensor) -> Tensor:
    """argmax_v p_v / E_v with E = -log(1 - U) ~ Exp(1) (float64, never 0)."""
    noise = (-torch.log1p(-u)).clamp_min_(torch.finfo(torch.float64).tiny)
    return (p / noise).argmax(dim=-1)


def _exp_race_f32(p: Tensor, u: Tensor) -> Tensor:
    """The MDLM reference's `_sample_categorical` noise, float32."""
    return (p / (1e-10 - (u + 1e-10).log())).argmax(dim=-1)


def draw_categorical(probs: Tensor, generator: torch.Generator | None = None, float32: bool = False) -> Tensor:
    """One draw per row of unnormalised non-negative weights `probs` [..., V] -> Long[...].

    Exponential-race (Gumbel-max) sampling: argmax_v p_v / E_v with E_v ~ Exp(1) iid.
    float64 (default): E = -log(U), U uniform with 53-bit resolution.
    float32=True: the MDLM reference's `_sample_categorical` in float32, whose U has 24-bit
    resolution, so E is rounded up near 0 and tokens with p below ~1e-6 lose mass.
    """
    if float32:
        p = probs.float()
        return _exp_race_f32(p, torch.rand(p.shape, generator=generator, device=p.device, dtype=torch.float32))
    p = probs.double()
    return _exp_race(p, torch.rand(p.shape, generator=generator, device=p.device, dtype=torch.float64))



def splitmix64(*values: int) -> int:
    """A 63-bit seed from a tuple of ints (splitmix64 finaliser chained over the values)."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (int(v) & _MASK64)) & _MASK64
        h = (h + 0x9E3779B97F4A7C15) & _MASK64
        z = h
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        h = z ^ (z >> 31)
    return h & ((1 << 63) - 1)


class StepRandom:
    """The draws one loop step may make. `rand(shape)` -> Float[B, *shape] uniforms; `categorical`."""

    def __init__(self, rows: int, device, float32_draws: bool = False):
        self.rows, self.device, self.float32_draws = rows, torch.device(device), float32_draws

    def rand(self, shape: tuple[int, ...] = (), dtype=torch.float64) -> Tensor:
        raise NotImplementedError

    def randint(self, high: int) -> Tensor:
        """Long[B]: one uniform integer in [0, high) per row."""
        raise NotImplementedError

    def normal(self, shape: tuple[int, ...] = ()) -> Tensor:
        """Float64[B, *shape] standard normals: Box-Muller on two of the row's uniforms (so a row's normals, like
        its uniforms, do not depend on the other rows: the continuous-noise samplers plaid and ssdlm)."""
        u = self.rand((2, *shape), torch.float64)  # (B, 2, *shape) in [0, 1)
        return torch.sqrt(-2.0 * torch.log1p(-u[:, 0])) * torch.cos(2.0 * math.pi * u[:, 1])

    def categorical(self, probs: Tensor) -> Tensor:
        """One draw per row of weights probs [B, ..., V] (float64 unless float32 draws)."""
        shape = tuple(probs.shape[1:])
        if self.float32_draws:
            p = probs.float()
            return _exp_race_f32(p, self.rand(shape, torch.float32))
        return _exp_race(probs.double(), self.rand(shape, torch.float64))


class _SharedStep(StepRandom):
    def __init__(self, generator, rows, device, float32_draws=False):
        super().__init__(rows, device, float32_draws)
        self.generator = generator

    def rand(self, shape=(), dtype=torch.float64):
        return torch.rand((self.rows, *shape), generator=self.generator, device=self.device, dtype=dtype)

    def randint(self, high):
        return torch.randint(high, (self.rows,), generator=self.generator, device=self.device)


class _CounterStep(StepRandom):
    def __init__(self, seeds: list[int], device, float32_draws=False):
        super().__init__(len(seeds), device, float32_draws)
        self.seeds = seeds
        self.gens: list[torch.Generator] | None = None

    def _generators(self) -> list[torch.Generator]:
        if self.gens is None:  # lazily: steps that draw nothing create no generators
            self.gens = [torch.Generator(device=self.device).manual_seed(s) for s in self.seeds]
        return self.gens

    def rand(self, shape=(), dtype=torch.float64):
        return torch.stack([torch.rand(shape, generator=g, device=self.device, dtype=dtype)
                            for g in self._generators()])

    def randint(self, high):
        return torch.cat([torch.randint(high, (1,), generator=g, device=self.device) for g in self._generators()])


class RandomStream:
    """Hands each loop step its `StepRandom`: `at(step, *key)`; `rows(start, stop)` for a chunk."""

    def at(self, step: int, *key: int) -> StepRandom:
        raise NotImplementedError

    def rows(self, start: int, stop: int) -> "RandomStream":
        raise NotImplementedError

    def child(self, *key: int) -> "RandomStream":
        """A stream for a sub-loop (e.g. semi_ar's window `key`)."""
        raise NotImplementedError

    def expand(self, factor: int, *key: int) -> "RandomStream":
        """A stream for `factor` copies of each row (row r's copy j is row r·factor + j), keyed
        apart from the parent's draws (guidance's candidates and particles)."""
        raise DnadiffError(f"cannot expand a {type(self).__name__}")


class SharedStream(RandomStream):
    """One torch.Generator for the whole batch: draws depend on the batch layout (legacy)."""

    def __init__(self, generator: torch.Generator | None, rows: int, device, float32_draws: bool = False):
        self.generator, self.n, self.device, self.float32_draws = generator, rows, device, float32_draws

    def at(self, step, *key):
        return _SharedStep(self.generator, self.n, self.device, self.float32_draws)

    def rows(self, start, stop):
        return SharedStream(self.generator, stop - start, self.device, self.float32_draws)

    def child(self, *key):
        return self

    def expand(self, factor, *key):
        return SharedStream(self.generator, self.n * factor, self.device, self.float32_draws)


class SeedStream(RandomStream):
    """Counter-based draws: sequence `first_row + r`, step i, sub-loop key k -> splitmix64(seed, r, k.., i).

    `SeedStream(seed)` is what `generate(..., generator=seed)` builds; the CLI passes
    `SeedStream(seed, first_row=i)` for the chunk starting at sequence i."""

    def __init__(self, seed: int, first_row: int = 0, n: int | None = None, device=None,
                 float32_draws: bool = False, key: tuple[int, ...] = ()):
        self.seed, self.first_row, self.n = int(seed), int(first_row), n
        self.device, self.float32_draws, self.key = device, float32_draws, tuple(key)

    def bind(self, rows: int, device, float32_draws: bool) -> "SeedStream":
        return SeedStream(self.seed, self.first_row, rows, device, float32_draws, self.key)

    def at(self, step, *key):
        seeds = [splitmix64(self.seed, self.first_row + r, *self.key, *key, step) for r in range(self.n)]
        return _CounterStep(seeds, self.device, self.float32_draws)

    def rows(self, start, stop):
        return SeedStream(self.seed, self.first_row + start, stop - start, self.device, self.float32_draws, self.key)

    def child(self, *key):
        return SeedStream(self.seed, self.first_row, self.n, self.device, self.float32_draws, self.key + tuple(key))

    def expand(self, factor, *key):
        # counter-based: copy j of sequence r is global row r·factor + j, independent of the batch layout
        return SeedStream(self.seed, self.first_row * factor, self.n * factor, self.device, self.float32_draws,
                          self.key + tuple(key))


def make_stream(generator, rows: int, device, float32_draws: bool = False) -> RandomStream:
    if isinstance(generator, SeedStream):
        return generator.bind(rows, device, float32_draws)
    if isinstance(generator, int) and not isinstance(generator, bool):
        return SeedStream(generator).bind(rows, device, float32_draws)
    if generator is None or isinstance(generator, torch.Generator):
        return SharedStream(generator, rows, device, float32_draws)
    raise DnadiffError(f"generator must be a torch.Generator, an int seed or a SeedStream, "
                       f"got {type(generator).__name__}")


__all__ = ["RandomStream", "SeedStream", "SharedStream", "StepRandom", "draw_categorical", "make_stream", "splitmix64"]
