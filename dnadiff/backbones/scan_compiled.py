"""The selective scan as compiled loops (numba): one kernel call per layer, direction and pass.

Same recurrence and arguments as `dnadiff.backbones.scan.selective_scan_ref` (Mamba, Gu & Dao 2023,
arXiv 2312.00752, Alg. 2 / eq. 2a-2b; layout (B, L, E) / (B, L, N)):

    Δ_t = softplus(delta_t + delta_bias)        α_t = exp(Δ_t A)     (E, N)
    h_t = α_t ⊙ h_{t-1} + Δ_t u_t B_t           y_t = C_t · h_t + D u_t      out_t = y_t ⊙ silu(z_t)

Why numba: its wheels carry LLVM, so the kernels compile on the user's machine with no C compiler
and no CUDA; `cache=True` keeps the machine code on disk after the first call. Where numba is not
importable `available()` is False and `selective_scan` falls back to the chunked pure-PyTorch scan
(the tested twin of these kernels).

The forward keeps the (E, N) state of one sequence in a small local array (it stays in L1 cache),
walks t once, and stores only the state at the start of every block of `_BLOCK` steps (B, L/_BLOCK,
E, N): never a (B, L, E, N) tensor. The backward walks the blocks in reverse; per block it recomputes
the states and decays from the stored block-start state, then runs the adjoint recurrence
    g_t = dL/dh_t = C_t dy_t + α_{t+1} ⊙ g_{t+1}
and collects the gradients of u, Δ, A, B, C, D and the gate in the same pass. The elementwise ends
(softplus, silu and their derivatives) are single vectorised PyTorch ops in the same autograd node.
exp(Δ A) uses a vectorisable float32 exp (`_exp_f32`, relative error <= 1e-7).
Sequences of a batch are independent: with more than one thread the kernels split the batch rows
over numba's threads in one parallel region per call (no per-step synchronisation, so a busy core
delays only its own rows); with one thread a serial twin runs.
"""

from __future__ import annotations

import math
import os
import threading

import numpy as np
import torch
import torch.nn.functional as F

try:  # numba is a dependency, but the pure-PyTorch scans must keep working where it is missing
    import numba
    from numba import njit, prange
except Exception:  # pragma: no cover - exercised only on installs without numba
    numba = None
else:
    # numba's own thread pool, not OpenMP: with the "omp" layer numba.set_num_threads reaches into
    # the OpenMP runtime that torch's intra-op threads use (torch's count changed under it), and GNU
    # OpenMP is not fork-safe (data-loader workers fork). The workqueue pool is neither; it must not
    # be entered from two threads at once, so only the main thread runs the parallel kernels.
    if "NUMBA_THREADING_LAYER" not in os.environ:
        numba.config.THREADING_LAYER = "workqueue"

__all__ = ["available", "selective_scan_compiled"]

_BLOCK = 32  # steps between stored states; the backward keeps 2 × _BLOCK × E × N floats per row


def available() -> bool:
    """True when the compiled kernels can be used (numba importable and not disabled)."""
    return numba is not None and os.environ.get("DNADIFF_DISABLE_NUMBA", "") in ("", "0")


if numba is not None:
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic, overload

    # Kernels compile with reassociation and fused multiply-add allowed (so LLVM vectorises the
    # length-N loops and their sums), never with "no NaN/inf" assumptions: inf and NaN propagate as
    # in the PyTorch scans.
    _FAST = {"contract", "reassoc"}

    @intrinsic
    def _f32_from_bits(typingctx, bits):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.FloatType())

        return types.float32(types.int32), codegen

    @njit(cache=True, inline="always", fastmath=_FAST)
    def _exp_f32(x):
        """exp for float32 with plain arithmetic, so it vectorises (numba's math.exp is a scalar libm
        call): x = k ln2 + r, |r| <= ln2/2 (Cody-Waite split of ln2), exp(r) by its degree-7 Taylor
        polynomial, 2^k from the exponent bits. Max relative error 1e-7 on [-87, 88]; 0 below -87
        (exp(-87) = 1.6e-38: a decay that small has wiped the state either way), and it saturates
        at exp(88) above (unreachable in Mamba, where Δ > 0 and A < 0 make Δ·A <= 0)."""
        xc = min(max(x, np.float32(-87.0)), np.float32(88.0))
        k = np.floor(xc * np.float32(1.4426950408889634) + np.float32(0.5))
        r = xc - k * np.float32(0.693145751953125) - k * np.float32(1.428606765330187e-06)
        p = np.float32(1.0 / 5040.0)
        p = p * r + np.float32(1.0 / 720.0)
        p = p * r + np.float32(1.0 / 120.0)
        p = p * r + np.float32(1.0 / 24.0)
        p = p * r + np.float32(1.0 / 6.0)
        p = p * r + np.float32(0.5)
        p = p * r + np.float32(1.0)
        p = p * r + np.float32(1.0)
        v = p * _f32_from_bits(np.int32((np.int32(k) + np.int32(127)) << np.int32(23)))
        return np.float32(0.0) if x < np.float32(-87.0) else v

    def _exp(x):  # typed by the overload below
        raise NotImplementedError

    @overload(_exp, inline="always")
    def _exp_overload(x):
        if x == types.float32:
            return lambda x: _exp_f32(x)
        return lambda x: math.exp(x)  # float64: libm, exact to the last bit for the float64 tests

    @njit(cache=True, fastmath=_FAST)
    def _forward_row(b, u, dl, A, Bm, Cm, D, gate, has_gate, out, starts, last):
        length, e_dim = u.shape[1], u.shape[2]
        n_dim = A.shape[1]
        zero = np.zeros(1, dtype=u.dtype)[0]
        h = np.zeros((e_dim, n_dim), dtype=u.dtype)  # (E, N) state of this sequence
        for t in range(length):
            if t % _BLOCK == 0:
                starts[b, t // _BLOCK] = h
            for e in range(e_dim):
                d = dl[b, t, e]
                ut = u[b, t, e]
                x = d * ut
                acc = zero
                for n in range(n_dim):  # h_t = exp(Δ_t A) h_{t-1} + Δ_t u_t B_t;  C_t · h_t
                    hn = _exp(d * A[e, n]) * h[e, n] + x * Bm[b, t, n]
                    h[e, n] = hn
                    acc += hn * Cm[b, t, n]
                y = acc + D[e] * ut
                out[b, t, e] = y * gate[b, t, e] if has_gate else y
        last[b] = h

    @njit(cache=True)
    def _forward_serial(u, dl, A, Bm, Cm, D, gate, has_gate, out, starts, last):
        for b in range(u.shape[0]):
            _forward_row(b, u, dl, A, Bm, Cm, D, gate, has_gate, out, starts, last)

    @njit(cache=True, parallel=True)
    def _forward_parallel(u, dl, A, Bm, Cm, D, gate, has_gate, out, starts, last):
        for b in prange(u.shape[0]):
            _forward_row(b, u, dl, A, Bm, Cm, D, gate, has_gate, out, starts, last)

    @njit(cache=True, fastmath=_FAST)
    def _backward_row(b, dout, u, dl, A, Bm, Cm, D, gate, has_gate, starts, du, ddl, dB, dC, dgate, dA_rows,
                      dD_rows):
        length, e_dim = u.shape[1], u.shape[2]
        n_dim = A.shape[1]
        zero = np.zeros(1, dtype=u.dtype)[0]
        hs = np.empty((_BLOCK + 1, e_dim, n_dim), dtype=u.dtype)  # hs[i] = h_{t0+i-1} in the block
        alphas = np.empty((_BLOCK, e_dim, n_dim), dtype=u.dtype)  # exp(Δ_t A)
        dvals = np.empty((_BLOCK, e_dim), dtype=u.dtype)  # Δ_t
        g = np.zeros((e_dim, n_dim), dtype=u.dtype)  # α_{t+1} ⊙ g_{t+1}, carried to step t
        dA_block = np.zeros((e_dim, n_dim), dtype=u.dtype)
        dA_acc = np.zeros((e_dim, n_dim), dtype=np.float64)  # per block in dtype, across blocks in f64
        dD_acc = np.zeros(e_dim, dtype=np.float64)
        dB_t = np.empty(n_dim, dtype=u.dtype)
        dC_t = np.empty(n_dim, dtype=u.dtype)
        for k in range((length + _BLOCK - 1) // _BLOCK - 1, -1, -1):
            t0 = k * _BLOCK
            steps = min(length, t0 + _BLOCK) - t0
            hs[0] = starts[b, k]
            for i in range(steps):  # recompute the block's decays and states
                t = t0 + i
                for e in range(e_dim):
                    d = dl[b, t, e]
                    dvals[i, e] = d
                    x = d * u[b, t, e]
                    for n in range(n_dim):
                        a = _exp(d * A[e, n])
                        alphas[i, e, n] = a
                        hs[i + 1, e, n] = a * hs[i, e, n] + x * Bm[b, t, n]
            dA_block[:] = zero
            for i in range(steps - 1, -1, -1):  # the adjoint recurrence, in reverse time
                t = t0 + i
                dB_t[:] = zero
                dC_t[:] = zero
                for e in range(e_dim):
                    d = dvals[i, e]
                    ut = u[b, t, e]
                    dy = dout[b, t, e]
                    if has_gate:  # out = y ⊙ gate: recompute y = C_t·h_t + D u_t for dL/dgate
                        acc = zero
                        for n in range(n_dim):
                            acc += Cm[b, t, n] * hs[i + 1, e, n]
                        dgate[b, t, e] = dy * (acc + D[e] * ut)
                        dy = dy * gate[b, t, e]
                    dD_acc[e] += dy * ut
                    x = d * ut
                    gB = zero  # Σ_n g_t B_t
                    dd = zero  # Σ_n dL/d(Δ_t A_n) A_n
                    for n in range(n_dim):
                        gn = g[e, n] + Cm[b, t, n] * dy  # g_t = C_t dy_t + α_{t+1} g_{t+1}
                        dC_t[n] += dy * hs[i + 1, e, n]
                        dB_t[n] += gn * x
                        gB += gn * Bm[b, t, n]
                        a = alphas[i, e, n]
                        q = gn * a * hs[i, e, n]  # dL/d(Δ_t A_n) = g_t α_t h_{t-1}
                        dd += q * A[e, n]
                        dA_block[e, n] += q * d
                        g[e, n] = gn * a
                    du[b, t, e] = gB * d + dy * D[e]
                    ddl[b, t, e] = dd + gB * ut
                dB[b, t] = dB_t
                dC[b, t] = dC_t
            for e in range(e_dim):
                for n in range(n_dim):
                    dA_acc[e, n] += dA_block[e, n]
        for e in range(e_dim):
            dD_rows[b, e] = dD_acc[e]
            for n in range(n_dim):
                dA_rows[b, e, n] = dA_acc[e, n]

    @njit(cache=True)
    def _backward_serial(dout, u, dl, A, Bm, Cm, D, gate, has_gate, starts, du, ddl, dB, dC, dgate, dA_rows,
                         dD_rows):
        for b in range(u.shape[0]):
            _backward_row(b, dout, u, dl, A, Bm, Cm, D, gate, has_gate, starts, du, ddl, dB, dC, dgate, dA_rows,
                          dD_rows)

    @njit(cache=True, parallel=True)
    def _backward_parallel(dout, u, dl, A, Bm, Cm, D, gate, has_gate, starts, du, ddl, dB, dC, dgate, dA_rows,
                           dD_rows):
        for b in prange(u.shape[0]):
            _backward_row(b, dout, u, dl, A, Bm, Cm, D, gate, has_gate, starts, du, ddl, dB, dC, dgate, dA_rows,
                          dD_rows)


# below this many state updates (B·L·E·N) a call runs serially: at B=4, L=256, E=236, N=16 (3.9M)
# two threads were no faster than one on an idle 2-core machine (9.4 vs 8.5 ms fwd+bwd)
_PARALLEL_MIN_WORK = 8_000_000


def _threads_for(batch: int, work: int) -> int:
    """Threads for one kernel call: torch's thread count (what `--threads` sets), at most one per row;
    one (the serial kernels) for small calls and outside the main thread."""
    if work < _PARALLEL_MIN_WORK or threading.current_thread() is not threading.main_thread():
        return 1
    return max(1, min(torch.get_num_threads(), batch))


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy()


class _CompiledScan(torch.autograd.Function):
    """The kernels plus the elementwise ends of the layer, all inside one autograd node: Δ =
    softplus(delta + bias) and the gate silu(z) are single vectorised PyTorch ops here (transcendental
    calls per element in the kernels' scalar loops cost more than the whole scan), their derivatives
    too; the kernels multiply by the gate and return dL/dΔ and dL/dgate."""

    @staticmethod
    def forward(ctx, u, delta, A, Bm, Cm, D, z, bias, softplus):
        # all inputs contiguous, same float dtype; D, bias: (E,) (zeros when absent); z: (B, L, E) or None
        threads = _threads_for(u.shape[0], u.numel() * A.shape[1])  # read before the torch ops drop to one
        with _torch_single_thread():
            return _CompiledScan._forward(ctx, u, delta, A, Bm, Cm, D, z, bias, softplus, threads)

    @staticmethod
    def _forward(ctx, u, delta, A, Bm, Cm, D, z, bias, softplus, threads):
        b, length, e = u.shape
        n = A.shape[1]
        raw = delta + bias
        dl = F.softplus(raw) if softplus else raw  # Δ (B, L, E)
        has_gate = z is not None
        gate = F.silu(z) if has_gate else u.new_zeros(1, 1, 1)
        out = u.new_empty(b, length, e)
        starts = u.new_empty(b, -(-length // _BLOCK), e, n)  # the state entering every block
        last = u.new_empty(b, e, n)
        args = [_np(x) for x in (u, dl, A, Bm, Cm, D, gate)]
        if threads > 1:
            with _numba_threads(threads):
                _forward_parallel(*args, has_gate, out.numpy(), starts.numpy(), last.numpy())
        else:
            _forward_serial(*args, has_gate, out.numpy(), starts.numpy(), last.numpy())
        ctx.softplus, ctx.has_gate, ctx.n_state = softplus, has_gate, n
        ctx.save_for_backward(u, raw, dl, A, Bm, Cm, D, z if has_gate else gate, gate, starts)
        ctx.mark_non_differentiable(last)
        return out, last

    @staticmethod
    def backward(ctx, dout, _dlast):
        threads = _threads_for(dout.shape[0], dout.numel() * ctx.n_state)
        with _torch_single_thread():
            return _CompiledScan._backward(ctx, dout, threads)

    @staticmethod
    def _backward(ctx, dout, threads):
        u, raw, dl, A, Bm, Cm, D, z, gate, starts = ctx.saved_tensors
        b = u.shape[0]
        dout = dout.to(u.dtype).contiguous()
        du, ddl = torch.empty_like(u), torch.empty_like(u)
        dB, dC = torch.empty_like(Bm), torch.empty_like(Cm)
        dgate = torch.empty_like(u) if ctx.has_gate else gate
        dA_rows, dD_rows = u.new_empty(b, *A.shape), u.new_empty(b, D.shape[0])
        args = [dout.numpy()] + [_np(x) for x in (u, dl, A, Bm, Cm, D, gate)]
        outs = [x.numpy() for x in (du, ddl, dB, dC, dgate, dA_rows, dD_rows)]
        if threads > 1:
            with _numba_threads(threads):
                _backward_parallel(*args, ctx.has_gate, _np(starts), *outs)
        else:
            _backward_serial(*args, ctx.has_gate, _np(starts), *outs)
        ddelta = ddl * torch.sigmoid(raw) if ctx.softplus else ddl  # softplus' = sigmoid
        dz = None
        if ctx.has_gate:
            sig = torch.sigmoid(z)
            dz = dgate * sig * (1.0 + z * (1.0 - sig))  # silu'(z)
        return du, ddelta, dA_rows.sum(0), dB, dC, dD_rows.sum(0), dz, ddelta.sum((0, 1)), None


class _numba_threads:
    """numba's thread count for one call (numba.set_num_threads is per calling thread), rows handed out
    one at a time (chunk size 1): a thread on a core another process keeps busy takes fewer rows
    instead of holding up the others with its fixed share."""

    def __init__(self, threads: int):
        self.threads = min(threads, numba.config.NUMBA_NUM_THREADS)

    def __enter__(self):
        self.before = numba.get_num_threads()
        numba.set_num_threads(self.threads)
        self.chunk = numba.set_parallel_chunksize(1)

    def __exit__(self, *exc):
        numba.set_parallel_chunksize(self.chunk)
        numba.set_num_threads(self.before)


class _torch_single_thread:
    """torch's elementwise ends of the scan (softplus, silu, their derivatives) on one thread: each op
    is a parallel region of its own, and on a busy machine every one waits for the slowest thread;
    these few memory-bound passes gain nothing from a second thread."""

    def __enter__(self):
        self.before = torch.get_num_threads()
        if self.before > 1:
            torch.set_num_threads(1)

    def __exit__(self, *exc):
        if self.before > 1:
            torch.set_num_threads(self.before)


def selective_scan_compiled(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                            return_last_state=False):
    """Compiled scan (same arguments and result as `selective_scan_ref`), CPU tensors only.

    Computed in float32 (float64 for float64 inputs) whatever the input dtype or autocast state;
    the result has the input dtype. `return_last_state` adds h_L Float[B, E, N] (no gradient)."""
    if not available():
        raise RuntimeError("the compiled selective scan needs numba (pip install numba)")
    if u.device.type != "cpu":
        raise RuntimeError(f"the compiled selective scan runs on CPU tensors, got {u.device}")
    with torch.autocast(device_type="cpu", enabled=False):
        dtype_in = u.dtype
        ct = torch.promote_types(u.dtype, torch.float32)
        e = u.shape[-1]
        D = u.new_zeros(e, dtype=ct) if D is None else D.to(ct)
        bias = u.new_zeros(e, dtype=ct) if delta_bias is None else delta_bias.to(ct)
        args = [x.to(ct).contiguous() for x in (u, delta, A, B, C)]
        zc = None if z is None else z.to(ct).contiguous()
        out, last = _CompiledScan.apply(*args, D.contiguous(), zc, bias.contiguous(), bool(delta_softplus))
        out = out.to(dtype_in)
    return (out, last) if return_last_state else out
