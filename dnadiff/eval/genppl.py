"""Generative perplexity (MDLM §5.1.2 / tab. 5): how likely samples are under an external causal LM.

Samples are decoded to text, re-tokenised with the scoring model's tokenizer, and scored by any
Hugging Face causal LM loaded from a local folder or the HF cache (default `gpt2-large`; offline).

    texts = decode_samples(ids, tokenizer, eos_text=scorer_tok.eos_token)
    res = generative_perplexity(texts, "gpt2-large", batch_size=8)   # JSON-able dict

Scoring rules:
  * the scorer's BOS is prepended so that the first sample token is scored too (GPT-2's BOS is
    `<|endoftext|>`); leading EOS tokens of a sample (a BOS of the generator decoded as the same
    string) are stripped first;
  * tokens after the FIRST EOS are not scored; the first EOS itself is (ending the text is part of
    the sample). The reference MDLM code says "after first EOS" but masks every EOS token and scores
    everything after it (docs/references.md, known pitfalls);
  * pads of the batch are never scored;
  * samples longer than the scorer's context W are scored with sliding windows (the Hugging Face
    "perplexity of fixed-length models" recipe): windows of W tokens start every `stride` tokens
    (default W // 2, at most W // 2), the first window scores all its tokens and every later one
    only its last tokens not scored before, so each token is scored exactly once and (after the
    first window) with at least W - stride tokens of context;
  * gen PPL = exp(Σ nll / Σ scored tokens) over all samples (token-level, as the reference);
  * per-sample unigram entropy (nats) of the scored tokens (EOS excluded): low entropy flags the
    repetitive samples that game generative perplexity (Zheng et al. 2024).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from dnadiff.errors import DnadiffError

DEFAULT_SCORER = "gpt2-large"


def load_scorer(name_or_path: str = DEFAULT_SCORER, device: str | torch.device = "cpu", dtype=None):
    """(model, tokenizer) of a HF causal LM from a local path or the HF cache, without network."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, local_files_only=True, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise DnadiffError(
            f"scorer {name_or_path!r}: not found locally (give a local folder or pre-download it into the "
            f"Hugging Face cache): {str(exc).splitlines()[0][:200]}"
        ) from None
    return model.to(device).eval(), tok


def decode_samples(ids: Tensor | Sequence[Sequence[int]], tokenizer, eos_text: str | None = None,
                   strip_bos: bool = True) -> list[str]:
    """Generated ids -> texts. Each generator EOS becomes `eos_text` (default: the generator's own
    EOS string; pass the scorer's EOS so that the scorer sees where a sample ends); other special
    tokens (BOS, pads, masks left over) are dropped."""
    if isinstance(ids, Tensor):
        ids = ids.tolist()
    eos, bos = tokenizer.eos_id, tokenizer.bos_id
    if eos_text is None:
        eos_text = tokenizer.hf.eos_token or tokenizer.hf.sep_token or ""
    out = []
    for row in ids:
        row = list(row)
        if strip_bos and bos is not None:
            while row and row[0] == bos:
                row = row[1:]
        pieces, cur = [], []
        for t in row:
            if t == eos:
                pieces.append(tokenizer.decode(cur, skip_special=True))
                cur = []
            else:
                cur.append(t)
        pieces.append(tokenizer.decode(cur, skip_special=True))
        out.append(eos_text.join(pieces))
    return out


def first_eos_mask(tokens: Tensor, eos_id: int, attention_mask: Tensor | None = None) -> Tensor:
    """Bool[B, N]: True at positions up to and including the first EOS of each row (all of a row
    without EOS), and only at real (attention_mask = 1) positions."""
    is_eos = (tokens == eos_id).long()  # (B, N)
    eos_before = torch.cumsum(is_eos, dim=-1) - is_eos  # number of EOS strictly before each position
    keep = eos_before == 0
    if attention_mask is not None:
        keep = keep & attention_mask.bool()
    return keep


def unigram_entropy(tokens: Sequence[int]) -> float:
    """Entropy (nats) of the empirical token distribution of one sequence; 0 for an empty one."""
    n = len(tokens)
    if n == 0:
        return 0.0
    return float(-sum(c / n * math.log(c / n) for c in Counter(tokens).values()))


def _context_size(model) -> int:
    cfg = model.config
    for name in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        v = getattr(cfg, name, None)
        if isinstance(v, int) and v > 1:
            return v
    return 1024


@torch.no_grad()
def _window_nll(model, windows: list[list[int]], pad_id: int, device) -> list[list[float]]:
    """Per-token NLL of tokens 1..n-1 of each window given its earlier tokens."""
    width = max(len(w) for w in windows)
    ids = torch.full((len(windows), width), pad_id, dtype=torch.long)
    am = torch.zeros_like(ids)
    for i, w in enumerate(windows):
        ids[i, : len(w)] = torch.tensor(w)
        am[i, : len(w)] = 1
    ids, am = ids.to(device), am.to(device)
    logits = model(input_ids=ids, attention_mask=am).logits[:, :-1].float()  # (B, W-1, V)
    logp = F.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, W-1)
    return [nll[i, : len(w) - 1].tolist() for i, w in enumerate(windows)]


def sliding_windows(n: int, ctx: int, stride: int) -> list[tuple[int, int, int]]:
    """(start, end, skip) of the windows over a sequence of n tokens: window [start, end) scores
    its predicted tokens (positions start+1 .. end-1) except the first `skip` (already scored)."""
    out, start, scored_upto = [], 0, 1  # position 0 (BOS) is never predicted
    while scored_upto < n:
        end = min(start + ctx, n)
        out.append((start, end, scored_upto - (start + 1)))
        scored_upto = end
        start += stride
    return out


def scoring_window(model, max_length: int | None = None, stride: int | None = None) -> tuple[int, int]:
    """(window, stride) of the sliding-window scoring: the scorer's context (capped by max_length)
    and the stride, default half the window, checked to be in [1, window // 2]."""
    ctx = min(max_length or _context_size(model), _context_size(model))
    if ctx < 2:
        raise DnadiffError(f"generative perplexity: context {ctx} is too short")
    stride = max(1, ctx // 2) if stride is None else int(stride)
    if not 1 <= stride <= max(1, ctx // 2):
        raise DnadiffError(f"generative perplexity: stride must be in [1, {max(1, ctx // 2)}] "
                           f"(half the window {ctx}), got {stride}")
    return ctx, stride


def score_token_ids(model, sequences: list[list[int]], bos_id: int, eos_id: int, pad_id: int | None = None,
                    batch_size: int = 8, max_length: int | None = None, device=None,
                    stride: int | None = None) -> list[list[float]]:
    """Per-token NLLs (nats) of each sequence (list of scorer token ids) given [BOS] + its prefix,
    for all its tokens (masking happens in the caller). Long sequences: sliding windows of the
    scorer's context with `stride` <= context // 2 (module docstring)."""
    device = device if device is not None else next(model.parameters()).device
    ctx, stride = scoring_window(model, max_length, stride)
    pad_id = eos_id if pad_id is None else pad_id
    jobs: list[tuple[int, list[int], int]] = []  # (sequence index, window, predicted tokens to skip)
    for si, seq in enumerate(sequences):
        full = [bos_id] + list(seq)
        for start, end, skip in sliding_windows(len(full), ctx, stride):
            jobs.append((si, full[start:end], skip))
    out: list[list[float]] = [[] for _ in sequences]
    for b in range(0, len(jobs), batch_size):
        chunk = jobs[b:b + batch_size]
        for (si, _, skip), nll in zip(chunk, _window_nll(model, [w for _, w, _ in chunk], pad_id, device)):
            out[si].extend(nll[skip:])
    return out


def generative_perplexity(
    texts: Sequence[str],
    scorer: Any = DEFAULT_SCORER,
    tokenizer=None,
    batch_size: int = 8,
    max_length: int | None = None,
    max_tokens: int | None = None,
    device: str | torch.device | None = None,
    stop_at_first_eos: bool = True,
    stride: int | None = None,
) -> dict[str, Any]:
    """Score `texts` with a HF causal LM (a path/name, or a loaded model with `tokenizer`).

    `stop_at_first_eos=False` scores every token of a sample, EOS tokens included (for samples
    that hold several short documents, e.g. semi-AR continuations).

    Returns {"gen_ppl", "nll_per_token", "num_tokens", "num_samples", "entropy_mean",
    "per_sample": [{"nll", "tokens", "ppl", "entropy"}], "scorer"} (plain floats/ints: JSON-able).
    """
    if isinstance(scorer, str):
        name = scorer
        model, tokenizer = load_scorer(scorer, device or "cpu")
    else:
        model, name = scorer, getattr(getattr(scorer, "config", None), "_name_or_path", type(scorer).__name__)
        if tokenizer is None:
            raise DnadiffError("generative_perplexity: pass the scorer's tokenizer with a loaded model")
    if not texts:
        raise DnadiffError("generative_perplexity: no samples to score")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise DnadiffError(f"scorer {name!r}: its tokenizer has no EOS token")
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else eos
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    seqs = []
    for text in texts:
        # a whole sample, scored in sliding windows of the scorer's context: no "longer than the maximum" note
        ids = list(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
        while ids and ids[0] == eos:  # a generator BOS decoded as the scorer's EOS string
            ids = ids[1:]
        if max_tokens is not None:
            ids = ids[:max_tokens]
        seqs.append(ids)
    model.eval()
    nlls = score_token_ids(model, seqs, bos, eos, pad, batch_size, max_length, device, stride)
    window, stride = scoring_window(model, max_length, stride)
    per_sample, total_nll, total_tok = [], 0.0, 0
    for ids, nll in zip(seqs, nlls):
        if not ids:
            per_sample.append({"nll": 0.0, "tokens": 0, "ppl": float("nan"), "entropy": 0.0})
            continue
        keep = first_eos_mask(torch.tensor([ids]), eos)[0].tolist() if stop_at_first_eos else [True] * len(ids)
        s = float(sum(v for v, k in zip(nll, keep) if k))
        n = int(sum(keep))
        scored = [t for t, k in zip(ids, keep) if k and t != eos]
        per_sample.append({"nll": s, "tokens": n, "ppl": math.exp(s / n), "entropy": unigram_entropy(scored)})
        total_nll += s
        total_tok += n
    if total_tok == 0:
        raise DnadiffError("generative_perplexity: the samples contain no tokens to score")
    return {
        "scorer": str(name),
        "stop_at_first_eos": stop_at_first_eos,
        "window": window,
        "stride": stride,
        "gen_ppl": math.exp(total_nll / total_tok),
        "nll_per_token": total_nll / total_tok,
        "num_tokens": total_tok,
        "num_samples": len(texts),
        "entropy_mean": sum(p["entropy"] for p in per_sample) / len(per_sample),
        "per_sample": per_sample,
    }
