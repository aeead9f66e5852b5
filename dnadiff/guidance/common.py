"""Shared pieces of the guidance methods: the base class (checks, counters, the shared helpers).

Every method wraps a masked-diffusion sampler (dnadiff/samplers: ancestral, analytic, remdm,
first_hitting, ...; not the composite semi_ar or the autoregressive one) and has the sampler call

    x = method.generate(denoiser, schedule, mask_id, (B, L), template=None, generator=seed)
    method.last_stats   # {"denoiser_calls", "denoiser_rows", "reward_calls", "nfe_per_sequence",
                        #  "reward_evals_per_sequence", "steps"}
    method.last_rewards # Float64[B]: reward of each returned sequence (not counted in reward_calls)

NFE is reported two ways: `denoiser_calls` (batched forward passes) and `denoiser_rows` (sequences
pushed through the network, summed over calls); `nfe_per_sequence` = rows / B is the compute
each designed sequence cost, the budget best-of-N is matched on. Reward evaluations are counted
separately (rows scored).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.registry import Registry
from dnadiff.samplers.base import CountingDenoiser, Sampler, SamplerState, _device_of, greedy_fill
from dnadiff.samplers.rng import RandomStream, make_stream

# `dnadiff design --method NAME`; each method's options are its constructor's typed keywords
# (after sampler and reward)
METHODS = Registry("guidance method")  # filled by the imports of dnadiff/guidance/__init__.py


class GuidedMethod:
    """Base of the guidance methods: checks the inner sampler, keeps the counters.

    What a method declares for `dnadiff design`:
      strength: (option, inverse) of the tilt's strength, set from the reward's range when unset
          (strength.py: option = 1/unit when inverse, else unit); None: no strength.
      needs_token_ids: takes `token_ids`, the tokens a masked position may become (the command
          gives the model's nucleotides).
      needs_soft_reward: the reward must define a differentiable `soft(onehot)`.
      states_cost: the command states the run's reward rows and time first, and refuses one over
          an hour without --allow-slow.
    """

    posterior_cfg = False  # as Sampler.posterior_cfg: guidance of the logits, never udlm's posterior D-CFG

    name = "guided"
    strength: tuple[str, bool] | None = None
    needs_token_ids = False
    needs_soft_reward = False
    states_cost = False

    def __init__(self, sampler: Sampler, reward: Callable[[Tensor], Tensor]):
        if not sampler.guidable:  # declared by every Sampler
            raise DnadiffError(f"guidance method {self.name!r}: sampler {sampler.name!r} cannot be wrapped "
                               "(use ancestral, analytic, remdm, confidence or first_hitting)")
        self.sampler = sampler
        self.reward = reward
        self.last_stats: dict = {}
        self.last_rewards: Tensor | None = None
        # what dnadiff.sample reads after a batch, as after a Sampler's generate: the denoiser calls and
        # the loop steps (per-sequence calls are not tracked: candidates and particles share them)
        self.last_nfe, self.last_steps = 0, 0
        self.last_nfe_per_row: Tensor | None = None

    def score(self, x: Tensor) -> Tensor:
        """Counted reward evaluation -> Float64[B]."""
        self._reward_rows += int(x.shape[0])
        return torch.as_tensor(self.reward(x), dtype=torch.float64, device=x.device).reshape(-1)

    @torch.no_grad()
    def generate(self, denoiser, schedule, mask_id: int, shape: tuple[int, int], template: Tensor | None = None,
                 generator=None) -> Tensor:
        B, L = int(shape[0]), int(shape[1])
        if B < 1 or L < 1:
            raise DnadiffError(f"guidance {self.name!r}: shape must be positive, got {tuple(shape)}")
        device = _device_of(denoiser, template, generator)  # Sampler.generate's rule
        x = self.sampler.initial_state(int(mask_id), (B, L), template, device)
        stream = make_stream(generator, B, device, self.sampler.float32_draws)
        counter = CountingDenoiser(denoiser)
        self._reward_rows = 0
        out, steps = self._generate(counter, schedule, int(mask_id), x, stream)
        rows_before = self._reward_rows
        self.last_rewards = self.score(out)
        self._reward_rows = rows_before  # the report's scores are not part of the method's cost
        self.last_stats = {
            "method": self.name, "denoiser_calls": counter.calls, "denoiser_rows": counter.rows,
            "reward_calls": self._reward_rows, "nfe_per_sequence": counter.rows / B,
            "reward_evals_per_sequence": self._reward_rows / B, "steps": steps,
        }
        self.last_nfe, self.last_steps = counter.calls, steps
        return out

    def _generate(self, denoiser: CountingDenoiser, schedule, mask_id: int, x: Tensor, stream: RandomStream):
        raise NotImplementedError

    # ---- helpers for step-wise methods ----------------------------------------------------------
    def logits_of(self, denoiser, state: SamplerState) -> Tensor:
        """The counted denoiser output (with the sampler's guidance hooks) for `state` at its model time."""
        t = self.sampler.model_time(state)
        if t is None:
            t = state.t
        return self.sampler.model_output(denoiser, state, t)

    def finish(self, state: SamplerState, logits: Tensor | None) -> Tensor:
        """Noise removal without another call: positions still masked take the argmax of the last
        denoiser output (the sampler's argmax noise removal, made at the state's time)."""
        if logits is None or not bool(state.masked.any()):
            return state.x
        return greedy_fill(logits, state.x, state.mask_id)


__all__ = ["GuidedMethod", "METHODS"]
