"""Shared pieces of the objectives: LossOutput, the registry, the forward process, time sampling.

Every objective is a small object with

    loss(denoiser, x0, attention_mask=None, t=None, generator=None) -> LossOutput

where `denoiser(x_t: Long[B, L], t: Float[B]) -> logits Float[B, L, V]` is any callable (a
backbone, or an analytic denoiser in the tests). Objectives apply their parameterisation (SUBS,
score, softmax) to the raw logits themselves.

Conventions shared by all objectives:
  * `nll[b]` is in nats, summed over the scored tokens of sequence b (for diffusion: the
    per-sequence negative ELBO estimate; for `ar`: the exact NLL; for `mlm`: masked-token CE);
  * `num_tokens[b]` counts the real (attention_mask = 1) tokens that the bound covers;
  * `loss = nll.sum() / num_tokens.sum()`, the token-level average of the reference code;
  * positions that are not scored contribute exactly 0: they are removed with `torch.where`, so
    even NaN/inf logits there cannot leak into the loss.

Pads (attention_mask = 0) in the diffusion objectives (mdlm, d3pm, sedd) follow `pad_policy`:
  "reference" (default)  pads are masked like any token by the forward process, but only real
      tokens are scored and counted: the official MDLM code (every position goes through q_xt,
      the per-token loss is multiplied by the attention mask), behind the paper's LM1B tab. 1;
  "score"   pads are masked, scored and counted: the true NELBO of the padded sequence (>= its
      entropy; equal to -log p with an exact denoiser);
  "visible" pads are never masked and never scored (the model sees where a sequence ends; for
      fixed-length DNA windows, where [PAD] / N only fill a window's tail or gaps). On padded text
      this "bound" can fall below the data's entropy.
The denoiser is called with (x_t, t) only, never with the attention mask: under reference / score
a pad is a masked position of x_t, under visible a visible token, in training and evaluation alike
(the items are fixed-length, so a sequence's bound does not depend on how it is batched).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from dnadiff.denoiser import Denoiser
from dnadiff.diffusion.schedules import Schedule
from dnadiff.errors import DnadiffError
from dnadiff.registry import Registry

OBJECTIVES = Registry("objective")  # filled by the imports of dnadiff/diffusion/__init__.py

PAD_POLICIES = ("reference", "score", "visible")



@dataclass
class LossOutput:
    """loss: scalar to optimise; nll: Float[B] nats per sequence; num_tokens: Float[B]."""

    loss: Tensor
    nll: Tensor
    num_tokens: Tensor


def rand_like_on(shape: tuple[int, ...], generator: torch.Generator | None, device, dtype=torch.float32) -> Tensor:
    """Uniforms drawn on the generator's device (CUDA generators need CUDA tensors), moved to `device`."""
    gen_device = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, device=gen_device, dtype=dtype).to(device)


def real_mask(x0: Tensor, attention_mask: Tensor | None) -> Tensor:
    """Bool[B, L]: True at real tokens."""
    if attention_mask is None:
        return torch.ones_like(x0, dtype=torch.bool)
    if attention_mask.shape != x0.shape:
        raise DnadiffError(f"attention_mask shape {tuple(attention_mask.shape)} != x0 shape {tuple(x0.shape)}")
    return attention_mask.to(device=x0.device).bool()


def q_sample(
    x0: Tensor,
    t: Tensor,
    schedule: Schedule,
    mask_id: int,
    attention_mask: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Forward process q(x_t | x0) of MDLM §3.1 (eq. 2 with the absorbing prior):
    each token becomes `mask_id` independently with probability 1 - α(t); positions where
    `attention_mask` is 0 never do (the objectives pass the positions their pad policy masks).
    One uniform is drawn per position, pads included, so the real positions' draws do not
    depend on the policy.

    x0: Long[B, L]; t: Float[B]. Returns Long[B, L].
    """
    dtype = torch.float32 if x0.device.type == "mps" else torch.float64  # MPS has no float64
    p_mask = schedule.mask_prob(t.to(device=x0.device, dtype=dtype))[:, None]  # (B, 1)
    u = rand_like_on(tuple(x0.shape), generator, x0.device, dtype)  # (B, L)
    masked = (u < p_mask) & real_mask(x0, attention_mask)
    return torch.where(masked, torch.full_like(x0, mask_id), x0)


def reduce_loss(per_token: Tensor, scored: Tensor, counted: Tensor) -> LossOutput:
    """Sum per-token nats over `scored` positions (exact zeros elsewhere) into a LossOutput.

    per_token: Float[B, L]; scored, counted: Bool[B, L] (counted = tokens the bound covers).
    """
    per_token = torch.where(scored, per_token, torch.zeros_like(per_token))
    nll = per_token.sum(dim=1)  # (B,)
    num_tokens = counted.sum(dim=1).to(nll.dtype)  # (B,)
    loss = nll.sum() / num_tokens.sum().clamp_min(1.0)  # an all-pad batch gives 0, not NaN
    return LossOutput(loss=loss, nll=nll, num_tokens=num_tokens)


class Objective:
    """Base: `name`, `loss(...)`, and two flags for callers:
    needs_time: the objective draws a diffusion time and passes it to the denoiser (mdlm, d3pm,
        sedd); False for ar / mlm, which call the denoiser with t = 0. Whether the backbone *uses*
        t is the backbone's business (`time_conditioned`), not the objective's.
    deterministic: one pass gives the exact value (ar); evaluation then skips repeats.

What a model trained with it can do (DiffusionModel, the sample/design/eval commands read these):
    generator: it samples sequences (mlm: False, a model to fine-tune first).
    autoregressive: it samples left to right with `default_sampler`, never with a diffusion sampler.
    discrete_bound: it has the discrete-time bound of `T` (eval --T).
    noise: the forward process's noise, "mask" (absorbing) or "uniform" (udlm); a model samples only
        with samplers that declare the same noise.
    """

    name = "base"
    needs_time = False
    deterministic = False
    generator = True
    autoregressive = False
    default_sampler: str | None = None  # None: the config's sample.sampler
    discrete_bound = False
    noise = "mask"

    @classmethod
    def kwargs_for(cls, cfg, tokenizer) -> dict:
        """Constructor keywords for a run config (`cfg.objective` holds T, t_min, options...) and its
        tokenizer; the config's own `objective.options` come last."""
        return {"mask_id": tokenizer.mask_id, "vocab_size": tokenizer.vocab_size, **cls.config_kwargs(cfg, tokenizer),
                **cfg.objective.options}

    @classmethod
    def config_kwargs(cls, cfg, tokenizer) -> dict:
        return {}

    @classmethod
    def wrap_backbone(cls, backbone, cfg):
        """The module a run of this objective trains and saves around the run's backbone: the backbone itself,
        or (plaid) a network holding the objective's own learned parts (embeddings, noise schedule)."""
        return backbone

    @classmethod
    def unwrap_backbone(cls, module):
        """The inverse of `wrap_backbone`, for a model of this objective used elsewhere (fine-tuning, init_from
        with another objective): (the backbone inside, a note naming the parts dropped; "" when none)."""
        return module, ""

    def loss(
        self,
        denoiser: Denoiser,
        x0: Tensor,
        attention_mask: Tensor | None = None,
        t: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> LossOutput:
        raise NotImplementedError


class DiffusionObjective(Objective):
    """Common part of mdlm / d3pm / sedd: schedule, mask id, time sampling, forward process.

    Time: continuous t ~ U[t_min, 1] (stratified over the batch, app. D.3), as the reference
    (`sampling_eps` = 1e-3; like it, no (1 - t_min) rescaling of the estimate). With `T`, time is
    discrete: i ~ U{1..T}, t = i/T, s = (i-1)/T (eq. 8), and the estimate is T times the sampled term.
    The denoiser is called with this t (not σ(t)).
    """

    needs_time = True

    @classmethod
    def config_kwargs(cls, cfg, tokenizer) -> dict:
        o = cfg.objective
        return {"T": o.T, "t_min": o.t_min, "stratified": o.stratified, "pad_policy": o.pad_policy}

    def __init__(
        self,
        schedule: Schedule | None = None,
        mask_id: int | None = None,
        vocab_size: int | None = None,
        T: int | None = None,
        t_min: float = 1e-3,
        stratified: bool = True,
        pad_policy: str = "reference",
    ):
        if pad_policy not in PAD_POLICIES:
            raise DnadiffError(
                f"objective {self.name!r}: pad_policy must be one of {', '.join(PAD_POLICIES)}, got {pad_policy!r}")
        if schedule is None:
            raise DnadiffError(f"objective {self.name!r}: a schedule is required")
        if mask_id is None:
            raise DnadiffError(f"objective {self.name!r}: mask_id is required")
        if T is not None and (int(T) != T or T < 1):
            raise DnadiffError(f"objective {self.name!r}: T must be a positive integer or None, got {T!r}")
        if not 0.0 <= t_min < 1.0:
            raise DnadiffError(f"objective {self.name!r}: t_min must be in [0, 1), got {t_min}")
        self.schedule = schedule
        self.mask_id = int(mask_id)
        self.vocab_size = vocab_size
        self.T = None if T is None else int(T)
        self.t_min = float(t_min)
        self.stratified = stratified
        self.pad_policy = pad_policy

    # -- time -------------------------------------------------------------------------------
    def sample_t(self, batch: int, generator: torch.Generator | None = None, device=None) -> Tensor:
        """Float[B] times: continuous in [t_min, 1], or on the grid {1/T, ..., 1}."""
        if self.T is None:
            return self.schedule.sample_t(
                batch, t_min=self.t_min, stratified=self.stratified, generator=generator, device=device
            )
        gen_device = generator.device if generator is not None else "cpu"
        u = torch.rand(batch, generator=generator, dtype=torch.float64, device=gen_device)
        if self.stratified:
            u = (u + torch.arange(batch, dtype=torch.float64, device=gen_device)) / batch
        i = (torch.floor(u * self.T) + 1).clamp(1, self.T)  # uniform on {1..T}
        return (i / self.T).to(device=device or "cpu", dtype=torch.float32)

    def snap(self, t: Tensor) -> Tensor:
        """Map a given t ∈ (0, 1] to the discrete grid: i = ceil(tT) in [1, T] (a grid point,
        even after float32 rounding, maps to itself), t = i/T."""
        if self.T is None:
            return t
        i = torch.ceil(t.double() * self.T - 1e-4).clamp(1, self.T)
        return (i / self.T).to(t.dtype)

    # -- the per-token term -------------------------------------------------------------------
    def token_loss(self, denoiser: Denoiser, x0: Tensor, x_t: Tensor, t: Tensor, real: Tensor) -> Tensor:
        """Float[B, L] nats of the bound at each position for this (x_t, t); only positions
        that are masked (and real) are read, except in objectives with extra terms."""
        raise NotImplementedError

    def extra_nll(self, denoiser: Denoiser, x0: Tensor, real: Tensor) -> Tensor | None:
        """Float[B]: t-independent terms of the bound (D3PM reconstruction), or None."""
        return None

    def pad_sets(self, real: Tensor) -> tuple[Tensor, Tensor]:
        """(maskable, counted) Bool[B, L] for the pad policy (module docstring): the positions the
        forward process may mask, and the positions the bound covers (scored when masked)."""
        every = torch.ones_like(real)
        maskable = real if self.pad_policy == "visible" else every
        counted = every if self.pad_policy == "score" else real
        return maskable, counted

    def loss(self, denoiser, x0, attention_mask=None, t=None, generator=None) -> LossOutput:
        maskable, counted = self.pad_sets(real_mask(x0, attention_mask))
        if t is None:
            t = self.sample_t(x0.shape[0], generator=generator, device=x0.device)
        else:
            t = self.snap(torch.as_tensor(t, dtype=torch.float32, device=x0.device).expand(x0.shape[0]))
        x_t = q_sample(x0, t, self.schedule, self.mask_id, maskable, generator)
        per_token = self.token_loss(denoiser, x0, x_t, t, counted)  # (B, L)
        scored = counted & (x_t == self.mask_id)
        out = reduce_loss(per_token, scored, counted)
        extra = self.extra_nll(denoiser, x0, counted)  # (B,)
        if extra is None:
            return out
        nll = out.nll + extra
        return LossOutput(nll.sum() / out.num_tokens.sum().clamp_min(1.0), nll, out.num_tokens)

    def discrete_weight(self, t: Tensor) -> Tensor:
        """T (α_s - α_t) / (1 - α_t), s = t - 1/T: the discrete-time weight of eq. 8 (times T for
        the uniform draw of the step). As T → ∞ it tends to the continuous weight -α'_t/(1-α_t)
        of eq. 10; for log-linear with ε = 0 it equals 1/t exactly (docs/references.md)."""
        t64 = t.double()
        m_t = self.schedule.mask_prob(t64)  # 1 - α_t, cancellation-free
        m_s = self.schedule.mask_prob((t64 - 1.0 / self.T).clamp_min(0.0))
        return (self.T * (m_t - m_s) / m_t).to(t.dtype)  # α_s - α_t = m_t - m_s

    def weight(self, t: Tensor) -> Tensor:
        """Float[B] weight of the masked-token CE: continuous (eq. 10) or discrete (eq. 8)."""
        if self.T is None:
            return self.schedule.loss_weight(t)
        return self.discrete_weight(t)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(schedule={self.schedule!r}, mask_id={self.mask_id}, T={self.T}, "
                f"pad_policy={self.pad_policy!r})")


def gather_token(log_probs: Tensor, x0: Tensor) -> Tensor:
    """log_probs: Float[B, L, V], x0: Long[B, L] -> Float[B, L] entries at the true tokens."""
    return log_probs.gather(-1, x0.unsqueeze(-1)).squeeze(-1)

