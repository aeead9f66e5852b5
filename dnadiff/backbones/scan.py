"""Selective scan (the S6 recurrence of Mamba, Gu & Dao 2023, arXiv 2312.00752, Alg. 2 / eq. 2a-2b).

    Δ = softplus(delta + delta_bias)                         (if delta_softplus)
    h_t = exp(Δ_t A) ⊙ h_{t-1} + Δ_t B_t u_t                  h: (E, N) per sequence (ZOH for A, Euler for B)
    y_t = C_t · h_t + D u_t,   out = y ⊙ silu(z)

Layout here is length-major: u, delta, z: (B, L, E); B, C: (B, L, N); A: (E, N); D, delta_bias: (E,).
(mamba_ssm's `selective_scan_fn` uses (B, E, L) / (B, N, L); `selective_scan` transposes when it
dispatches to that kernel.)

Implementations (`impl`):
- `compiled` (the CPU default where numba is importable): `scan_compiled.selective_scan_compiled`,
  forward and backward as compiled loops, one call each, no (B, L, E, N) tensor.
- `chunked` (the fallback without numba, and the compiled scan's tested twin): a custom autograd
  Function. The forward walks the sequence in chunks and solves each chunk with a two-level scan
  (sub-blocks scanned in parallel, then a short recurrence across sub-blocks), so each Python step
  does whole (B, ·, E, N) blocks of work. It keeps only the inputs and the (B, E, N) state at each
  chunk start. The backward recomputes a chunk's states and runs the adjoint (reverse) scan
  g_t = C_t dy_t + exp(Δ_{t+1} A) g_{t+1} the same way, chunks in reverse order.
- `ref`: the plain sequential loop (tests only: under autograd it is very slow).
- `cuda`: mamba_ssm's kernel, used by `auto` on CUDA tensors when mamba_ssm is importable.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import dnadiff.backbones.kernels as kernels
import dnadiff.backbones.scan_compiled as scan_compiled

__all__ = ["selective_scan", "selective_scan_ref", "selective_scan_chunked", "mamba_ssm_available", "SCAN_IMPLS"]

SCAN_IMPLS = ("auto", "compiled", "chunked", "ref", "cuda")


def _no_autocast(device: torch.device):
    """Autocast off for the scan: under bf16 autocast its bmm/einsum contractions C·h would run in
    bf16 (relative error ~3e-3 instead of ~1e-7). mamba_ssm's kernel and `selective_scan_ref` of the
    official code compute the recurrence in fp32 whatever the input dtype; so does this module."""
    return torch.autocast(device_type=device.type, enabled=False)


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
    """Sequential reference: one step per position. Computed in at least fp32 (autocast off)."""
    with _no_autocast(u.device):
        return _selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)


def _selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state):
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
# two-level chunked scan with a recomputing backward
#
# The sequence is cut into chunks of C = nb·c steps (the Python loop over chunks), each chunk into nb
# sub-blocks of c steps. Inside a chunk every operation works on whole (B, nb, ·, E, N) blocks:
#   1. local scan of every sub-block from a zero state, h_t = α_t h_{t-1} + x_t (c - 1 steps, all
#      sub-blocks at once), with α_t = exp(Δ_t A) and x_t = Δ_t u_t B_t;
#   2. the sub-blocks' incoming states from a recurrence over sub-blocks (nb steps on (B, E, N)):
#      h_in(k+1) = P_k h_in(k) + h_last(k), P_k = Π α over sub-block k;
#   3. h_t += (Π_{r<=t} α_r) h_in (prefix products within the sub-block).
# Only products of decays appear (as in the sequential scan), so any Δ is fine. The backward runs the
# same three steps in reverse time for the adjoint g_t = dL/dh_t = C_t dy_t + α_{t+1} g_{t+1}.


def _decays_and_inputs(u, dl, A, Bm, c, alpha, x):
    """Fill α_t = exp(Δ_t A) and x_t = Δ_t u_t B_t of one chunk into the (B, nb, c, E, N) buffers."""
    b, cl, e = u.shape
    n = A.shape[1]
    nb = cl // c
    torch.mul(dl.reshape(b, nb, c, e, 1), A, out=alpha).exp_()
    torch.mul((dl * u).view(b, nb, c, e, 1), Bm.reshape(b, nb, c, 1, n), out=x)
    return alpha, x


def _local_scan_(h, alpha):
    """In place: h_t <- α_t h_{t-1} + h_t along the sub-block axis, all sub-blocks at once."""
    for j in range(1, h.shape[2]):
        h[:, :, j].addcmul_(alpha[:, :, j], h[:, :, j - 1])
    return h


def _chunk_forward(u, dl, A, Bm, h0, c, alpha, h):
    """States of one chunk (u, dl: (B, C, E); Bm: (B, C, N); h0: (B, E, N)) into the buffer h
    (B, nb, c, E, N); returns h and every sub-block's incoming state h_in (B, nb, E, N)."""
    _decays_and_inputs(u, dl, A, Bm, c, alpha, h)
    nb = h.shape[1]
    if nb == 1:
        h[:, 0, 0].addcmul_(alpha[:, 0, 0], h0)
        return _local_scan_(h, alpha), h0.unsqueeze(1)
    prefix = alpha  # turned in place into Π_{r<=t} α_r within each sub-block
    for j in range(1, h.shape[2]):
        h[:, :, j].addcmul_(alpha[:, :, j], h[:, :, j - 1])  # 1. zero-start local scans
        prefix[:, :, j].mul_(prefix[:, :, j - 1])  # (α_j used above, before it becomes a product)
    h_in = torch.empty_like(h[:, :, 0])  # 2. incoming state of every sub-block
    cur = h0
    for k in range(nb):
        h_in[:, k] = cur
        cur = torch.addcmul(h[:, k, -1], prefix[:, k, -1], cur)
    h.addcmul_(prefix, h_in.unsqueeze(2))  # 3. add the carried state
    return h, h_in


def _contract_n(m, v):
    """Σ_n m[i, e, n] v[i, n] for m (I, E, N), v (..., N) with I rows: one batched GEMV (BLAS reads the
    transposed view directly; the (I, E, N) @ (I, N, 1) form is several times slower on CPU)."""
    i, e, n = m.shape
    return torch.bmm(v.reshape(i, 1, n), m.transpose(1, 2)).view(i, e)


class _ChunkedScan(torch.autograd.Function):
    # Big (B, nb, c, E, N) blocks live in a few buffers allocated once per call: allocating fresh
    # multi-MB tensors per chunk costs page faults that dominated the run time on CPU.

    @staticmethod
    def forward(ctx, u, delta, A, Bm, Cm, c, chunk):
        # u, delta: (B, L, E); Bm, Cm: (B, L, N); L a multiple of `chunk`, `chunk` of `c`
        b, length, e = u.shape
        n = A.shape[1]
        nb = chunk // c
        alpha, hbuf = (u.new_empty(b, nb, c, e, n) for _ in range(2))
        h = u.new_zeros(b, e, n)
        y = u.new_empty(b, length, e)
        h_in = u.new_empty(b, length // c, e, n)  # incoming state of every sub-block (kept for backward)
        for k, s in enumerate(range(0, length, chunk)):
            hh, h_in[:, k * nb:(k + 1) * nb] = _chunk_forward(u[:, s:s + chunk], delta[:, s:s + chunk], A,
                                                               Bm[:, s:s + chunk], h, c, alpha, hbuf)
            hh = hh.view(b * chunk, e, n)
            y[:, s:s + chunk] = _contract_n(hh, Cm[:, s:s + chunk]).view(b, chunk, e)
            h = hh.view(b, chunk, e, n)[:, -1].clone()
        ctx.c, ctx.chunk = c, chunk
        ctx.save_for_backward(u, delta, A, Bm, Cm, h_in)
        ctx.mark_non_differentiable(h)
        return y, h  # h: the state after the last (padded: Δ = 0 leaves it unchanged) step

    @staticmethod
    def backward(ctx, dy, _dh_last):
        with _no_autocast(dy.device):  # a backward called inside an autocast region
            return _ChunkedScan._backward(ctx, dy)

    @staticmethod
    def _backward(ctx, dy):
        u, delta, A, Bm, Cm, h_in_all = ctx.saved_tensors
        c, chunk = ctx.c, ctx.chunk
        b, length, e = u.shape
        n = A.shape[1]
        nb = chunk // c
        dy = dy.contiguous()
        du, ddelta = torch.empty_like(u), torch.empty_like(delta)
        dB, dC = torch.empty_like(Bm), torch.empty_like(Cm)
        dA = torch.zeros_like(A)
        alpha, hh, g, suffix = (u.new_empty(b, nb, c, e, n) for _ in range(4))
        suffix[:, :, -1].fill_(1.0)  # Π_{r=t+1..last} α_r within the sub-block (last entry: empty product)
        tmp = u.new_empty(b, chunk, e, n)
        g_out = u.new_empty(b, nb, e, n)  # adjoint entering each sub-block's last step
        carry = u.new_zeros(b, e, n)  # α_{t+1} g_{t+1} entering the chunk's last step from the next chunk
        for k in range(length // chunk - 1, -1, -1):
            sl = slice(k * chunk, (k + 1) * chunk)
            uc, dl, bc, cc, dyc = u[:, sl], delta[:, sl], Bm[:, sl], Cm[:, sl], dy[:, sl]
            h_in = h_in_all[:, k * nb:(k + 1) * nb]  # (B, nb, E, N)
            # recompute the states: one local scan per sub-block from its stored incoming state
            _decays_and_inputs(uc, dl, A, bc, c, alpha, hh)
            hh[:, :, 0].addcmul_(alpha[:, :, 0], h_in)
            _local_scan_(hh, alpha)
            # adjoint g_t = dL/dh_t = C_t dy_t + α_{t+1} g_{t+1}: local reverse scans, carries, fix-up
            torch.mul(dyc.reshape(b, nb, c, e, 1), cc.reshape(b, nb, c, 1, n), out=g)  # G_t = dy_t ⊗ C_t
            for j in range(c - 2, -1, -1):
                g[:, :, j].addcmul_(alpha[:, :, j + 1], g[:, :, j + 1])
                torch.mul(suffix[:, :, j + 1], alpha[:, :, j + 1], out=suffix[:, :, j])
            cur = carry
            for j in range(nb - 1, -1, -1):
                g_out[:, j] = cur
                cur = alpha[:, j, 0] * torch.addcmul(g[:, j, 0], suffix[:, j, 0], cur)
            carry = cur
            g.addcmul_(suffix, g_out.unsqueeze(2))  # dL/dh_t   (B, nb, c, E, N)
            # y_t = C_t · h_t -> dC;  x_t = Δ_t u_t B_t -> du, dB, part of dΔ
            hh3, g3 = hh.view(b * chunk, e, n), g.view(b * chunk, e, n)
            dC[:, sl] = torch.bmm(dyc.reshape(b * chunk, 1, e), hh3).view(b, chunk, n)
            gB = _contract_n(g3, bc).view(b, chunk, e)  # Σ_n g B
            dB[:, sl] = torch.bmm((dl * uc).reshape(b * chunk, 1, e), g3).view(b, chunk, n)
            du[:, sl] = dl * gB
            # dL/d(Δ_t A) = g_t ⊙ α_t ⊙ h_{t-1}   (computed in α's buffer; h_{t-1} of a sub-block's
            # first step is the previous sub-block's last state, and the chunk's incoming state at t=0)
            q = alpha.view(b, chunk, e, n)
            q[:, 1:].mul_(hh.view(b, chunk, e, n)[:, :-1])
            q[:, 0].mul_(h_in[:, 0])
            q.mul_(g.view(b, chunk, e, n))
            dA += torch.mul(dl.unsqueeze(-1), q, out=tmp).sum(dim=(0, 1))
            ddelta[:, sl] = torch.mul(q, A, out=tmp).sum(-1).add_(uc * gB)
        return du, ddelta, dA, dB, dC, None, None


def selective_scan_chunked(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                           return_last_state=False, chunk=64, sub_block=8):
    """Pure-PyTorch scan (same arguments and result as `selective_scan_ref`).

    `chunk` steps per Python-level iteration, split into sub-blocks of `sub_block` steps.
    Computed in at least fp32, with autocast off (the backward too).
    """
    with _no_autocast(u.device):
        return _selective_scan_chunked(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state,
                                       chunk, sub_block)


def _selective_scan_chunked(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state, chunk,
                            sub_block):
    dtype_in = u.dtype
    ct = torch.promote_types(u.dtype, torch.float32)
    delta = _prepare_delta(delta.to(ct), None if delta_bias is None else delta_bias.to(ct), delta_softplus)
    uc, A = u.to(ct), A.to(ct).contiguous()
    length = u.shape[1]
    c = max(1, min(sub_block, length))
    chunk = c * max(1, min(chunk // c, -(-length // c)))  # a multiple of c
    pad = -length % chunk
    args = [uc, delta, B.to(ct), C.to(ct)]
    if pad:  # Δ = 0, x = 0 on the padding: states unchanged, outputs dropped
        args = [F.pad(t, (0, 0, 0, pad)) for t in args]
    y, last = _ChunkedScan.apply(args[0].contiguous(), args[1].contiguous(), A, args[2].contiguous(),
                                 args[3].contiguous(), c, chunk)
    if pad:
        y = y[:, :length]
    out = _finish(y, uc, None if D is None else D.to(ct), None if z is None else z.to(ct)).to(dtype_in)
    return (out, last) if return_last_state else out


def mamba_ssm_available() -> bool:
    """True when mamba_ssm's CUDA selective-scan kernel can be imported (never on a CPU-only install)."""
    return kernels.kernel_available("selective_scan_fn")


def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                   return_last_state=False, impl="auto"):
    """Dispatch by `impl` (one of SCAN_IMPLS): "auto" takes mamba_ssm's kernel on CUDA tensors when
    importable, else the compiled CPU scan where numba is importable, else the chunked scan.
    `return_last_state=True` returns (out, h_L Float[B, E, N]) (the state for incremental decoding)."""
    if impl not in SCAN_IMPLS:
        raise ValueError(f"unknown selective scan impl {impl!r} (expected one of {', '.join(SCAN_IMPLS)})")
    if impl == "ref":
        return selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)
    if impl in ("auto", "cuda"):  # the kernel, or None: "auto"'s documented fallbacks (kernels.py)
        fn = kernels.scan_kernel(impl, u, A.shape[1])
        if fn is not None:  # this (B, L, E) entry copies into the kernel's layout; the Mamba mixer does not use it
            return kernels.scan_length_major(fn, u, delta, A, B, C, D, z, delta_bias, delta_softplus,
                                             return_last_state)
    if impl == "compiled" or (impl == "auto" and not kernels.is_cuda(u) and scan_compiled.available()):
        return scan_compiled.selective_scan_compiled(u, delta, A, B, C, D, z, delta_bias, delta_softplus,
                                                     return_last_state)
    return selective_scan_chunked(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)
