"""Relaxed one-hot states into a denoiser: moved to dnadiff/diffusion/soft_input.py (the diffusion layer, so that
objectives such as ssdlm can feed the simplex through a backbone's embedding too); re-exported here."""

from dnadiff.diffusion.soft_input import call_soft, onehot_lookup, token_embedding

__all__ = ["call_soft", "onehot_lookup", "token_embedding"]
