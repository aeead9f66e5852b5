"""Stand-in `mamba_ssm` and `causal_conv1d` modules, so the CPU tests can drive dnadiff's CUDA dispatch.

Each stand-in has the signature of the real function (state-spaces/mamba 2.x, Dao-AILab/causal-conv1d
1.4+), does what the real Python wrapper does before the kernel (its `.contiguous()` calls, recorded in
`KernelLog.copies`, because each is a hidden copy), then checks what the kernel's C++/Triton code checks
(TORCH_CHECKs on dtypes, shapes and strides; a failed check raises RuntimeError as the kernel does),
computes the result with dnadiff's pure PyTorch path, and returns it in a tensor allocated as the
kernel allocates it (`torch.empty_like` of the input whose layout it copies). The backward passes
recompute with the pure path and check what the backward kernels check.

    selective_scan_fn(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                      return_last_state=False)        u, delta, z (B, E, L); B, C (B, N, L) or (B, G, N, L)
    selective_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False)
    causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,
                     final_states_out=None, activation=None)                   x (B, D, L), weight (D, W)
    causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                         conv_state_indices=None)     x (B, D) or (B, D, L), conv_state (B, D, state_len)

The `fake_kernels` fixture (tests/conftest.py) puts them in sys.modules (removed afterwards) and
yields the KernelLog.
"""

from __future__ import annotations

import contextlib
import sys
import types
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise RuntimeError(message)  # what a failed TORCH_CHECK raises


@dataclass
class KernelLog:
    calls: list = field(default_factory=list)  # (kernel name, {argument: (shape, stride, dtype)})
    copies: list = field(default_factory=list)  # "kernel: what was copied" for each hidden copy
    depth: int = 0  # > 0 while a stand-in runs (tests that trace dnadiff's own ops leave these out)

    @contextlib.contextmanager
    def inside(self):
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def record(self, name: str, **tensors) -> None:
        self.calls.append((name, {k: (tuple(t.shape), t.stride(), t.dtype) for k, t in tensors.items()
                                  if t is not None}))

    def contiguous(self, name: str, what: str, t: torch.Tensor) -> torch.Tensor:
        self.copies.append(f"{name}: {what}")
        return t.contiguous()


# ---- selective scan ---------------------------------------------------------------------------------

def _scan_pure(u, delta, A, B, C, D, z, delta_bias, softplus, return_last_state):
    """dnadiff's pure scan on the kernel layout (B, E, L) / (B, N, L) or (B, G, N, L)."""
    from dnadiff.backbones.scan import selective_scan_chunked, selective_scan_ref

    if B.dim() == 4:  # groups: channel block g reads B[:, g], C[:, g]
        g = B.shape[1]
        parts = [_scan_pure(*(None if t is None else t.chunk(g, dim=0 if t.dim() < 3 else 1)[i]
                              for t in (u, delta, A)), B[:, i], C[:, i],
                            *(None if t is None else t.chunk(g, dim=0 if t.dim() < 3 else 1)[i]
                              for t in (D, z, delta_bias)), softplus, return_last_state) for i in range(g)]
        if return_last_state:
            return torch.cat([p[0] for p in parts], 1), torch.cat([p[1] for p in parts], 1)
        return torch.cat(parts, 1)
    def t(x):
        return None if x is None else x.transpose(1, 2)

    if return_last_state:
        out, last = selective_scan_ref(t(u), t(delta), A, t(B), t(C), D, t(z), delta_bias, softplus,
                                       return_last_state=True)
        return t(out), last
    return t(selective_scan_chunked(t(u), t(delta), A, t(B), t(C), D, t(z), delta_bias, softplus))


class _LoggedKernel(torch.autograd.Function):
    """A stand-in kernel whose forward and backward (its `_forward` / `_backward`) run inside the call log
    (KernelLog.depth > 0), so tests that trace dnadiff's own operations leave the stand-in's work out."""

    @classmethod
    def forward(cls, ctx, log, *args):
        with log.inside():
            return cls._forward(ctx, log, *args)

    @classmethod
    def backward(cls, ctx, *grads):
        with ctx.log.inside():
            return cls._backward(ctx, *grads)


class _SelectiveScan(_LoggedKernel):

    @staticmethod
    def _forward(ctx, log, u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state):
        name = "selective_scan_fn"
        # the Python wrapper (selective_scan_interface.SelectiveScanFn.forward)
        if u.stride(-1) != 1:
            u = log.contiguous(name, "u", u)
        if delta.stride(-1) != 1:
            delta = log.contiguous(name, "delta", delta)
        if D is not None and not D.is_contiguous():
            D = log.contiguous(name, "D", D)
        if B.stride(-1) != 1:
            B = log.contiguous(name, "B", B)
        if C.stride(-1) != 1:
            C = log.contiguous(name, "C", C)
        if z is not None and z.stride(-1) != 1:
            z = log.contiguous(name, "z", z)
        # the kernel (csrc/selective_scan/selective_scan.cpp, selective_scan_fwd)
        itype = u.dtype
        _check(itype in FLOATS, "u must be float32, float16 or bfloat16")
        _check(A.dtype == torch.float32, "A must be float32 (real weights)")
        _check(delta.dtype == itype and B.dtype == itype and C.dtype == itype, "delta, B, C must have u's dtype")
        batch, dim, seqlen = u.shape
        dstate = A.shape[1]
        _check(dstate <= 256, "selective_scan only supports state dimension <= 256")
        _check(tuple(delta.shape) == (batch, dim, seqlen), "delta must have shape (batch, dim, seqlen)")
        _check(tuple(A.shape) == (dim, dstate), "A must have shape (dim, dstate)")
        for nm, m in (("B", B), ("C", C)):
            groups = m.shape[1] if m.dim() == 4 else 1
            _check(m.dim() in (3, 4) and tuple(m.shape[-2:]) == (dstate, seqlen) and m.shape[0] == batch
                   and dim % groups == 0, f"{nm} must have shape (batch, [groups,] dstate, seqlen)")
            _check(m.stride(-1) == 1 or m.size(-1) == 1, f"{nm} must have unit stride along L")
        _check(u.stride(-1) == 1 or u.size(-1) == 1, "u must have unit stride along L")
        _check(delta.stride(-1) == 1 or delta.size(-1) == 1, "delta must have unit stride along L")
        for nm, v in (("D", D), ("delta_bias", delta_bias)):
            if v is not None:
                _check(v.dtype == torch.float32 and tuple(v.shape) == (dim,) and (v.stride(-1) == 1 or v.size(-1) == 1),
                       f"{nm} must be float32 of shape (dim,)")
        if z is not None:
            _check(z.dtype == itype and tuple(z.shape) == (batch, dim, seqlen)
                   and (z.stride(-1) == 1 or z.size(-1) == 1),
                   "z must have u's dtype, shape and unit stride along L")
        log.record(name, u=u, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias)
        with torch.no_grad():
            res = _scan_pure(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)
        y, last = res if return_last_state else (res, None)
        out = torch.empty_like(z if z is not None else delta)  # out_z = empty_like(z), out = empty_like(delta)
        out.copy_(y)
        ctx.log, ctx.softplus, ctx.itype = log, delta_softplus, itype
        ctx.has = [t is not None for t in (D, z, delta_bias)]
        ctx.save_for_backward(u, delta, A, B, C, *(t for t in (D, z, delta_bias) if t is not None))
        if return_last_state:
            ctx.mark_non_differentiable(last)  # "the gradient of the last state is not considered"
            return out, last.float()
        return out

    @staticmethod
    def _backward(ctx, dout, *unused):
        log, name = ctx.log, "selective_scan_fn"
        if dout.stride(-1) != 1:  # SelectiveScanFn.backward
            dout = log.contiguous(name, "dout (backward)", dout)
        _check(dout.dtype == ctx.itype, "dout must have u's dtype")  # selective_scan_bwd
        saved = list(ctx.saved_tensors)
        u, delta, A, B, C = saved[:5]
        rest = iter(saved[5:])
        D, z, delta_bias = (next(rest) if h else None for h in ctx.has)
        ins = [u, delta, A, B, C, D, z, delta_bias]
        with torch.enable_grad():
            leaves = [None if t is None else t.detach().requires_grad_() for t in ins]
            y = _scan_pure(*leaves[:8], ctx.softplus, False)
            present = [t for t in leaves if t is not None]
            grads = iter(torch.autograd.grad(y, present, dout))
        out = [None if t is None else next(grads) for t in leaves]
        return (None, *out, None, None)


def make_selective_scan_fn(log: KernelLog):
    def selective_scan_fn(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                          return_last_state=False):
        return _SelectiveScan.apply(log, u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)
    return selective_scan_fn


def make_selective_state_update(log: KernelLog):
    def selective_state_update(*args, **kwargs):
        with log.inside():
            return _selective_state_update(*args, **kwargs)

    def _selective_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
                                state_batch_indices=None):
        # mamba_ssm/ops/triton/selective_state_update.py (the single-head form dnadiff uses)
        from dnadiff.backbones.mamba import ssm_step

        _check(state.dim() == 3, "stand-in: only the (batch, dim, dstate) state (no heads)")
        _check(state_batch_indices is None, "stand-in: no state_batch_indices")
        batch, dim, dstate = x.shape[0], state.shape[1], state.shape[2]
        _check(tuple(x.shape) == (batch, dim) and tuple(dt.shape) == tuple(x.shape), "x, dt: (batch, dim)")
        _check(tuple(A.shape) == (dim, dstate), "A: (dim, dstate)")
        _check(tuple(B.shape) == (batch, dstate) and tuple(C.shape) == tuple(B.shape), "B, C: (batch, dstate)")
        _check(D is None or tuple(D.shape) == (dim,), "D: (dim,)")
        _check(z is None or tuple(z.shape) == tuple(x.shape), "z: like x")
        # the wrapper reads dt_bias.stride(-1) unconditionally: None fails there
        _check(dt_bias is not None and tuple(dt_bias.shape) == (dim,), "dt_bias: (dim,), required")
        log.record("selective_state_update", state=state, x=x, dt=dt, A=A, B=B, C=C, D=D, z=z, dt_bias=dt_bias)
        out = torch.empty_like(x)
        out.copy_(ssm_step(state, x, dt, A, B, C, D, z, dt_bias, dt_softplus))
        return out
    return selective_state_update


# ---- causal conv1d ----------------------------------------------------------------------------------

def _conv_pure(x, weight, bias, silu):
    """dnadiff's PyTorch causal depthwise conv on (B, D, L), computed in the weight dtype."""
    width, dim = weight.shape[1], weight.shape[0]
    out = F.conv1d(x.to(weight.dtype), weight.unsqueeze(1), bias, padding=width - 1, groups=dim)[..., :x.shape[-1]]
    return (F.silu(out) if silu else out).to(x.dtype)


def _conv_checks(x, weight, bias, what):
    _check(x.dtype in FLOATS and weight.dtype in FLOATS, "x and weight must be float32, float16 or bfloat16")
    _check(x.dim() == 3, "x must be (batch, dim, seqlen)")
    dim, width = x.shape[1], weight.shape[-1]
    _check(tuple(weight.shape) == (dim, width), "weight must have shape (dim, width)")
    _check(2 <= width <= 4, "causal_conv1d only supports width between 2 and 4")
    if bias is not None:
        _check(bias.dtype == weight.dtype and bias.stride(-1) == 1 and tuple(bias.shape) == (dim,),
               "bias must have weight's dtype, shape (dim,) and unit stride")
    if what == "fwd":
        _check(x.stride(2) == 1 or x.stride(1) == 1, "x must have unit stride along L or along the channels")
        channel_last = x.stride(1) == 1 and x.stride(2) > 1
        if channel_last:
            _check(dim % 8 == 0, "causal_conv1d only supports channel dimension divisible by 8 for now")
            _check(x.stride(2) % 8 == 0 and x.stride(0) % 8 == 0, "causal_conv1d with channel last layout "
                   "requires strides (x.stride(0) and x.stride(2)) to be multiples of 8")
        return channel_last
    return False


class _CausalConv1d(_LoggedKernel):
    @staticmethod
    def _forward(ctx, log, x, weight, bias, silu):
        name = "causal_conv1d_fn"
        if x.stride(2) != 1 and x.stride(1) != 1:  # CausalConv1dFn.forward
            x = log.contiguous(name, "x", x)
        if bias is not None and not bias.is_contiguous():
            bias = log.contiguous(name, "bias", bias)
        ctx.channel_last = _conv_checks(x, weight, bias, "fwd")  # causal_conv1d_fwd
        log.record(name, x=x, weight=weight, bias=bias)
        out = torch.empty_like(x)  # causal_conv1d_fwd_function
        with torch.no_grad():
            out.copy_(_conv_pure(x, weight, bias, silu))
        ctx.log, ctx.silu, ctx.has_bias = log, silu, bias is not None
        ctx.save_for_backward(x, weight, *([bias] if bias is not None else []))
        return out

    @staticmethod
    def _backward(ctx, dout):
        log, name = ctx.log, "causal_conv1d_fn"
        if dout.stride(2) != 1 and dout.stride(1) != 1:  # CausalConv1dFn.backward
            dout = log.contiguous(name, "dout (backward)", dout)
        if not ctx.channel_last and dout.stride(2) != 1:  # causal_conv1d_bwd
            dout = log.contiguous(name, "dout (backward, channel-first kernel)", dout)
        if ctx.channel_last and dout.stride(1) != 1:
            log.copies.append(f"{name}: dout (backward, channel-last kernel)")
            dout = dout.transpose(-1, -2).contiguous().transpose(-1, -2)
        x, weight, *b = ctx.saved_tensors
        bias = b[0] if b else None
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in (x, weight, *b)]
            y = _conv_pure(leaves[0], leaves[1], leaves[2] if b else None, ctx.silu)
            grads = torch.autograd.grad(y, leaves, dout)
        dx = torch.empty_like(x)  # causal_conv1d_bwd_function
        dx.copy_(grads[0])
        return None, dx, grads[1], grads[2] if bias is not None else None, None


def make_causal_conv1d_fn(log: KernelLog):
    def causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,
                         final_states_out=None, activation=None):
        if activation not in (None, "silu", "swish"):
            raise NotImplementedError("activation must be None, silu, or swish")
        if seq_idx is not None or initial_states is not None or return_final_states or final_states_out is not None:
            raise NotImplementedError("stand-in: seq_idx, initial_states and final states are not used by dnadiff")
        return _CausalConv1d.apply(log, x, weight, bias, activation in ("silu", "swish"))
    return causal_conv1d_fn


def make_causal_conv1d_update(log: KernelLog):
    def causal_conv1d_update(*args, **kwargs):
        with log.inside():
            return _causal_conv1d_update(*args, **kwargs)

    def _causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                              conv_state_indices=None):
        from dnadiff.backbones.mamba import conv_step

        if activation not in (None, "silu", "swish"):
            raise NotImplementedError("activation must be None, silu, or swish")
        _check(cache_seqlens is None and conv_state_indices is None, "stand-in: no circular or indexed states")
        unsqueeze = x.dim() == 2
        x3 = x.unsqueeze(-1) if unsqueeze else x
        _conv_checks(x3, weight, bias, "update")  # causal_conv1d_update (csrc/causal_conv1d.cpp)
        _check(conv_state.dtype == x.dtype, "conv_state must have x's dtype")
        batch, dim, seqlen = x3.shape
        _check(conv_state.dim() == 3 and conv_state.shape[0] == batch and conv_state.shape[1] == dim
               and conv_state.shape[2] >= weight.shape[1] - 1, "conv_state must be (batch, dim, >= width - 1)")
        _check(seqlen == 1 and conv_state.shape[2] == weight.shape[1],
               "stand-in: one token and a width-long state (what dnadiff's step uses)")
        log.record("causal_conv1d_update", x=x3, conv_state=conv_state, weight=weight, bias=bias)
        out = torch.empty_like(x3)  # causal_conv1d_update_function
        out[..., 0] = conv_step(x3[..., 0], conv_state, weight, bias, activation)
        return out.squeeze(-1) if unsqueeze else out
    return causal_conv1d_update


# ---- installing them --------------------------------------------------------------------------------

def _package(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__path__ = []  # a package, so submodules import from sys.modules
    for k, v in attrs.items():
        setattr(m, k, v)
    return m


def stand_in_modules(log: KernelLog, conv: bool = True, scan: bool = True) -> dict[str, types.ModuleType]:
    mods: dict[str, types.ModuleType] = {}
    if scan:
        iface = types.ModuleType("mamba_ssm.ops.selective_scan_interface")
        iface.selective_scan_fn = make_selective_scan_fn(log)
        iface.selective_scan_cuda = object()  # the compiled extension is "there"
        ssu = types.ModuleType("mamba_ssm.ops.triton.selective_state_update")
        ssu.selective_state_update = make_selective_state_update(log)
        triton = _package("mamba_ssm.ops.triton", selective_state_update=ssu)
        ops = _package("mamba_ssm.ops", selective_scan_interface=iface, triton=triton)
        mods.update({"mamba_ssm": _package("mamba_ssm", ops=ops), "mamba_ssm.ops": ops,
                     "mamba_ssm.ops.selective_scan_interface": iface, "mamba_ssm.ops.triton": triton,
                     "mamba_ssm.ops.triton.selective_state_update": ssu})
    if conv:
        mods["causal_conv1d"] = _package("causal_conv1d", causal_conv1d_fn=make_causal_conv1d_fn(log),
                                         causal_conv1d_update=make_causal_conv1d_update(log))
    return mods


class _NotInstalled:
    """A meta-path finder for which the packages do not exist, whatever is installed here."""

    def __init__(self, packages):
        self.packages = set(packages)

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top in self.packages:
            raise ModuleNotFoundError(f"No module named {top!r}", name=top)
        return None


def install(monkeypatch, modules: dict[str, types.ModuleType], absent: tuple[str, ...] = ()) -> None:
    """Put modules in sys.modules for this test, make the `absent` packages not installed, and forget
    what dnadiff's kernels module had imported."""
    from dnadiff.backbones import kernels

    for name in ("mamba_ssm", "causal_conv1d"):
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, key)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    if absent:
        monkeypatch.setattr(sys, "meta_path", [_NotInstalled(absent), *sys.meta_path])
    kernels.reset_kernels()


def stand_in_kernels(monkeypatch):
    """The `fake_kernels` fixture (tests/conftest.py): the four stand-in kernels importable for one test;
    yields the KernelLog of their calls."""
    from dnadiff.backbones import kernels

    log = KernelLog()
    install(monkeypatch, stand_in_modules(log))
    yield log
    kernels.reset_kernels()
