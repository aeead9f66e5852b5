"""A trained causal Mamba LM adapted into a bidirectional Caduceus-PH, the starting point of an MDLM.

The largest diffusion LMs are adapted from autoregressive ones rather than trained from scratch
(DiffuLLaMA, Gong et al. 2024, arXiv 2410.17891, fig. 1; Dream, Ye et al. 2025): the AR's weights are
kept, its attention is made bidirectional, and its output alignment is kept by reading token i's logits
at position i - 1 (their "shift operation"; Caduceus `ar_shift`). Here the AR is a Mamba LM (backbones/mamba.py) and the
bidirectional model the BiMamba Caduceus-PH of the same width and depth (Schiff et al. 2024 §3.1):

  * embedding, every block's norm, the final norm, the tied head and `cond_proj`: copied;
  * each block's forward mixer (`mamba_fwd`): the AR's mixer, all of it;
  * each block's reverse mixer (`mamba_rev`): in_proj / out_proj are tied to the forward one's (the
    official weight tie), conv, Δ projection, A and the B rows of x_proj copied from the AR, and its
    output switched off at the start: the C rows of x_proj and the skip D are zero, so y = 0.

At the start the adapted model's logits at position i equal the AR's next-token logits after [BOS],
x_0 .. x_{i-1} (what the MDLM's first step then learns from, tests/test_ar_adapt.py); the reverse scan
learns to read the right context (dL/dC and dL/dD are not zero at y = 0: zero-initialised branch, as
ControlNet's zero convolutions). The AR never saw the [MASK] token, whose embedding row it keeps untrained.
"""

from __future__ import annotations

import dataclasses

import torch

from dnadiff.backbones.caduceus import Caduceus, CaduceusConfig
from dnadiff.backbones.mamba import MambaConfig, MambaLM
from dnadiff.errors import DnadiffError


def adapted_config(ar: MambaConfig, bos_id: int) -> CaduceusConfig:
    """The Caduceus-PH config of the same shape as a Mamba AR config, with the AR alignment."""
    shared = {f.name: getattr(ar, f.name) for f in dataclasses.fields(MambaConfig)}
    return CaduceusConfig(**shared, rcps=False, bidirectional=True, bidirectional_strategy="add",
                          bidirectional_weight_tie=True, ar_shift=True, bos_id=bos_id)


def caduceus_from_mamba_ar(ar: torch.nn.Module, bos_id: int | None) -> Caduceus:
    """A Caduceus-PH that starts as the Mamba AR `ar` (see the module docstring)."""
    if not isinstance(ar, MambaLM):
        raise DnadiffError(f"model.adapt_ar: model.init_from must be a causal Mamba LM (backbone mamba), "
                           f"got {type(ar).__name__}")
    if bos_id is None:
        raise DnadiffError("model.adapt_ar: the tokenizer has no [BOS] context token to shift by "
                           "(DNA tokenizers have one; text models are not adapted)")
    if ar.config.bias:
        raise DnadiffError("model.adapt_ar: the AR's mixers have biases (bias=true): the reverse mixer's tied "
                           "out_proj bias would be added twice; only bias=false Mamba LMs are adapted")
    model = Caduceus(adapted_config(ar.config, bos_id))
    source = ar.state_dict()
    with torch.no_grad():
        model.backbone.embeddings.word_embeddings.weight.copy_(source["backbone.embedding.weight"])
        model.backbone.norm_f.load_state_dict(ar.backbone.norm_f.state_dict())
        if ar.cond_proj is not None:
            model.cond_proj.load_state_dict(ar.cond_proj.state_dict())
        for block, ar_block in zip(model.backbone.layers, ar.backbone.layers):
            block.norm.load_state_dict(ar_block.norm.state_dict())
            block.mixer.mamba_fwd.load_state_dict(ar_block.mixer.state_dict())
            rev = block.mixer.mamba_rev
            for name in ("conv1d", "x_proj", "dt_proj"):
                getattr(rev, name).load_state_dict(getattr(ar_block.mixer, name).state_dict())
            rev.A_log.copy_(ar_block.mixer.A_log)
            rev.x_proj.weight[rev.dt_rank + rev.d_state:].zero_()  # rows of C: (R + 2N, E) = [Δ; B; C]
            rev.D.zero_()
    return model


__all__ = ["adapted_config", "caduceus_from_mamba_ar"]
