"""Plaid: Gaussian diffusion of learned token embeddings with a likelihood bound (Gulrajani & Hashimoto,
"Likelihood-Based Diffusion Language Models", NeurIPS 2023, arXiv 2305.18619), the continuous-diffusion row of
the MDLM paper's DNA tables (tab. 6: Plaid <= 3.240 PPL vs MDLM <= 3.199).

Data x ∈ {0..V-1}^L, embedded as e = E[x] (E: learned, unit-norm rows; plaid_net.py). Forward process, variance
preserving, continuous time (VDM, Kingma et al. 2021, arXiv 2107.00630, eq. 1-4; Plaid §2):

    q(z_t | x) = N(α_t e, σ_t² I),   α_t² = sigmoid(-γ_t), σ_t² = sigmoid(γ_t),   γ learned, monotone
                                                                             (plaid_schedule.py)

The variational bound on -log p(x) (VDM eq. 11; Plaid §2 eq. 1-2), per sequence, summed over real tokens:

    L = L_prior + L_recon + L_diffusion
    L_prior     = KL(q(z_1 | x) || N(0, I))                        = ½ Σ_d (σ_1² + α_1² e_d² - 1 - log σ_1²)
    L_recon     = E_{q(z_0|x)} [-log p(x | z_0)],  p(x = v | z_0) = softmax_v(-|z_0 - α_0 e_v|² / (2 σ_0²))
                  (the softmax over the embedding table: VDM eq. 13's factorised decoder, as Plaid)
    L_diffusion = ½ E_{t~U[0,1], ε} [γ'(t) e^{-γ(t)} |e - x̂_θ(z_t; t)|²]      (VDM eq. 17, SNR = e^{-γ})

x̂_θ is Plaid's categorical reparameterisation (§3.2): the network gives logits over the vocabulary and
x̂ = softmax(logits) @ E. Self-conditioning (§3.2; Chen et al. 2022): in training each sequence is, with
probability `self_cond_prob`, predicted a second time with the first (stop-gradient) x̂ as an extra input; in
evaluation (network in eval mode) always, so x̂ is a fixed function of z_t and L stays a bound.

Everything is in nats (bits: / ln 2). `loss` is a one-sample Monte-Carlo estimate (one t per sequence,
stratified over the batch; one ε per position); its mean over draws is the bound itself, an UPPER bound on the
NLL (`dnadiff eval` reports it as kind "bound", as for MDLM). t covers [0, 1] exactly (no t_min: a cut-off
would drop part of the integral and the result would not be a bound). Pads (attention_mask 0) are noised like
any position (the network sees them, never the attention mask: base.py) and never scored.

Schedule training (VDM §4 and app. I.2, which Plaid follows): the bound depends on the schedule's end points
γ_0, γ_1 only (VDM eq. 20), which get its gradient; the interior shape changes only the Monte-Carlo variance,
and gets the gradient of the squared diffusion term instead (`variance_gradient`), so that it flattens the
integrand over t. It does not remove the estimator's heavy tail: near t = 0 the weight e^{-γ} is large and
|e - x̂|² is ~0 except when the noise carries z_t across a decision boundary between embeddings (rare, large),
so per-sequence estimates are mostly small with rare large ones: average many draws (`dnadiff eval
--num-samples`, many windows) before comparing, and read the standard error (an untrained tiny Plaid DiT on
32-bp DNA windows: the per-window median was 4 % of the mean). On the exact-denoiser toy of tests/test_plaid.py
150 Adam steps of the shape on the variance did not lower it measurably.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.diffusion.base import OBJECTIVES, LossOutput, Objective, real_mask
from dnadiff.diffusion.plaid_net import PlaidNetwork, plaid_parts
from dnadiff.diffusion.plaid_schedule import alpha_sigma
from dnadiff.errors import DnadiffError

NETWORK_OPTIONS = ("embed_dim", "gamma_min", "gamma_max", "schedule_hidden", "output_prior")


def normal_like(shape: tuple[int, ...], generator: torch.Generator | None, device) -> Tensor:
    """Float32 standard normals drawn on the generator's device, moved to `device`."""
    gen_device = generator.device if generator is not None else device
    return torch.randn(shape, generator=generator, device=gen_device).to(device)


def prior_kl(e: Tensor, gamma_1: Tensor) -> Tensor:
    """KL(N(α_1 e, σ_1² I) || N(0, I)) per position: e Float[B, L, D], gamma_1 scalar -> Float64[B, L]."""
    a, s = alpha_sigma(gamma_1.double())
    D = e.shape[-1]
    log_s2 = torch.nn.functional.logsigmoid(gamma_1.double())  # log σ_1², exact for large |γ|
    return 0.5 * (D * (s**2 - 1.0 - log_s2) + a**2 * (e.double() ** 2).sum(-1))


def reconstruction_nll(x0: Tensor, E: Tensor, z0: Tensor, gamma_0: Tensor) -> Tensor:
    """-log p(x0 | z_0) with p(v | z_0) = softmax_v(-|z_0 - α_0 e_v|² / (2σ_0²)) -> Float64[B, L]
    (x0 Long[B, L], E Float[V, D], z0 Float[B, L, D])."""
    a, s = alpha_sigma(gamma_0.double())
    Ed, zd = E.double(), z0.double()
    logits = -((zd[..., None, :] - a * Ed) ** 2).sum(-1) / (2 * s**2)  # (B, L, V)
    return -logits.log_softmax(-1).gather(-1, x0.unsqueeze(-1)).squeeze(-1)


def diffusion_term(e: Tensor, x_hat: Tensor, gamma: Tensor, dgamma: Tensor) -> Tensor:
    """VDM eq. 17's integrand at t: ½ γ'(t) e^{-γ(t)} |e - x̂|² -> Float64[B, L] (gamma, dgamma Float[B])."""
    w = 0.5 * dgamma.double() * torch.exp(-gamma.double())  # (B,)
    return w[:, None] * ((e.double() - x_hat.double()) ** 2).sum(-1)


def predict_x(net, z: Tensor, gamma: Tensor, t: Tensor, attention_mask: Tensor | None, self_cond: Tensor,
              E: Tensor) -> Tensor:
    """x̂_θ(z_t; t) = softmax(logits) @ E (Plaid §3.2) -> Float[B, L, D]; rows where self_cond (Bool[B]) is True
    are predicted twice, the second time with the first x̂ (no gradient) as the self-conditioning input."""
    first = None
    if bool(self_cond.any()):
        with torch.no_grad():
            first = torch.softmax(net.plaid_predict(z, gamma, t, None, attention_mask), -1) @ E
        first = torch.where(self_cond[:, None, None], first, torch.zeros_like(first))
    return torch.softmax(net.plaid_predict(z, gamma, t, first, attention_mask), -1) @ E


def variance_gradient(u: Tensor, du: Tensor, l_diff: Tensor) -> None:
    """Make the gradient reaching the schedule's shape (u, u' Float64[B]) that of Σ_b L_b² instead of Σ_b L_b, for
    the per-sequence diffusion term L_b (Float64[B]): d(L_b²)/du_b = 2 L_b dL_b/du_b, so the incoming gradient is
    scaled by 2 L_b (VDM §4 / app. I.2: the schedule minimises the estimator's variance; E[L] does not depend on
    the shape, so E[L²] and the variance have the same gradient). The end points and the network keep the bound's."""
    scale = 2.0 * l_diff.detach()
    u.register_hook(lambda grad: grad * scale)
    du.register_hook(lambda grad: grad * scale)


@OBJECTIVES.register("plaid")
class PlaidObjective(Objective):
    """`build_objective("plaid", self_cond_prob=0.5)`; the network options (embed_dim, gamma_min/max,
    schedule_hidden, output_prior) shape the PlaidNetwork that `wrap_backbone` puts around the run's backbone."""

    name = "plaid"
    needs_time = True
    noise = "gaussian"  # continuous noise on embeddings: only the plaid sampler samples it
    default_sampler = "plaid"

    @classmethod
    def kwargs_for(cls, cfg, tokenizer) -> dict:
        return {"vocab_size": tokenizer.vocab_size, "stratified": cfg.objective.stratified, **cfg.objective.options}

    @classmethod
    def wrap_backbone(cls, backbone, cfg):
        """The trained module of a plaid run: the backbone inside a PlaidNetwork (plaid_net.py)."""
        opts = {k: v for k, v in cfg.objective.options.items() if k in NETWORK_OPTIONS}
        return PlaidNetwork(backbone, **opts)

    @classmethod
    def unwrap_backbone(cls, module):
        """The backbone inside a PlaidNetwork; Plaid's own parts (embedding table, noise schedule, input and
        time maps) have no use outside its Gaussian diffusion and are dropped (the note counts them)."""
        if not isinstance(module, PlaidNetwork):
            return module, ""
        inner = {id(p) for p in module.backbone.parameters()}
        dropped = sum(p.numel() for p in module.parameters() if id(p) not in inner)
        return module.backbone, (f"dropped Plaid's embedding table, noise schedule and input/time maps "
                                 f"({dropped:,} parameters)")

    def __init__(self, schedule=None, mask_id: int | None = None, vocab_size: int | None = None,
                 stratified: bool = True, self_cond_prob: float = 0.5, embed_dim: int = 16,
                 gamma_min: float = -10.0, gamma_max: float = 5.0, schedule_hidden: int = 64,
                 output_prior: bool = True):
        if not 0.0 <= self_cond_prob <= 1.0:
            raise DnadiffError(f"objective 'plaid': self_cond_prob must be in [0, 1], got {self_cond_prob}")
        if not gamma_min < gamma_max:
            raise DnadiffError(f"objective 'plaid': need gamma_min < gamma_max, got {gamma_min}, {gamma_max}")
        self.schedule = schedule  # the run's masking schedule is not used: the noise schedule is learned
        self.vocab_size = vocab_size
        self.stratified = bool(stratified)
        self.self_cond_prob = float(self_cond_prob)
        self.t_min = 0.0  # the bound integrates t over [0, 1]
        self.T = None

    def sample_t(self, batch: int, generator: torch.Generator | None = None, device=None) -> Tensor:
        """Float[B] on [0, 1], one per stratum of the batch when stratified (VDM's low-discrepancy sampler)."""
        gen_device = generator.device if generator is not None else "cpu"
        u = torch.rand(batch, generator=generator, dtype=torch.float64, device=gen_device)
        if self.stratified:
            u = (u + torch.arange(batch, dtype=torch.float64, device=gen_device)) / batch
        return u.to(device=device or "cpu", dtype=torch.float32)

    def terms(self, denoiser, x0: Tensor, attention_mask: Tensor | None = None, t: Tensor | None = None,
              generator: torch.Generator | None = None) -> dict[str, Tensor]:
        """The bound's three terms, Float64[B, L] nats each, 0 at pads: {"diffusion", "recon", "prior"}."""
        net, _, _ = plaid_parts(denoiser)
        real = real_mask(x0, attention_mask)
        B, L = x0.shape
        if t is None:
            t = self.sample_t(B, generator=generator, device=x0.device)
        else:
            t = torch.as_tensor(t, dtype=torch.float32, device=x0.device).expand(B)
        E = net.embedding_table()  # (V, D)
        e = E[x0]  # (B, L, D)
        u, du = net.gamma.shape(t)  # Float64[B] each
        gamma, dgamma = net.gamma.combine(u, du)
        alpha, sigma = alpha_sigma(gamma)
        z = alpha.float()[:, None, None] * e + sigma.float()[:, None, None] * normal_like(e.shape, generator, e.device)
        if getattr(net, "training", False):
            gen_device = generator.device if generator is not None else "cpu"
            sc = (torch.rand(B, generator=generator, device=gen_device) < self.self_cond_prob).to(x0.device)
        else:
            sc = torch.full((B,), self.self_cond_prob > 0, dtype=torch.bool, device=x0.device)
        x_hat = predict_x(net, z, gamma.float(), t, None, sc, E)  # the network never gets the mask (base.py)
        g0, g1 = net.gamma.endpoints()  # γ_0, γ_1
        a0, s0 = alpha_sigma(g0)
        z0 = a0.float() * e + s0.float() * normal_like(e.shape, generator, e.device)
        zero = torch.zeros((B, L), dtype=torch.float64, device=x0.device)
        out = {k: torch.where(real, v, zero) for k, v in (
            ("diffusion", diffusion_term(e, x_hat, gamma, dgamma)),
            ("recon", reconstruction_nll(x0, E, z0, g0)),
            ("prior", prior_kl(e, g1)))}
        if u.requires_grad:  # the shape's gradient becomes that of the diffusion term's variance (below)
            variance_gradient(u, du, out["diffusion"].sum(dim=1))
        return out

    def loss(self, denoiser, x0: Tensor, attention_mask: Tensor | None = None, t: Tensor | None = None,
             generator: torch.Generator | None = None) -> LossOutput:
        parts = self.terms(denoiser, x0, attention_mask, t, generator)
        nll = (parts["diffusion"] + parts["recon"] + parts["prior"]).sum(dim=1).float()  # (B,) nats
        num_tokens = real_mask(x0, attention_mask).sum(dim=1).float()
        return LossOutput(nll.sum() / num_tokens.sum().clamp_min(1.0), nll, num_tokens)

    def __repr__(self) -> str:
        return f"PlaidObjective(self_cond_prob={self.self_cond_prob}, stratified={self.stratified})"

