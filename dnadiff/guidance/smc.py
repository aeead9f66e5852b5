"""Sequential Monte Carlo toward the reward-tilted target p_θ(x0) exp(r(x0)/α) / Z.

K particles per designed sequence move with the wrapped sampler's own (unguided) steps and carry
log-weights updated by reward increments (a Feynman-Kac model with look-ahead potentials, as in
twisted/guided SMC for diffusion; reward tilting of discrete diffusion as in Nisonoff et al.
2024, arXiv 2406.01572, §3, and Li et al. 2024, arXiv 2408.08252, §3):

    log w ← log w + (r̂(x_s) - r̂(x_t)) / α,      r̂(x) = r(x̂0(x)) (argmax fill of the masks)

At the end r̂(x0) = r(x0), so the increments telescope to (r(x0) - r̂(x_1)) / α and r̂(x_1) is the
same for every particle of a sequence: the weighted particles target p_θ·exp(r/α) exactly as
K → ∞ whatever the look-ahead's quality (it only steers the resampling). Particles are
resampled (multinomial, within their sequence's group; `SamplerState.select`) when the effective
sample size falls below `ess_threshold`·K (1 = every step); the output is one particle per
sequence drawn by its final weight (`output="sample"`) or the highest-reward one ("best").
The denoiser output on the new particles serves both the look-ahead and the next step: K
denoiser rows and K reward rows per step per sequence.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.guidance.common import METHODS, GuidedMethod
from dnadiff.samplers.base import greedy_fill


def effective_sample_size(log_w: Tensor) -> Tensor:
    """Float64[B]: (Σ w)² / Σ w² per row of log-weights Float64[B, K]."""
    w = (log_w - log_w.max(dim=-1, keepdim=True).values).exp()
    return w.sum(-1) ** 2 / (w**2).sum(-1)


def multinomial_draws(w: Tensor, rng) -> Tensor:
    """Long[B, K]: K iid draws per row from the weights w Float64[B, K] (inverse CDF of uniforms;
    O(B·K) memory)."""
    cdf = w.cumsum(-1)
    cdf = cdf / cdf[:, -1:]
    u = rng.rand((w.shape[1],))  # (B, K) float64
    return torch.searchsorted(cdf, u.contiguous()).clamp_max(w.shape[1] - 1)


@METHODS.register("smc")
class SMC(GuidedMethod):
    """`SMC(sampler, reward, particles=16, alpha=1.0, ess_threshold=0.5, output="sample")`."""

    name = "smc"
    strength = ("alpha", False)  # target p·exp(r/alpha): alpha = the reward's unit

    def __init__(self, sampler, reward, particles: int = 16, alpha: float = 1.0, ess_threshold: float = 0.5,
                 output: str = "sample"):
        super().__init__(sampler, reward)
        if int(particles) < 1:
            raise DnadiffError(f"smc: particles must be >= 1, got {particles}")
        if not alpha > 0:
            raise DnadiffError(f"smc: alpha must be > 0, got {alpha}")
        if not 0.0 <= ess_threshold <= 1.0:
            raise DnadiffError(f"smc: ess_threshold must be in [0, 1], got {ess_threshold}")
        if output not in ("sample", "best"):
            raise DnadiffError(f"smc: output must be sample|best, got {output!r}")
        self.k, self.alpha, self.ess_threshold, self.output = int(particles), float(alpha), float(ess_threshold), output
        self.last_resamples = 0

    def _lookahead(self, denoiser, state):
        """(logits or None, r̂(x)) of a particle state. The model is queried while the sampler runs
        (ReMDM keeps stepping with nothing masked) or to fill a finished state's leftover masks."""
        if state.done and not bool(state.masked.any()):
            return None, self.score(state.x)
        logits = self.logits_of(denoiser, state)
        return logits, self.score(greedy_fill(logits, state.x, state.mask_id))

    def _generate(self, denoiser, schedule, mask_id: int, x: Tensor, stream):
        smp, K, B = self.sampler, self.k, x.shape[0]
        part_stream = stream.expand(K, 31)  # particle k of sequence r: row r·K + k
        res_stream = stream.child(32)
        base = torch.arange(B, device=x.device).repeat_interleave(K) * K  # (B·K,) first row of each group
        state = smp.init_state(denoiser, schedule, mask_id, x.repeat_interleave(K, dim=0))
        logits, value = self._lookahead(denoiser, state)  # r̂(x_1): the same within a group
        log_w = torch.zeros(B, K, dtype=torch.float64, device=x.device)
        self.last_resamples = 0
        while not state.done:
            i = state.step
            if K > 1 and self.ess_threshold > 0:
                low = effective_sample_size(log_w) < self.ess_threshold * K  # (B,)
                if bool(low.any()):
                    w = (log_w - log_w.max(-1, keepdim=True).values).exp()  # (B, K)
                    draws = multinomial_draws(w, res_stream.at(i))  # (B, K): K draws per group
                    keep = torch.arange(K, device=x.device).expand(B, K)
                    rows = base + torch.where(low[:, None], draws, keep).reshape(-1)
                    state, logits, value = state.select(rows), logits[rows] if logits is not None else None, value[rows]
                    log_w = torch.where(low[:, None], torch.zeros_like(log_w), log_w)
                    self.last_resamples += int(low.sum())
            state = smp.step(state, logits, part_stream.at(i))
            logits, new_value = self._lookahead(denoiser, state)
            log_w = log_w + ((new_value - value) / self.alpha).view(B, K)
            value = new_value
        final = self.finish(state, logits)
        # noise removal fills the masks with the same argmax the last look-ahead scored: r(x0) = r̂(x_N)
        if self.output == "best":
            pick = value.view(B, K).argmax(-1)
        else:
            w = (log_w - log_w.max(-1, keepdim=True).values).exp()
            pick = res_stream.at(state.step + 1).categorical(w)  # (B,)
        self.last_log_weights = log_w
        return final[torch.arange(B, device=x.device) * K + pick], state.step


__all__ = ["SMC", "effective_sample_size"]
