"""Likelihood bounds of a model over a data set: nats/token, bits/token, perplexity (bound), SE.

    from dnadiff.eval.perplexity import evaluate_bound
    res = evaluate_bound(denoiser, objective, batches, num_samples=1, generator=g)
    res["perplexity"], res["std_error"]

`batches` yields (x0, attention_mask) pairs (attention_mask may be None), dicts with
"input_ids"/"attention_mask", or bare x0 tensors. For each sequence the objective's `nll` (the
negative ELBO estimate of a diffusion objective, exact NLL for `ar`) is averaged over
`num_samples` independent draws (K = 1 matches the paper: one MC time sample per sequence;
K > 1 tightens the estimate, never the bound itself). The data-set figure is the token-level
average of the reference code: nats/token = Σ_seq nll / Σ_seq num_tokens; perplexity = exp of it
(an upper bound for diffusion models, up to MC error).

std_error: standard error of nats/token over sequences (delta method for a ratio of sums,
SE = sqrt(Σ_i (n_i - R c_i)^2 / (N (N - 1))) / mean(c)); the stratified time draw makes the
sequences' estimates slightly anti-correlated, so this is conservative. The perplexity SE is
perplexity × std_error (delta method).

Discrete time: an objective built with T evaluates the discrete-T bound (tab. 11).
Quadrature (deterministic in t; masks still drawn at random):
  continuous objectives: `quadrature=K` Gauss-Legendre nodes on [0, 1] estimate
      ∫_0^1 E_{x_t}[loss(t)] dt (the full NELBO, no t_min cut-off);
  discrete objectives: any truthy `quadrature` sums the T steps exactly, Σ_i KL_i (T passes).
Plain PyTorch under torch.no_grad(); the caller puts the model in eval mode (and EMA weights).

More t-samples per window (`num_samples=K`) tighten the Monte-Carlo estimate of the bound (its
variance falls as 1/K), never the bound itself. `stratify_repeats=True` draws the K times of each
window low-discrepancy (t_k = t_min + (1 - t_min)(k + u_k)/K, one uniform per stratum: the
sampler of MDLM app. D.3 applied across a window's K draws instead of across the batch): still an
unbiased estimate of the same bound, with less variance. An importance-weighted average
(-log mean_k exp(-nll_k), as in IWAE) is NOT offered: one t-sample of the MDLM loss is an unbiased
estimate of the NELBO, not the log of an unbiased estimate of p(x), so that average bounds nothing.
`per_sequence=True` adds every window's nats and scored tokens ("sequence_nats",
"sequence_tokens", in the data's order): what paired comparisons of two models on the same
windows need (eval/paired.py). `trim_tail_padding=True` scores a window whose tail is unscored
(the [PAD]s after a region's end in tiled windows) as a sequence of its scored length: a model
trained on full random crops never saw a [PAD] tail, and a bidirectional one reads it.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
import torch
from torch import Tensor

from dnadiff.config import replace
from dnadiff.diffusion import OBJECTIVES
from dnadiff.errors import DnadiffError
from dnadiff.logs import progress_bar
from dnadiff.model import build_objective_for

LN2 = math.log(2.0)


def _unpack(batch: Any, device) -> tuple[Tensor, Tensor | None]:
    if isinstance(batch, dict):
        x0, mask = batch["input_ids"], batch.get("attention_mask")
    elif isinstance(batch, (tuple, list)):
        x0, mask = batch[0], (batch[1] if len(batch) > 1 else None)
    else:
        x0, mask = batch, None
    if device is not None:
        x0 = x0.to(device)
        mask = None if mask is None else mask.to(device)
    return x0, mask


def _nodes(objective, quadrature) -> tuple[list[float], list[float]]:
    """(times, weights) of the deterministic t-grid."""
    if getattr(objective, "T", None):
        T = objective.T
        return [i / T for i in range(1, T + 1)], [1.0 / T] * T
    k = int(quadrature)
    if k < 1:
        raise DnadiffError(f"quadrature must be a positive number of nodes, got {quadrature!r}")
    x, w = np.polynomial.legendre.leggauss(k)  # on [-1, 1]
    return [float(v) for v in 0.5 * (x + 1.0)], [float(v) for v in 0.5 * w]


def evaluate_bound(
    denoiser,
    objective,
    batches: Iterable,
    num_samples: int = 1,
    generator: torch.Generator | None = None,
    quadrature: int | bool | None = None,
    progress: bool = False,
    device: torch.device | str | None = None,
    stratify_repeats: bool = False,
    per_sequence: bool = False,
    trim_tail_padding: bool = False,
) -> dict[str, Any]:
    """Bound of `objective` for `denoiser` over `batches`; see the module docstring.

    Returns {"nats_per_token", "bits_per_token", "perplexity", "std_error" (nats/token),
    "bits_std_error", "perplexity_std_error", "num_tokens", "num_sequences", "num_samples",
    "objective", "T", "quadrature"}.
    """
    if num_samples < 1:
        raise DnadiffError(f"num_samples must be >= 1, got {num_samples}")
    diffusion = getattr(objective, "needs_time", False) and hasattr(objective, "schedule")
    if quadrature and not diffusion:
        raise DnadiffError(f"quadrature applies to diffusion objectives, not {objective.name!r}")
    repeats = 1 if getattr(objective, "deterministic", False) else num_samples
    nodes = _nodes(objective, quadrature) if quadrature else None
    if stratify_repeats and repeats > 1 and (not diffusion or getattr(objective, "T", None) or quadrature):
        raise DnadiffError("stratify_repeats applies to continuous-time diffusion objectives without quadrature")
    strata = stratify_repeats and repeats > 1 and diffusion
    if progress:
        batches = progress_bar(batches, desc=f"bound ({objective.name})", unit="batch")
    seq_nll, seq_tok = [], []
    with torch.no_grad():
        for batch in batches:
            x0, mask = _unpack(batch, device)
            nll = torch.zeros(x0.shape[0], dtype=torch.float64, device=x0.device)
            tok = torch.zeros_like(nll)
            if strata:  # one uniform per (window, stratum), strata in a random order per window
                gen_device = generator.device if generator is not None else "cpu"
                u = torch.rand(x0.shape[0], repeats, generator=generator, dtype=torch.float64, device=gen_device)
                t_min = float(objective.t_min)
                t_all = (t_min + (1.0 - t_min) * (u + torch.arange(repeats, dtype=torch.float64,
                                                                     device=gen_device)) / repeats).float()
            groups = _tail_groups(mask) if trim_tail_padding else [(None, x0.shape[1])]
            for rows, length in groups:
                xg = x0 if rows is None else x0[rows, :length]
                mg = mask if rows is None or mask is None else mask[rows, :length]
                tg = (t_all if rows is None else t_all[rows.to(t_all.device)]) if strata else None
                ng, cg = _score_rows(objective, denoiser, xg, mg, repeats, tg, nodes, generator)
                if rows is None:
                    nll, tok = ng, cg
                else:
                    nll[rows], tok[rows] = ng, cg
            seq_nll.append(nll.cpu() / repeats)
            seq_tok.append(tok.cpu() / repeats)
    if not seq_nll:
        raise DnadiffError("evaluate_bound: the data set is empty")
    n, c = torch.cat(seq_nll), torch.cat(seq_tok)  # (N,), (N,)
    extra = {"sequence_nats": n.tolist(), "sequence_tokens": c.tolist()} if per_sequence else {}
    return extra | token_average(n, c, "evaluate_bound") | {
        "num_samples": repeats,
        "objective": objective.name,
        "pad_policy": getattr(objective, "pad_policy", None),  # diffusion objectives: how pads were treated
        "T": getattr(objective, "T", None),
        "quadrature": (len(nodes[0]) if nodes else None),
        "stratified_repeats": bool(strata),
    }


def token_average(nats: Tensor, tokens: Tensor, who: str) -> dict[str, Any]:
    """The data-set figures of per-sequence nats and scored tokens (Float[N] each): nats/token = Σ nats / Σ tokens,
    bits, perplexity and the delta-method SE of that ratio over sequences (module docstring)."""
    total = float(tokens.sum())
    if total == 0:
        raise DnadiffError(f"{who}: no real tokens to score (all padding?)")
    mean = float(nats.sum()) / total
    N = nats.numel()
    se = float(((nats - mean * tokens) ** 2).sum() / (N * (N - 1))) ** 0.5 / float(tokens.mean()) if N > 1 else math.nan
    ppl = math.exp(mean)
    return {"nats_per_token": mean, "bits_per_token": mean / LN2, "perplexity": ppl, "std_error": se,
            "bits_std_error": se / LN2, "perplexity_std_error": ppl * se, "num_tokens": int(round(total)),
            "num_sequences": N}


def _tail_groups(mask: Tensor | None) -> list[tuple[Tensor | None, int]]:
    """trim_tail_padding: the batch's rows grouped by their length without the unscored tail (mask 0 at
    the end: [PAD]s after a region's end, trailing N), so each group is scored as sequences of that
    length: a bidirectional denoiser then never reads a tail it was not trained on, and a causal one
    (AR, Markov) gives the same numbers either way."""
    if mask is None or bool(mask[:, -1].all()):
        return [(None, 0 if mask is None else mask.shape[1])]
    L = mask.shape[1]
    pos = torch.arange(1, L + 1, device=mask.device)
    lengths = (pos * (mask != 0)).amax(dim=1).clamp(min=1)  # 1 + the last scored position
    return [(torch.nonzero(lengths == n).flatten(), int(n)) for n in torch.unique(lengths).tolist()]


def _score_rows(objective, denoiser, x0, mask, repeats, t_all, nodes, generator) -> tuple[Tensor, Tensor]:
    """Summed nll and scored tokens of each row over `repeats` draws (stratified times `t_all`, Gauss
    nodes, or the objective's own draw)."""
    nll = torch.zeros(x0.shape[0], dtype=torch.float64, device=x0.device)
    tok = torch.zeros_like(nll)
    for k in range(repeats):
        if t_all is not None:
            out = objective.loss(denoiser, x0, mask, t=t_all[:, k].to(x0.device), generator=generator)
            nll += out.nll.double()
            tok += out.num_tokens.double()
            continue
        if nodes is None:
            out = objective.loss(denoiser, x0, mask, generator=generator)
            nll += out.nll.double()
            tok += out.num_tokens.double()
            continue
        for t, w in zip(*nodes):
            t_vec = torch.full((x0.shape[0],), t, dtype=torch.float32, device=x0.device)
            out = objective.loss(denoiser, x0, mask, t=t_vec, generator=generator)
            nll += w * out.nll.double()
        tok += out.num_tokens.double()
    return nll, tok


def evaluate_model(model, items, *, T=None, num_samples=1, quadrature=None, batch_size=32, seed=0, progress=True,
                   stratify_repeats=False, per_sequence=False, trim_tail_padding=False):
    """`evaluate_bound` of a loaded model (`dnadiff.load`) over a list/data set of {input_ids,
    attention_mask} items, in eval mode, batches in order; T: the discrete-time bound instead.
    What `dnadiff eval` and the demo report."""
    objective = model.objective
    if not getattr(objective, "has_bound", True):  # ssdlm: a denoising loss, no likelihood
        raise DnadiffError(f"a {model.config.objective.name} model has no likelihood bound to evaluate (its loss is "
                           "a denoising cross-entropy): score its samples instead (generative perplexity)")
    if T is not None:
        if not objective.discrete_bound:
            names = " or ".join(sorted(OBJECTIVES.where(discrete_bound=True), key=lambda n: n != "mdlm"))
            raise DnadiffError(f"--T needs an {names} model, not {model.config.objective.name!r}")
        _, objective = build_objective_for(replace(model.config, **{"objective.T": T}), model.tokenizer)
    loader = torch.utils.data.DataLoader(items, batch_size=batch_size, shuffle=False)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    model.backbone.eval()
    return evaluate_bound(model.denoiser, objective, loader, num_samples=num_samples, generator=gen,
                          quadrature=quadrature, progress=progress, device=model.device,
                          stratify_repeats=stratify_repeats, per_sequence=per_sequence,
                          trim_tail_padding=trim_tail_padding)
