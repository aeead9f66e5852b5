"""Long convolutions through the FFT (the convolution theorem), causal and two-sided.

A causal linear convolution of u (length L) with a filter k (length L),

    y[n] = Σ_{m ≤ n} k[n − m] u[m],

equals the first L outputs of a circular convolution of size 2L (zero padding removes the
wrap-around), computed as irfft(rfft(u, 2L) · rfft(k, 2L))[:L] (HyenaDNA `fftconv`, Poli et al.
2023 §3.3). O(L log L) instead of O(L²).

`fftconv_bidirectional` is a genuine two-sided linear convolution with a forward filter k_f
(lags 0 … L−1) and a backward filter k_b (lags −1 … −(L−1)):

    y[n] = Σ_{m ≤ n} k_f[n − m] u[m] + Σ_{m > n} k_b[m − n − 1] u[m],

i.e. a causal filter on u plus a strictly anti-causal one (a causal filter applied to reverse(u),
shifted by one and reversed back). Both halves go into one length-2L kernel, whose negative
lags sit at the end of the circular buffer (index 2L − d for lag −d); with padding to 2L no lag
aliases onto another, so this is exact, not the shifted circular trick of the HyenaDNA repo.

The `*_direct` functions are O(L²) references used by the tests.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _fft_dtype(x: Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def fftconv_causal(u: Tensor, k: Tensor) -> Tensor:
    """u: (..., D, L); k: (D, L) filter taps for lags 0..L-1. Returns (..., D, L) in u's dtype."""
    L = u.shape[-1]
    dt = _fft_dtype(u)
    n = 2 * L
    k_f = torch.fft.rfft(k.to(dt), n=n)  # (D, L+1)
    u_f = torch.fft.rfft(u.to(dt), n=n)  # (..., D, L+1)
    y = torch.fft.irfft(u_f * k_f, n=n)[..., :L]  # (..., D, L)
    return y.to(u.dtype)


def two_sided_kernel(k_fwd: Tensor, k_bwd: Tensor) -> Tensor:
    """Pack (D, L) forward and backward taps into one circular kernel of length 2L.

    index 0..L-1 -> lags 0..L-1 (k_fwd); index L -> unused (0); index 2L-d -> lag -d -> k_bwd[d-1].
    """
    L = k_fwd.shape[-1]
    zero = k_fwd.new_zeros(*k_fwd.shape[:-1], 1)
    neg = k_bwd[..., : L - 1].flip(-1)  # lags -(L-1) .. -1 -> k_bwd[L-2] .. k_bwd[0]
    return torch.cat((k_fwd, zero, neg), dim=-1)  # (D, 2L)


def fftconv_bidirectional(u: Tensor, k_fwd: Tensor, k_bwd: Tensor) -> Tensor:
    """Two-sided linear convolution (see module docstring). u: (..., D, L); k_*: (D, L)."""
    L = u.shape[-1]
    dt = _fft_dtype(u)
    n = 2 * L
    kern = two_sided_kernel(k_fwd.to(dt), k_bwd.to(dt))  # (D, 2L)
    k_f = torch.fft.rfft(kern, n=n)  # (D, L+1)
    u_f = torch.fft.rfft(u.to(dt), n=n)  # (..., D, L+1)
    y = torch.fft.irfft(u_f * k_f, n=n)[..., :L]  # (..., D, L)
    return y.to(u.dtype)


def conv_causal_direct(u: Tensor, k: Tensor) -> Tensor:
    """O(L²) reference: y[n] = Σ_{m ≤ n} k[n − m] u[m]."""
    L = u.shape[-1]
    idx = torch.arange(L)
    lag = idx[:, None] - idx[None, :]  # (n, m)
    toeplitz = torch.where(lag >= 0, k[:, lag.clamp(min=0)], torch.zeros((), dtype=k.dtype))  # (D, L, L)
    return torch.einsum("dnm,...dm->...dn", toeplitz, u)


def conv_bidirectional_direct(u: Tensor, k_fwd: Tensor, k_bwd: Tensor) -> Tensor:
    """O(L²) reference with explicit loops over output positions."""
    L = u.shape[-1]
    out = torch.zeros_like(u)
    for n in range(L):
        for m in range(L):
            tap = k_fwd[:, n - m] if m <= n else k_bwd[:, m - n - 1]  # (D,)
            out[..., n] += tap * u[..., m]
    return out
