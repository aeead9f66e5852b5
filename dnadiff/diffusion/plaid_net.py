"""The Plaid network: learned token embeddings, the learned noise schedule and a backbone that reads embeddings
(Gulrajani & Hashimoto 2023, arXiv 2305.18619, §3 "Plaid"). The diffusion objective (diffusion/plaid.py) and
its sampler (samplers/plaid.py) call it; the backbone only sees a Float[B, L, H] input (`inputs_embeds`, which
DiT, Mamba and Caduceus-PH take: backbones/base.py) and knows nothing of the noise.

    net = PlaidNetwork(build_backbone("dit", "tiny", vocab_size=12), embed_dim=16)
    E = net.embedding_table()                  # Float[V, D], unit rows (§3.2: embeddings normalised)
    gamma, dgamma = net.gamma(t)               # Float64[B] each: γ(t) = -log SNR, monotone (plaid_schedule.py)
    logits = net.plaid_predict(z_t, gamma, t, self_cond)   # Float[B, L, V]

Input: [z_t / sd(z_t), x̂_self-cond] (Plaid's self-conditioning, §3.2 after Chen et al. 2022 "Analog Bits")
through a linear map to the backbone width, plus an embedding of γ(t) (so any backbone is time-conditioned;
a time-conditioned DiT also gets t through its adaLN). Output prior (§3.2 "output prior"): the backbone's logits
get log q(z_t | x = v) = (α_t <z_t, e_v> - α_t²|e_v|²/2) / σ_t² + const added, so that with no signal from the
network the prediction is already the exact posterior of a uniform prior over tokens.

The network is the trained module of a plaid run (the objective's `wrap_backbone`): its state dict holds the
backbone under `backbone.` beside the embeddings and the schedule, and loading one whose schedule is not
monotone is refused (plaid_schedule.check_monotone).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dnadiff.denoiser import CountingDenoiser, capabilities_of, chain_of
from dnadiff.diffusion.plaid_schedule import MonotoneGamma, alpha_sigma, check_monotone
from dnadiff.errors import DnadiffError

TIME_FEATURES = 64  # width of the sinusoidal embedding of γ(t)


def sinusoid(x: Tensor, dim: int = TIME_FEATURES) -> Tensor:
    """Float[B] -> Float[B, dim]: [cos(x f_i), sin(x f_i)], f_i geometric in [1, 1e3] (x: γ(t) / 10)."""
    freqs = torch.exp(torch.linspace(0.0, math.log(1000.0), dim // 2, device=x.device, dtype=torch.float32))
    args = x.float()[:, None] * freqs[None]
    return torch.cat((torch.cos(args), torch.sin(args)), dim=-1)


class PlaidNetwork(nn.Module):
    """A backbone that takes embeddings, wrapped with Plaid's embeddings, schedule and input/time maps."""

    time_conditioned = True  # it reads γ(t) always

    def __init__(self, backbone: nn.Module, embed_dim: int = 16, gamma_min: float = -10.0, gamma_max: float = 5.0,
                 schedule_hidden: int = 64, output_prior: bool = True):
        super().__init__()
        self.backbone_capabilities = capabilities_of(backbone)  # what the network declares, read once
        if not self.backbone_capabilities.takes_embeddings:
            raise DnadiffError(f"objective 'plaid': backbone {type(backbone).__name__} cannot take embeddings "
                               "(inputs_embeds); use dit, mamba or caduceus with rcps: false")
        if int(embed_dim) < 1:
            raise DnadiffError(f"objective 'plaid': embed_dim must be >= 1, got {embed_dim}")
        self.backbone = backbone
        V, D, H = int(backbone.vocab_size), int(embed_dim), int(backbone.hidden_size)
        self.embed_dim = D
        self.output_prior = bool(output_prior)
        self.embedding = nn.Parameter(torch.randn(V, D))
        self.gamma = MonotoneGamma(gamma_min, gamma_max, schedule_hidden)
        self.input_proj = nn.Linear(2 * D, H)
        self.time_embed = nn.Sequential(nn.Linear(TIME_FEATURES, H), nn.SiLU(), nn.Linear(H, H))
        self.register_load_state_dict_post_hook(_refuse_non_monotone)

    # the backbone contract's attributes, passed through (model directories record the backbone's config)
    config = property(lambda self: self.backbone.config)
    vocab_size = property(lambda self: self.backbone.vocab_size)
    hidden_size = property(lambda self: self.backbone.hidden_size)
    is_causal = property(lambda self: self.backbone.is_causal)

    def embedding_table(self) -> Tensor:
        """Float[V, D]: the learned embeddings, each row of unit norm."""
        return F.normalize(self.embedding, dim=-1)

    def plaid_predict(self, z: Tensor, gamma: Tensor, t: Tensor, self_cond: Tensor | None = None,
                      attention_mask: Tensor | None = None) -> Tensor:
        """Logits Float[B, L, V] of p_θ(x | z_t) for z Float[B, L, D] at γ(t) Float[B] (t Float[B] for a
        time-conditioned backbone); self_cond Float[B, L, D] is the previous x̂ (None: zeros). A module call
        (forward), so forward hooks (sampling progress, pass counts) see every network evaluation."""
        return self(z, gamma, t, self_cond, attention_mask)

    def forward(self, z: Tensor, gamma: Tensor | None = None, t: Tensor | None = None,
                self_cond: Tensor | None = None, attention_mask: Tensor | None = None) -> Tensor:
        if not torch.is_floating_point(z) or gamma is None:
            raise DnadiffError("a plaid model denoises embeddings, not token ids: score it with its objective "
                               "(dnadiff eval) and sample it with the plaid sampler")
        alpha, sigma = alpha_sigma(gamma.double())  # (B,)
        scale = (alpha**2 / self.embed_dim + sigma**2).rsqrt().float()[:, None, None]  # z's per-coordinate sd
        sc = torch.zeros_like(z) if self_cond is None else self_cond.to(z.dtype)
        h = self.input_proj(torch.cat([z * scale, sc], dim=-1))  # (B, L, H)
        h = h + self.time_embed(sinusoid(gamma / 10.0))[:, None]
        t_in = t.float() if self.backbone_capabilities.time_conditioned else None
        logits = self.backbone(None, t_in, attention_mask=attention_mask, inputs_embeds=h).float()  # (B, L, V)
        if self.output_prior:
            E = self.embedding_table()
            a, s2 = alpha.float()[:, None, None], (sigma**2).float()[:, None, None]
            logits = logits + (a * (z @ E.T) - 0.5 * a**2 * (E**2).sum(-1)) / s2
        return logits


def _refuse_non_monotone(module: PlaidNetwork, incompatible) -> None:
    check_monotone(module.gamma, "plaid model weights")


def plaid_parts(denoiser) -> tuple[object, list[int], CountingDenoiser | None]:
    """(the network, the banned token ids, the call counter) behind a denoiser: a PlaidNetwork (or any object
    with `plaid_predict`, e.g. a test's exact denoiser), possibly inside CountingDenoiser, SuppressTokens and
    the model's Denoiser. Other wrappers (guidance, rc_symmetric) are refused: they act on token logits."""
    banned, counter, obj = [], None, denoiser
    for obj in chain_of(denoiser, depth=8):
        caps = capabilities_of(obj)  # what each layer declares (dnadiff/denoiser.py)
        if caps.plaid:
            return obj, banned, counter
        if not caps.relays_network:  # guidance, rc_symmetric, a labelled model denoiser: not through them
            break
        if isinstance(obj, CountingDenoiser):
            counter = counter or obj
        banned += list(caps.suppressed)
    raise DnadiffError(f"objective 'plaid' needs a plaid network (a model trained with objective plaid), got "
                       f"{type(obj).__name__}; guidance and rc_symmetric do not apply to plaid models")


__all__ = ["PlaidNetwork", "plaid_parts", "sinusoid"]
