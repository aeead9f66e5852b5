"""Feeding a relaxed one-hot state into a denoiser, so gradients reach the tokens it was sampled as (reward
fine-tuning, DUO's curriculum), or a point of the simplex as the input itself (the ssdlm objective and sampler).

Backbones take token ids (docs/architecture.md) and know nothing of the relaxation. `call_soft(denoiser, x,
onehot, t)` returns `denoiser(x, t)`'s logits, with the gradient of `onehot` (Float[B, L, V], equal
to one_hot(x) in value under straight-through, or a soft vector) flowing in through the token
embedding:

* a denoiser with a method `forward_soft(onehot, t)` (e.g. a tabulated test denoiser) is called with
  the soft state itself;
* otherwise the first token embedding (`nn.Embedding`, not a label embedding) found in the
  denoiser gets a forward hook for this one call: its lookup of exactly these ids is replaced by
  `onehot @ E` (DRAKES feeds its DNA model one-hot inputs the same way: soft @ embedding.weight);
* an embedding module that declares `forward_onehot(w)` (the token lookup of `w`, linear in it: RCPS
  Caduceus's two-strand `RCPSEmbedding`, whose reverse strand reads transformed ids) is hooked the same
  way, whole, before any plain `nn.Embedding` inside it, so both strands see the soft state;
* a denoiser with neither is called on the ids: the value is the same, no gradient flows through its input.
"""

from __future__ import annotations

from torch import Tensor, nn

from dnadiff.denoiser import capabilities_of


def token_embedding(denoiser, vocab_size: int) -> nn.Embedding | None:
    """The token lookup of a denoiser module (the first `nn.Embedding` that is not a label table)."""
    if not isinstance(denoiser, nn.Module):
        return None
    for name, mod in denoiser.named_modules():
        if isinstance(mod, nn.Embedding) and "label" not in name and mod.num_embeddings >= vocab_size:
            return mod
    return None


def onehot_lookup(denoiser) -> nn.Module | None:
    """The first module of a denoiser that declares `forward_onehot` (a token lookup linear in a one-hot)."""
    if not isinstance(denoiser, nn.Module):
        return None
    for name, mod in denoiser.named_modules():
        if "label" not in name and capabilities_of(mod).forward_onehot:
            return mod
    return None


def call_soft(denoiser, x: Tensor, onehot: Tensor | None, t: Tensor) -> Tensor:
    """Logits Float[B, L, V] of `denoiser` at ids x (Long[B, L]) whose relaxed one-hot is `onehot`
    (None: a plain call). The value depends on `onehot` alone, whether or not it carries gradients."""
    if onehot is None:
        return denoiser(x, t)
    if capabilities_of(denoiser).forward_soft:
        return denoiser.forward_soft(onehot, t)
    emb = onehot_lookup(denoiser) or token_embedding(denoiser, onehot.shape[-1])
    if emb is None:
        return denoiser(x, t)

    def hook(module, inputs, output):
        if inputs[0] is x:  # the backbone's lookup of these ids: make it linear in the one-hot
            rows = module.weight.shape[0]
            w = nn.functional.pad(onehot, (0, rows - onehot.shape[-1])).to(module.weight.dtype)  # (B, L, V_emb)
            if isinstance(module, nn.Embedding):
                return (w @ module.weight).to(output.dtype)
            return module.forward_onehot(w).to(output.dtype)
        return output

    handle = emb.register_forward_hook(hook)
    try:
        return denoiser(x, t)
    finally:
        handle.remove()


__all__ = ["call_soft", "onehot_lookup", "token_embedding"]
