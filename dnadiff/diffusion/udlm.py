"""UDLM: uniform-noise discrete diffusion (Schiff et al. 2024, "Simple Guidance Mechanisms for Discrete
Diffusion Models", arXiv 2412.10193, §4 "Uniform noise diffusion"; code kuleshov-group/discrete-diffusion-guidance).

Data tokens. Uniform noise acts on the N *data* tokens only: the tokenizer's `content_ids` (DNA: A, C, G, T,
N = 4; text: every non-special id). Positions whose clean token is not a data token (DNA's N, [PAD], specials)
and positions with attention_mask 0 are never noised and never scored: they stay visible to the denoiser (the
"visible" pad policy, the only one this objective takes). The denoiser's logits are restricted to the data
columns before the softmax, so its outputs on non-data tokens never enter the bound nor the sampler. All the
vectors below live in this N-dimensional data space.

Forward process (§4, uniform prior π = 1/N):  q(z_t | x) = Cat(α_t x + (1 - α_t)/N · 1).

Posterior (§4, the uniform-noise posterior; with α_{t|s} = α_t / α_s):
    q(z_s | z_t, x) = Cat( [N α_t z_t⊙x + (α_{t|s} - α_t) z_t + (α_s - α_t) x
                            + (α_s - α_t)(1 - α_s)/(N α_s) · 1] / (N α_t <z_t, x> + 1 - α_t) ),
written below, with (α_s - α_t)/α_s = 1 - α_{t|s}, as the reference code's `_compute_posterior`. It is
q(z_t | z_s) q(z_s | x) / q(z_t | x) extended linearly in x: the model's reverse step p_θ(z_s | z_t) is this
with x replaced by x̂_θ(z_t, t) (the x-parameterisation).

Continuous-time NELBO (§4, the T → ∞ limit of the D3PM bound; the reference's `_forward_pass_diffusion`,
diffusion == 'uniform'), per data position, with x̄ = N α_t x + (1 - α_t) 1, x̄_θ = N α_t x̂_θ + (1 - α_t) 1
and i the index of z_t:
    f(t) = α'_t / (N α_t) · [ N/x̄_i - N/x̄_θ,i - Σ_j (x̄_j / x̄_i) log( x̄_θ,i x̄_j / (x̄_θ,j x̄_i) ) ],
    NELBO = ∫_0^1 E_{z_t ~ q(.|x)} Σ_l f_l(t) dt + KL(q(z_1 | x) || Cat(1/N)).
f is the path KL of the reverse CTMCs (Campbell et al. 2022): the true reverse rate from i to j is
(-α'_t/(N α_t)) x̄_j / x̄_i, the model's (-α'_t/(N α_t)) x̄_θ,j / x̄_θ,i, and
f = Σ_{j≠i} [R_θ - R + R log(R / R_θ)] >= 0, 0 iff the rates agree.
The prior term is analytic (α_1 = ε > 0 for the log-linear schedule makes it ~1e-6 nats a token; 0 when ε = 0)
and added to every estimate. No reconstruction term: every schedule here has α_0 = 1, so z_0 = x, and the
sampler ends with the posterior step to α = 1 (a clean token) instead of a decoder p_θ(x | z_0) (the reference
adds -log x̂_θ(x | z_0 = x, t = 0), which the bound of the CTMC does not need).

Which x̂ is exact. The reverse step above is q(z_t | z_s) q(z_s | x̂) / q(z_t | x̂): it reproduces the true
reverse rates (f = 0) when x̂_v ∝ p(x^l = v | z_t) / q(z_t^l | x^l = v), the posterior of x^l given the other
positions only (the "leave-one-out" posterior), not the posterior mean E[x^l | z_t]. With that x̂ the
continuous-time NELBO equals -log p(x) + the prior term for every x (tests/test_udlm_exact.py); with
x̂ = E[x^l | z_t] it is strictly larger.

Time: t ~ U[t_min, 1] stratified over the batch (as the masked objectives: no (1 - t_min) rescaling); given
`t` (quadrature in `dnadiff eval`), the integrand at t. Continuous time only (`T` must stay unset). The
denoiser is called with (z_t, t).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from dnadiff.diffusion.base import OBJECTIVES, DiffusionObjective, LossOutput, rand_like_on, real_mask
from dnadiff.errors import DnadiffError


def data_log_probs(logits: Tensor, data_ids: Tensor) -> Tensor:
    """log x̂_θ over the data tokens: the logits' data columns, log-softmaxed -> Float[..., N] (float32+)."""
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    return logits.index_select(-1, data_ids.to(logits.device)).log_softmax(dim=-1)


def data_index(x: Tensor, data_ids: Tensor, vocab_size: int) -> Tensor:
    """Long[...]: the index of each token of x among `data_ids` (0..N-1), -1 for a non-data token."""
    lut = torch.full((max(int(vocab_size), int(x.max()) + 1 if x.numel() else 1),), -1, dtype=torch.long,
                     device=x.device)
    lut[data_ids.to(x.device)] = torch.arange(data_ids.numel(), device=x.device)
    return lut[x]


def uniform_posterior(x_hat: Tensor, z_idx: Tensor, alpha_t: Tensor, alpha_s: Tensor) -> Tensor:
    """q(z_s | z_t, x̂) of §4 over the data tokens -> Float[B, L, N] (rows sum to 1).

    x_hat: Float[B, L, N] (a one-hot x gives the true posterior, x̂_θ the model's step); z_idx: Long[B, L]
    data index of z_t (any value at positions the caller ignores); alpha_t, alpha_s: Float[B] (α_s >= α_t;
    α_s = 1 is the final step to a clean token)."""
    N = x_hat.shape[-1]
    a_t = alpha_t.to(x_hat.dtype)[:, None, None]
    a_s = alpha_s.to(x_hat.dtype)[:, None, None]
    a_ts = a_t / a_s  # α_{t|s}
    zt = torch.nn.functional.one_hot(z_idx.clamp_min(0), N).to(x_hat.dtype)  # (B, L, N)
    x_i = (x_hat * zt).sum(-1, keepdim=True)  # <z_t, x̂>
    num = N * a_t * x_hat * zt + (a_ts - a_t) * zt + (a_s - a_t) * x_hat + (1 - a_ts) * (1 - a_s) / N
    return num / (N * a_t * x_i + 1 - a_t)


def prior_kl(alpha_1: float, N: int) -> float:
    """KL(Cat(α_1 x + (1 - α_1)/N) || Cat(1/N)) in nats: the same for every data token x."""
    if alpha_1 <= 0.0 or N < 2:
        return 0.0
    q_x = alpha_1 + (1.0 - alpha_1) / N
    q_o = (1.0 - alpha_1) / N
    return q_x * math.log(N * q_x) + (N - 1) * (q_o * math.log(N * q_o) if q_o > 0 else 0.0)


def udlm_rate_kl(log_x_hat: Tensor, x0_idx: Tensor, z_idx: Tensor, alpha: Tensor, dalpha: Tensor) -> Tensor:
    """The integrand f(t) of the continuous-time NELBO (module docstring) -> Float[B, L] nats per unit time.

    log_x_hat: Float[B, L, N] log x̂_θ; x0_idx, z_idx: Long[B, L] data indices of x and z_t (clamped at 0
    where the caller does not score); alpha, dalpha: Float[B] α_t and α'_t."""
    N = log_x_hat.shape[-1]
    dtype = log_x_hat.dtype
    a = alpha.to(dtype)[:, None, None]
    x = torch.nn.functional.one_hot(x0_idx.clamp_min(0), N).to(dtype)
    x_bar = N * a * x + (1 - a)  # (B, L, N)
    xt_bar = N * a * log_x_hat.exp() + (1 - a)
    zi = z_idx.clamp_min(0).unsqueeze(-1)
    x_bar_i = x_bar.gather(-1, zi)  # (B, L, 1)
    xt_bar_i = xt_bar.gather(-1, zi)
    term1 = N / x_bar_i - N / xt_bar_i
    ratio = x_bar / x_bar_i
    term2 = (ratio * (xt_bar_i.log() - xt_bar.log() + x_bar.log() - x_bar_i.log())).sum(-1, keepdim=True)
    coeff = dalpha.to(dtype)[:, None, None] / (N * a)  # α'_t / (N α_t) < 0
    return (coeff * (term1 - term2)).squeeze(-1)


@OBJECTIVES.register("udlm")
class UDLMObjective(DiffusionObjective):
    """`build_objective("udlm", schedule=s, mask_id=3, vocab_size=12, data_ids=[7, 8, 9, 10], pad_policy="visible")`.

    data_ids: the data tokens uniform noise moves between (default: the tokenizer's `content_ids`)."""

    name = "udlm"
    noise = "uniform"  # the samplers that can sample it declare the same (samplers/uniform.py)
    default_sampler = "udlm"

    @classmethod
    def config_kwargs(cls, cfg, tokenizer) -> dict:
        return {**super().config_kwargs(cfg, tokenizer), "data_ids": list(tokenizer.content_ids)}

    def __init__(self, schedule=None, mask_id=None, vocab_size=None, T=None, t_min=1e-3, stratified=True,
                 pad_policy: str = "visible", data_ids: list[int] | None = None, curriculum_steps: int = 0,
                 curriculum_tau: float = 0.1, curriculum_tau_end: float = 0.01,
                 curriculum_anneal_start: int | None = None, curriculum_gamma_min: float | None = None,
                 curriculum_gamma_max: float | None = None):
        if T is not None:
            raise DnadiffError("objective 'udlm' is continuous-time only: leave objective.T unset")
        if pad_policy != "visible":
            raise DnadiffError(f"objective 'udlm': pad_policy must be visible (uniform noise moves between data "
                               f"tokens only; pads and non-data tokens stay visible), got {pad_policy!r}")
        super().__init__(schedule, mask_id, vocab_size, None, t_min, stratified, pad_policy)
        if data_ids is None:
            raise DnadiffError("objective 'udlm': data_ids (the tokens the noise moves between) are required")
        ids = sorted({int(i) for i in data_ids})
        if len(ids) < 2 or ids[0] < 0 or (vocab_size is not None and ids[-1] >= int(vocab_size)):
            raise DnadiffError(f"objective 'udlm': data_ids must be >= 2 distinct ids in [0, vocab_size), "
                               f"got {data_ids}")
        if self.mask_id in ids:
            raise DnadiffError(f"objective 'udlm': data_ids must not hold the mask id {self.mask_id}")
        self.data_ids = torch.tensor(ids, dtype=torch.long)
        self.N = len(ids)
        self._set_curriculum(curriculum_steps, curriculum_tau, curriculum_tau_end, curriculum_anneal_start,
                             curriculum_gamma_min, curriculum_gamma_max)

    def _set_curriculum(self, steps, tau, tau_end, anneal_start, gamma_min, gamma_max) -> None:
        """DUO's Gaussian-guided curriculum (Sahoo et al. 2025, §4.1; the settings are read by
        training/duo_curriculum.py, which runs it): during the first `curriculum_steps` optimizer steps the
        denoiser sees softmax(w_t/τ) of the Gaussian latent instead of z_t = argmax(w_t). τ is `curriculum_tau`
        until step `curriculum_anneal_start` (default: half-way, DUO's 100k of 200k), then log-linear to
        `curriculum_tau_end` at `curriculum_steps` (DUO: 10^-1 -> 10^-2). `curriculum_gamma_min/max` (both or
        neither): DUO's restricted noise range, t mapped linearly to the Gaussian γ_t = -log SNR in [γ_min,
        γ_max] (the reference's defaults -3.5, -1.75, set for GPT-2's 50k tokens); unset: the run's schedule."""
        pre = "objective 'udlm': curriculum_"
        if int(steps) != steps or steps < 0:
            raise DnadiffError(f"{pre}steps must be an integer >= 0 (0: no curriculum), got {steps!r}")
        for name, v in (("tau", tau), ("tau_end", tau_end)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise DnadiffError(f"{pre}{name} must be a number > 0, got {v!r}")
        steps = int(steps)
        start = steps // 2 if anneal_start is None else anneal_start
        if int(start) != start or not 0 <= start <= steps:
            raise DnadiffError(f"{pre}anneal_start must be an integer in [0, curriculum_steps={steps}], got {start!r}")
        if (gamma_min is None) != (gamma_max is None):
            raise DnadiffError(f"{pre}gamma_min and curriculum_gamma_max go together (set both or neither)")
        if gamma_min is not None and not (math.isfinite(gamma_min) and math.isfinite(gamma_max)
                                          and gamma_min < gamma_max):
            raise DnadiffError(f"{pre}gamma_min must be < curriculum_gamma_max (finite), got {gamma_min}, {gamma_max}")
        self.curriculum_steps = steps
        self.curriculum_tau = (float(tau), float(tau_end))
        self.curriculum_anneal_start = int(start)
        self.curriculum_gamma = None if gamma_min is None else (float(gamma_min), float(gamma_max))

    def q_sample(self, x0: Tensor, t: Tensor, active: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """z_t ~ q(z_t | x0): each active position is replaced, with probability 1 - α_t, by a uniform data
        token (possibly itself). Two uniforms per position, pads included (draws independent of the pads)."""
        dtype = torch.float32 if x0.device.type == "mps" else torch.float64
        move_p = self.schedule.mask_prob(t.to(device=x0.device, dtype=dtype))[:, None]  # 1 - α_t, (B, 1)
        u = rand_like_on(tuple(x0.shape), generator, x0.device, dtype)
        pick = rand_like_on(tuple(x0.shape), generator, x0.device, dtype)
        new = self.data_ids.to(x0.device)[(pick * self.N).long().clamp_max(self.N - 1)]
        return torch.where((u < move_p) & active, new, x0)

    def loss(self, denoiser, x0, attention_mask=None, t=None, generator=None) -> LossOutput:
        x0_idx = data_index(x0, self.data_ids, self.vocab_size or 0)
        active = real_mask(x0, attention_mask) & (x0_idx >= 0)  # noised and scored: the data tokens
        if t is None:
            t = self.sample_t(x0.shape[0], generator=generator, device=x0.device)
        else:
            t = torch.as_tensor(t, dtype=torch.float32, device=x0.device).expand(x0.shape[0])
        z_t = self.q_sample(x0, t, active, generator)
        return self.nelbo(denoiser(z_t, t), x0_idx, z_t, t, active)

    def nelbo(self, logits: Tensor, x0_idx: Tensor, z_t: Tensor, t: Tensor, active: Tensor,
              alpha_dalpha: tuple[Tensor, Tensor] | None = None, prior: bool = True) -> LossOutput:
        """The estimate of `loss` from the denoiser's logits at (z_t, t): x0_idx from `data_index`, active the
        noised and scored positions. `alpha_dalpha`: (α_t, α'_t) Float64[B] of another schedule (DUO's
        curriculum range), default this objective's; prior=False leaves the prior KL term out."""
        log_x_hat = data_log_probs(logits, self.data_ids)  # (B, L, N)
        if log_x_hat.dtype == torch.float32 and self.N <= 64:
            log_x_hat = log_x_hat.double()  # small N (DNA): float64 keeps N/x̄_i - N/x̄_θ,i exact near t = 0
        if alpha_dalpha is None:
            t64 = t.double()
            alpha_dalpha = (self.schedule.alpha(t64), self.schedule.dalpha(t64))
        f = udlm_rate_kl(log_x_hat, x0_idx, data_index(z_t, self.data_ids, self.vocab_size or 0),
                         *alpha_dalpha)  # (B, L)
        f = torch.where(active, f, torch.zeros_like(f))
        counted = active.sum(dim=1).to(f.dtype)
        nll = f.sum(dim=1)
        if prior:
            alpha_1 = float(self.schedule.alpha(torch.ones((), dtype=torch.float64)))
            nll = nll + counted * prior_kl(alpha_1, self.N)
        nll = nll.float()
        num_tokens = counted.float()
        return LossOutput(nll.sum() / num_tokens.sum().clamp_min(1.0), nll, num_tokens)

    def __repr__(self) -> str:
        return f"UDLMObjective(schedule={self.schedule!r}, N={self.N}, t_min={self.t_min})"
