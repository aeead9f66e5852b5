"""Reverse-complement parameter sharing (RCPS; Caduceus §3.2, Schiff et al. 2024, arXiv 2403.03234;
Zhou et al. 2022) and the post-hoc RC conjoining of Caduceus-PH.

A hidden state of an RCPS model has width 2d: the first half describes the forward strand, the
second half is the reverse complement (RC) of the representation of the RC strand. The RC of a
hidden state flips length and channels, rc(h) = flip_{L,C}(h). Every module f is applied as

    RCPS(f)(h) = cat(f(h[..., :d]), rc(f(rc(h[..., d:]))))

which makes the network RC-equivariant: h(RC(x)) = rc(h(x)), and the LM head turns that into
logits(RC(x)) = flip_L(logits(x))[..., complement] (docs/references.md "Caduceus").
Parameter/buffer names follow the official `modeling_rcps.py` so checkpoints load by name.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dnadiff.backbones.base import flip_length, padding_mask, reverse_index
from dnadiff.tokenizers.dna import DNA_COMPLEMENT  # the tokenizer's complement table (ids 0..11)


def complement_table(vocab_size: int, complement_map: Sequence[int] | None = None) -> list[int]:
    """Complement of every id in a (padded) vocabulary; ids beyond the map complement to themselves."""
    cmap = list(DNA_COMPLEMENT if complement_map is None else complement_map)[:vocab_size]
    cmap += list(range(len(cmap), vocab_size))
    if sorted(cmap) != list(range(vocab_size)) or any(cmap[c] != i for i, c in enumerate(cmap)):
        raise ValueError(f"complement map {cmap} is not an involution of 0..{vocab_size - 1}")
    return cmap


def rc_hidden(x: Tensor, rev: Tensor | None = None) -> Tensor:
    """Reverse complement of a hidden state (B, L, C): flip length and channels. With `rev`
    (backbones.base.reverse_index of a right-padded batch) each row's real prefix is reversed
    and its pads stay in place, so the RC strand starts at the row's last real token."""
    if rev is None:
        return torch.flip(x, dims=[-2, -1])
    return flip_length(x, rev).flip(-1)


def reverse_complement_ids(input_ids: Tensor, complement: Tensor, rev: Tensor | None = None) -> Tensor:
    """RC of token ids (B, L): complement every id, reverse the sequence; with `rev` (reverse_index
    of a right-padded batch) each row's real bases only, the pads staying on the right."""
    if rev is None:
        return complement[input_ids.flip(-1)]
    return complement[flip_length(input_ids, rev)]


class RCPSEmbedding(nn.Module):
    """cat(E(x), rc(E(RC(x)))): width 2d from a d-wide table (keys `embedding.weight`, `complement_map`)."""

    def __init__(self, vocab_size: int, d_model: int, complement_map: Sequence[int]):
        super().__init__()
        self.register_buffer("complement_map", torch.tensor(list(complement_map), dtype=torch.long))
        self.embedding = nn.Embedding(vocab_size, d_model)

    @property
    def weight(self) -> Tensor:
        return self.embedding.weight

    def forward(self, input_ids: Tensor) -> Tensor:
        fwd = self.embedding(input_ids)  # (B, L, d)
        rc = rc_hidden(self.embedding(reverse_complement_ids(input_ids, self.complement_map)))
        return torch.cat([fwd, rc], dim=-1)  # (B, L, 2d)

    def forward_onehot(self, w: Tensor) -> Tensor:
        """`forward` of a (relaxed) one-hot w Float[B, L, V] instead of ids, linear in w: forward(ids) ==
        forward_onehot(one_hot(ids)). The reverse strand reads w complemented (column v -> complement[v]) and
        reversed, as forward reads reverse_complement_ids (V may be the unpadded vocabulary)."""
        weight = self.embedding.weight
        w = nn.functional.pad(w, (0, weight.shape[0] - w.shape[-1]))  # a padded vocabulary's extra rows: 0
        fwd = w @ weight
        w_rc = torch.zeros_like(w).index_add(-1, self.complement_map[: w.shape[-1]], w).flip(-2)
        return torch.cat([fwd, rc_hidden(w_rc @ weight)], dim=-1)


class RCPSWrapper(nn.Module):
    """Apply a d -> d module to both halves of a 2d-wide RCPS hidden state (key prefix `submodule.`)."""

    def __init__(self, submodule: nn.Module):
        super().__init__()
        self.submodule = submodule

    def forward(self, x: Tensor, rev: Tensor | None = None) -> Tensor:
        """x (B, L, 2d); `rev`: per-row reversal of a padded batch (passed on to the submodule)."""
        d = x.shape[-1] // 2
        kw = {} if rev is None else {"rev": rev}
        fwd = self.submodule(x[..., :d], **kw)
        rc = self.submodule(rc_hidden(x[..., d:], rev), **kw)
        return torch.cat([fwd, rc_hidden(rc, rev)], dim=-1)


def rcps_add_norm(norm: nn.Module, x: Tensor, residual: Tensor | None) -> tuple[Tensor, Tensor]:
    """RCPS add + norm (official `RCPSAddNormWrapper`, prenorm=True): returns (normed, new residual)."""
    d = x.shape[-1] // 2
    dtype = norm.weight.dtype
    if residual is None:
        res_f, res_rc = x[..., :d], rc_hidden(x[..., d:])
        residual = x
    else:
        res_f = x[..., :d] + residual[..., :d]
        res_rc = rc_hidden(x[..., d:]) + rc_hidden(residual[..., d:])
        residual = torch.cat([res_f, rc_hidden(res_rc)], dim=-1)
    out = torch.cat([norm(res_f.to(dtype)), rc_hidden(norm(res_rc.to(dtype)))], dim=-1)
    return out, residual


def swap_halves(x: Tensor) -> Tensor:
    """cat(x2, x1): the channel order in which the official fused add-norm path reads its input."""
    d = x.shape[-1] // 2
    return torch.cat([x[..., d:], x[..., :d]], dim=-1)


class RCPSLMHead(nn.Module):
    """logits = x1 W^T + flip_C(x2) W[complement]^T (keys `lm_head.weight`, `complement_map`)."""

    def __init__(self, true_dim: int, vocab_size: int, complement_map: Sequence[int]):
        super().__init__()
        self.register_buffer("complement_map", torch.tensor(list(complement_map), dtype=torch.long))
        self.true_dim = true_dim
        self.lm_head = nn.Linear(true_dim, vocab_size, bias=False)

    @property
    def weight(self) -> Tensor:
        return self.lm_head.weight

    def forward(self, x: Tensor) -> Tensor:
        d = self.true_dim
        fwd = F.linear(x[..., :d], self.weight)
        rc = F.linear(torch.flip(x[..., d:], dims=[-1]), self.weight[self.complement_map])
        return fwd + rc  # (B, L, V)


def rc_conjoin(fn: Callable[[Tensor], Tensor], input_ids: Tensor, complement: Tensor,
               permute_last: bool = True, attention_mask: Tensor | None = None) -> Tensor:
    """Post-hoc RC conjoining (Caduceus-PH, §3.3): average of fn(x) and the RC strand's output mapped
    back to forward coordinates, flip_L(fn(RC(x))), complement-permuted on the last axis when it is
    a vocabulary axis (`permute_last`), e.g. 0.5 (logits(x) + flip_L(logits(RC(x)))[..., comp]).
    With a right-padded `attention_mask` the RC and flip act on each row's real bases (pads stay
    on the right, so `fn` may use the same mask)."""
    real = padding_mask(input_ids, attention_mask)
    rev = None if real is None else reverse_index(real)
    out = fn(input_ids)
    out_rc = flip_length(fn(reverse_complement_ids(input_ids, complement, rev)), rev)
    if permute_last:
        out_rc = out_rc[..., complement[: out_rc.shape[-1]]]
    return 0.5 * (out + out_rc)
