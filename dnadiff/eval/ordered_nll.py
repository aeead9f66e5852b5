"""Exact NLL of a masked diffusion model decoded in a fixed order (the distribution `ordered` samples).

An MDLM's conditionals p_θ(x^l | x_t) define, for any order σ of the positions, a normalised distribution
    p_σ(x) = Π_k p_θ(x_{σ(k)} | x with σ(k), ..., σ(L-1) masked)
(an any-order autoregressive model: Uria et al. 2014; Hoogeboom et al. 2022). With no time input the MDLM's
continuous NELBO (MDLM eq. 11, α_t = 1 - t) equals E_σ[-log p_σ(x)] over uniformly random σ (Ou et al. 2024,
arXiv 2406.03736; docs/references.md derives the weights, tests/test_ordered_decoding.py checks them exactly;
dnadiff's ε = 1e-3 in α_t moves the bound by O(ε)), so a bound reports the random-order average and this
module one order's exact value: `order` left_to_right, right_to_left, or random (one uniform σ per window:
an unbiased one-sample estimate of that NELBO, the cross-check).

Positions outside the attention mask (N runs, [PAD]: pad_policy "visible") stay visible and are not
scored, as in the bound. The softmax is the SUBS one of the bound (every token but [MASK]; the sampler
also bans special tokens, which can only lower the NLL of what it draws): the same numbers a bound would
use, so the two compare directly. One denoiser call per position: L calls per batch of windows.
A time-conditioned denoiser gets t = the masked fraction of the window's scored positions.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from dnadiff.diffusion.subs import subs_masked_nll
from dnadiff.errors import DnadiffError
from dnadiff.eval.perplexity import token_average
from dnadiff.logs import progress_bar
from dnadiff.samplers.ordered import ORDERS as SAMPLER_ORDERS
from dnadiff.samplers.wrappers import rc_symmetric as strand_averaged

ORDERS = (*SAMPLER_ORDERS, "random")  # the orders the `ordered` sampler draws in, and a random one per window


def order_ranks(scored: Tensor, order: str, generator: torch.Generator | None = None) -> Tensor:
    """Long[B, L]: each scored position's rank in the decoding order (0 = first); unscored positions get L."""
    if order not in ORDERS:
        raise DnadiffError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    B, L = scored.shape
    pos = torch.arange(L, device=scored.device).expand(B, L)
    if order == "left_to_right":
        key = pos.double()
    elif order == "right_to_left":
        key = (L - 1 - pos).double()
    else:
        key = torch.rand(B, L, generator=generator, dtype=torch.float64).to(scored.device)
    key = torch.where(scored, key, torch.full_like(key, math.inf))  # unscored: last, never masked below
    ranks = key.argsort(dim=1).argsort(dim=1)
    return torch.where(scored, ranks, torch.full_like(ranks, L))


def ordered_nll(denoiser, x0: Tensor, mask_id: int, attention_mask: Tensor | None = None,
                order: str = "left_to_right", generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """(nats Float64[B], scored tokens Float64[B]): -log p_σ(x0) of each window and its scored count.

    Step k masks every scored position of rank >= k and scores the one of rank k (rows with fewer scored
    positions are done): max scored count denoiser calls."""
    scored = torch.ones_like(x0, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    ranks = order_ranks(scored, order, generator)  # (B, L)
    counts = scored.sum(dim=1)  # (B,)
    nll = torch.zeros(x0.shape[0], dtype=torch.float64, device=x0.device)
    rows = torch.arange(x0.shape[0], device=x0.device)
    for k in range(int(counts.max()) if counts.numel() else 0):
        x_t = torch.where(scored & (ranks >= k), torch.full_like(x0, mask_id), x0)  # scored, rank >= k
        t = ((counts - k).clamp_min(0) / counts.clamp_min(1)).float()  # (B,) masked fraction
        live = counts > k
        pos = (ranks == k).float().argmax(dim=1)  # (B,) the position of rank k (any, for finished rows)
        tok_nll = subs_masked_nll(denoiser(x_t, t), x0, mask_id)  # (B, L)
        nll += torch.where(live, tok_nll[rows, pos].double(), torch.zeros_like(nll))
    return nll, counts.double()


def evaluate_ordered(model, items, *, order: str = "left_to_right", batch_size: int = 64, seed: int = 0,
                     progress: bool = True, rc_symmetric: bool = False) -> dict[str, Any]:
    """`ordered_nll` of a loaded model over a list/data set of {input_ids, attention_mask} items, in eval mode,
    with the keys `evaluate_model` returns for a bound (per window: "sequence_nats", "sequence_tokens"), so
    eval/paired.py compares it with any other row on the same windows. `rc_symmetric`: the strand-averaged
    denoiser (samplers/wrappers.py, what `dnadiff sample --rc-symmetric` decodes with), two calls a position."""
    if not model.objective.needs_time or model.is_autoregressive or model.objective.noise != "mask":
        raise DnadiffError(f"an ordered NLL needs a masked diffusion model, not {model.config.objective.name!r}")
    loader = torch.utils.data.DataLoader(items, batch_size=batch_size, shuffle=False)
    if progress:
        loader = progress_bar(loader, desc=f"ordered NLL ({order})", unit="batch")
    gen = torch.Generator().manual_seed(seed)
    model.backbone.eval()
    denoiser = model.denoiser
    if rc_symmetric:
        if model.tokenizer.kind != "dna":
            raise DnadiffError("rc_symmetric needs a DNA model")
        denoiser = strand_averaged(denoiser, model.tokenizer.complement_map(), mask_id=model.tokenizer.mask_id)
    n_all, c_all = [], []
    with torch.no_grad():
        for batch in loader:
            x0 = batch["input_ids"].to(model.device)
            am = batch.get("attention_mask")
            n, c = ordered_nll(denoiser, x0, model.tokenizer.mask_id,
                               None if am is None else am.to(model.device), order, gen)
            n_all.append(n.cpu())
            c_all.append(c.cpu())
    n, c = torch.cat(n_all), torch.cat(c_all)
    return {"sequence_nats": n.tolist(), "sequence_tokens": c.tolist(), **token_average(n, c, "evaluate_ordered"),
            "order": order, "rc_symmetric": rc_symmetric, "objective": model.objective.name}
