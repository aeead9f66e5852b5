"""Selective scan (the S6 recurrence of Mamba, Gu & Dao 2023, arXiv 2312.00752, Alg. 2 / eq. 2a-2b).

    Δ = softplus(delta + delta_bias)                         (if delta_softplus)
    h_t = exp(Δ_t A) ⊙ h_{t-1} + Δ_t B_t u_t                  h: (E, N) per sequence (ZOH for A, Euler for B)
    y_t = C_t · h_t + D u_t,   out = y ⊙ silu(z)

Layout here is length-major: u, delta, z: (B, L, E); B, C: (B, L, N); A: (E, N); D, delta_bias: (E,).
(mamba_ssm's `selective_scan_fn` uses (B, E, L) / (B, N, L); `selective_scan` transposes when it
dispatches to that kernel.)

Three implementations:
- `selective_scan_ref`: the plain sequential loop (tests only: under autograd it is very slow).
- `selective_scan_chunked` (the CPU default): a custom autograd Function. The forward walks the
  sequence in chunks; inside a chunk the recurrence is solved in closed form with cumulative
  log-decays, h_t = e^{S_t} (α_0 h_0 + Σ_{s<=t} e^{-S_s} x_s) with S_t = A·Σ_{r=1..t} Δ_r, so each
  Python step does whole (B, C, E, N) blocks of work. Only the inputs and the (B, E, N) state at each
  chunk start are kept. The backward recomputes a chunk's states and runs the adjoint (reverse) scan
  g_t = C_t dy_t + exp(Δ_{t+1} A) g_{t+1} in the same closed form, chunks in reverse order.
  Chunk boundaries are chosen so that |S| stays below a bound (fp32: 30, fp64: 300) and e^{±S}
  neither overflows nor loses precision: exact for any Δ, but very large Δ·|A| means short chunks.
- mamba_ssm's CUDA kernel, used automatically on CUDA tensors when mamba_ssm is importable.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["selective_scan", "selective_scan_ref", "selective_scan_chunked", "mamba_ssm_available"]


def _finish(y, u, D, z):
    """y + D u, gated by silu(z) (Mamba Alg. 2 / mamba_simple.py)."""
    if D is not None:
        y = y + u * D
    if z is not None:
        y = y * F.silu(z)
    return y


def _prepare_delta(delta, delta_bias, delta_softplus):
    if delta_bias is not None:
        delta = delta + delta_bias
    if delta_softplus:
        delta = F.softplus(delta)
    return delta


def selective_scan_ref(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                       return_last_state=False):
    """Sequential reference: one step per position. Computed in at least fp32."""
    dtype_in = u.dtype
    ct = torch.promote_types(u.dtype, torch.float32)
    u, delta, A, B, C = (v.to(ct) for v in (u, delta, A, B, C))
    delta = _prepare_delta(delta, None if delta_bias is None else delta_bias.to(ct), delta_softplus)
    batch, length, e = u.shape
    h = u.new_zeros(batch, e, A.shape[1])  # (B, E, N)
    ys = []
    for t in range(length):
        dA = torch.exp(delta[:, t, :, None] * A)  # (B, E, N)
        dBu = (delta[:, t] * u[:, t])[:, :, None] * B[:, t, None, :]  # (B, E, N)
        h = dA * h + dBu
        ys.append(torch.einsum("ben,bn->be", h, C[:, t]))
    y = torch.stack(ys, dim=1)  # (B, L, E)
    out = _finish(y, u, None if D is None else D.to(ct), None if z is None else z.to(ct)).to(dtype_in)
    return (out, h) if return_last_state else out


# ----------------------------------------------------------------------------------------------
# chunked closed-form scan with a recomputing backward


def _segments(delta, A, limit, max_chunk):
    """Chunk boundaries [(s, e)]: within a chunk Σ_{r=s+1}^{t} max_{b,e} Δ_r|A| <= limit, length <= max_chunk.

    The first step of a chunk is exempt (its decay is applied to the incoming state directly), so
    every chunk has length >= 1 whatever Δ is.
    """
    length = delta.shape[1]
    amax = A.detach().abs().amax(dim=1)  # (E,)
    step = (delta.detach() * amax).amax(dim=(0, 2))  # (L,)  worst per-step log-decay
    if not bool(torch.isfinite(step).all()):
        raise ValueError("selective scan: non-finite delta")
    total = float(step.sum())
    if total - float(step[0]) <= limit and length <= max_chunk:
        return [(0, length)]
    csum = torch.cumsum(step.double(), 0).tolist()
    bounds, start = [], 0
    while start < length:
        stop = start + 1
        base = csum[start]
        hi = min(length, start + max_chunk)
        while stop < hi and csum[stop] - base <= limit:
            stop += 1
        bounds.append((start, stop))
        start = stop
    return bounds


def _chunk_states(u, dl, A, Bm, h0):
    """States of one chunk in closed form. u, dl: (B, C, E); Bm: (B, C, N); h0: (B, E, N).

    Returns hh (B, C, E, N), x = Δ u B (B, C, E, N), eS = e^{S} and ieS = e^{-S} (B, C, E, N), α_0.
    """
    cd = torch.cumsum(dl, dim=1)
    cd = cd - dl[:, :1]  # Σ_{r=1..t} Δ_r (relative to the chunk's first step)  (B, C, E)
    ieS = torch.exp(cd.unsqueeze(-1) * (-A))  # e^{-S_t}  (B, C, E, N), in [1, e^limit] for A < 0
    eS = torch.reciprocal(ieS)
    x = (dl * u).unsqueeze(-1) * Bm.unsqueeze(2)  # (B, C, E, N)
    w = x * ieS
    alpha0 = torch.exp(dl[:, 0].unsqueeze(-1) * A)  # (B, E, N)
    w[:, 0] += alpha0 * h0
    hh = torch.cumsum(w, dim=1).mul_(eS)  # h_t  (B, C, E, N)
    return hh, x, eS, ieS, alpha0


class _ChunkedScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, delta, A, Bm, Cm, limit, max_chunk):
        batch, length, e = u.shape
        bounds = _segments(delta, A, limit, max_chunk)
        h = u.new_zeros(batch, e, A.shape[1])
        y = u.new_empty(batch, length, e)
        starts = []
        for s, t in bounds:
            starts.append(h)
            hh, _, _, _, _ = _chunk_states(u[:, s:t], delta[:, s:t], A, Bm[:, s:t], h)
            y[:, s:t] = torch.einsum("bcen,bcn->bce", hh, Cm[:, s:t])
            h = hh[:, -1].clone()
        ctx.bounds = bounds
        ctx.save_for_backward(u, delta, A, Bm, Cm, torch.stack(starts))
        return y

    @staticmethod
    def backward(ctx, dy):
        u, delta, A, Bm, Cm, starts = ctx.saved_tensors
        dy = dy.contiguous()
        du, ddelta = torch.empty_like(u), torch.empty_like(delta)
        dB, dC = torch.empty_like(Bm), torch.empty_like(Cm)
        dA = torch.zeros_like(A)
        gN = None  # adjoint carried into the chunk's last step: α_{next} ⊙ g_{next}   (B, E, N)
        for k in range(len(ctx.bounds) - 1, -1, -1):
            s, t = ctx.bounds[k]
            uc, dl, bc, cc, dyc = u[:, s:t], delta[:, s:t], Bm[:, s:t], Cm[:, s:t], dy[:, s:t]
            hh, x, eS, ieS, alpha0 = _chunk_states(uc, dl, A, bc, starts[k])
            # adjoint scan: g_t = Σ_{s>=t} e^{S_s - S_t} G_s + e^{S_last - S_t} gN,  G = dy ⊗ C
            v = (dyc.unsqueeze(-1) * cc.unsqueeze(2)).mul_(eS)  # (B, C, E, N)
            if gN is not None:
                v[:, -1] += eS[:, -1] * gN
            g = torch.flip(torch.cumsum(torch.flip(v, [1]), dim=1), [1]).mul_(ieS)  # dL/dh_t
            gN = alpha0 * g[:, 0]
            # dL/d(Δ_t A) = g_t ⊙ α_t ⊙ h_{t-1} = g_t ⊙ (h_t - x_t)
            q = (hh - x).mul_(g)  # (B, C, E, N)
            dA += torch.einsum("bce,bcen->en", dl, q)
            gB = torch.einsum("bcen,bcn->bce", g, bc)  # Σ_n g B   (B, C, E)
            ddelta[:, s:t] = torch.einsum("bcen,en->bce", q, A) + uc * gB
            du[:, s:t] = dl * gB
            dB[:, s:t] = torch.einsum("bcen,bce->bcn", g, dl * uc)
            dC[:, s:t] = torch.einsum("bcen,bce->bcn", hh, dyc)
        return du, ddelta, dA, dB, dC, None, None


def selective_scan_chunked(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                           max_chunk=64, limit=None):
    """Fast pure-PyTorch scan (same arguments and result as `selective_scan_ref`)."""
    dtype_in = u.dtype
    ct = torch.promote_types(u.dtype, torch.float32)
    if limit is None:
        limit = 300.0 if ct == torch.float64 else 30.0
    delta = _prepare_delta(delta.to(ct), None if delta_bias is None else delta_bias.to(ct), delta_softplus)
    uc = u.to(ct)
    y = _ChunkedScan.apply(uc.contiguous(), delta.contiguous(), A.to(ct).contiguous(), B.to(ct).contiguous(),
                           C.to(ct).contiguous(), float(limit), int(max_chunk))
    out = _finish(y, uc, None if D is None else D.to(ct), None if z is None else z.to(ct))
    return out.to(dtype_in)


_MAMBA_SSM = None


def mamba_ssm_available() -> bool:
    """True when mamba_ssm's CUDA selective-scan kernel can be imported (never on a CPU-only install)."""
    global _MAMBA_SSM
    if _MAMBA_SSM is None:
        try:
            from mamba_ssm.ops.selective_scan_interface import selective_scan_fn  # type: ignore

            _MAMBA_SSM = selective_scan_fn
        except Exception:  # ImportError, or a CUDA extension that fails to load
            _MAMBA_SSM = False
    return _MAMBA_SSM is not False


def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False, impl="auto"):
    """Dispatch: mamba_ssm's kernel on CUDA when importable, else the chunked pure-PyTorch scan.

    impl: "auto" | "chunked" | "ref" | "cuda".
    """
    if impl == "ref":
        return selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, delta_softplus)
    if impl == "cuda" or (impl == "auto" and u.is_cuda and mamba_ssm_available()):
        if not mamba_ssm_available():
            raise RuntimeError("selective_scan(impl='cuda') needs mamba_ssm with its CUDA extension")
        out = _MAMBA_SSM(u.transpose(1, 2).contiguous(), delta.transpose(1, 2).contiguous(), A.contiguous(),
                         B.transpose(1, 2).contiguous(), C.transpose(1, 2).contiguous(),
                         None if D is None else D.float(), None if z is None else z.transpose(1, 2).contiguous(),
                         None if delta_bias is None else delta_bias.float(), delta_softplus)
        return out.transpose(1, 2)
    if impl not in ("auto", "chunked", "cuda"):
        raise ValueError(f"unknown selective scan impl {impl!r}")
    return selective_scan_chunked(u, delta, A, B, C, D, z, delta_bias, delta_softplus)
