"""`plaid`: ancestral (DDPM-style) sampling of a Plaid model (Gulrajani & Hashimoto 2023, arXiv 2305.18619, §3;
the reverse step of VDM, Kingma et al. 2021, arXiv 2107.00630, eq. 27-28 / app. A).

z_1 ~ N(0, I) over [B, L, D]; on the grid t_0 = 1 > t_1 > ... > t_N = 0 (linspace, `steps` = N) each step s < t
draws z_s ~ q(z_s | z_t, x = x̂_θ(z_t; t)), the Gaussian posterior of the forward process with the prediction
in place of the data (VDM app. A, written with c = 1 - e^{γ_s - γ_t} = -expm1(γ_s - γ_t) ∈ (0, 1)):

    mean = (α_s/α_t)(1 - c) z_t + α_s c x̂,     variance = c σ_s²

x̂ = softmax(logits) @ E (Plaid §3.2), with the previous step's x̂ as the self-conditioning input (zeros at the
first step). At the end (z_0) every position is rounded through the embedding-table softmax of the
reconstruction term, p(v | z_0) ∝ exp(-|z_0 - α_0 e_v|² / (2σ_0²)): its argmax (the nearest embedding,
`rounding: argmax`, as Plaid decodes) or a draw (`rounding: sample`). Banned tokens (the model's never-sampled
ids, and the mask id: no data token) get no mass in x̂ or in the rounding.

Templates: a fixed token's x̂ is its own embedding at every step (the network still sees the noisy z there)
and it is kept as given at the end. `temperature` divides the logits before x̂ is formed. NFE = steps (one
network call per step). Draws come from the per-row streams (rng.py): samples do not depend on the batch layout.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.diffusion.plaid_net import plaid_parts
from dnadiff.diffusion.plaid_schedule import alpha_sigma
from dnadiff.diffusion.subs import NEG_INF
from dnadiff.errors import DnadiffError
from dnadiff.logs import progress_bar
from dnadiff.samplers.base import SAMPLERS, Sampler, SamplerState


def posterior_step(z: Tensor, x_hat: Tensor, g_t: Tensor, g_s: Tensor, noise: Tensor) -> Tensor:
    """z_s ~ q(z_s | z_t, x̂) (module docstring): z, x_hat, noise Float[B, L, D]; g_t > g_s Float64[B]
    -> Float[B, L, D]."""
    c = -torch.expm1(g_s - g_t)[:, None, None]  # (B, 1, 1)
    a_t, _ = alpha_sigma(g_t)
    a_s, s_s = alpha_sigma(g_s)
    a_t, a_s, s_s = a_t[:, None, None], a_s[:, None, None], s_s[:, None, None]
    mean = (a_s / a_t) * (1 - c) * z.double() + a_s * c * x_hat.double()
    return (mean + c.sqrt() * s_s * noise.double()).to(z.dtype)


def rounding_logits(z0: Tensor, E: Tensor, g0: Tensor) -> Tensor:
    """log p(v | z_0) up to a constant: (α_0 <z_0, e_v> - α_0² |e_v|²/2) / σ_0² -> Float[B, L, V]."""
    a, s = alpha_sigma(g0.double())
    Ed = E.double()
    return ((a * (z0.double() @ Ed.T) - 0.5 * a**2 * (Ed**2).sum(-1)) / s**2).float()


@SAMPLERS.register("plaid")
class PlaidSampler(Sampler):
    """`build_sampler("plaid", steps=256, rounding="argmax", temperature=1.0)`."""

    name = "plaid"
    noise = "gaussian"
    guidable = False  # guidance acts on token logits of a masked state
    model_options = ()

    @classmethod
    def defaults_from(cls, model) -> dict:
        return {}  # time runs over [0, 1]: no training t_min to respect

    def __init__(self, steps: int = 256, *, rounding: str = "argmax", **options):
        super().__init__(steps, **options)
        if rounding not in ("argmax", "sample"):
            raise DnadiffError(f"sampler 'plaid': rounding must be argmax or sample, got {rounding!r}")
        self.rounding = rounding

    def run(self, denoiser, schedule, mask_id: int, x: Tensor, rng) -> SamplerState:
        net, banned, counter = plaid_parts(denoiser)
        B, L = x.shape
        fixed = x != mask_id
        E = net.embedding_table().detach()  # (V, D)
        ban = torch.zeros(E.shape[0], dtype=torch.bool, device=x.device)
        ban[[i for i in [*banned, mask_id] if 0 <= i < E.shape[0]]] = True  # the mask id is no data token either
        e_fixed = E[torch.where(fixed, x, torch.zeros_like(x))]  # (B, L, D): the template's embeddings
        grid = torch.linspace(1.0, 0.0, self.steps + 1, dtype=torch.float64, device=x.device)
        z = rng.at(0, 1).normal((L, E.shape[1])).float()  # z_1 ~ N(0, I)
        x_hat = None
        bar = progress_bar(total=self.steps, desc="sampling (plaid)", unit="step", leave=False) \
            if self.progress else None
        for i in range(self.steps):
            t, s = grid[i].expand(B), grid[i + 1].expand(B)
            g_t, g_s = net.gamma(t)[0], net.gamma(s)[0]
            logits = net.plaid_predict(z, g_t.float(), t.float(), x_hat)  # (B, L, V)
            if counter is not None:
                counter.calls += 1
                counter.rows += B
            logits = logits.masked_fill(ban, NEG_INF) / self.temperature
            x_hat = torch.where(fixed[..., None], e_fixed, torch.softmax(logits, -1) @ E)
            z = posterior_step(z, x_hat, g_t, g_s, rng.at(i + 1, 1).normal(tuple(z.shape[1:])))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        final = rounding_logits(z, E, net.gamma.endpoints()[0]).masked_fill(ban, NEG_INF)
        if self.rounding == "argmax":
            tokens = final.argmax(-1)
        else:
            tokens = rng.at(self.steps + 1, 1).categorical(torch.softmax(final.double(), -1))
        nfe = torch.full((B,), self.steps, dtype=torch.long, device=x.device)
        return SamplerState(x=torch.where(fixed, x, tokens), fixed=fixed, mask_id=mask_id, step=self.steps,
                            nfe=nfe, done=True)
