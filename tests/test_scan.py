"""The chunked selective scan equals the sequential reference (outputs and all gradients)."""

import pytest
import torch

from dnadiff.backbones import kernels
from dnadiff.backbones.scan import mamba_ssm_available, selective_scan, selective_scan_chunked, selective_scan_ref
from dnadiff.errors import DnadiffError
from helpers.fake_kernels import install

NAMES = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")


def _inputs(b, length, e, n, dtype, seed=0, delta_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    a = -torch.exp(r(e, n)) * 2.0  # negative real parts (Mamba's A = -exp(A_log))
    tensors = [r(b, length, e), r(b, length, e) * delta_scale, a, r(b, length, n), r(b, length, n), r(e),
               r(b, length, e), r(e) - 1.0]
    return [t.requires_grad_() for t in tensors]


def _rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-5)])
@pytest.mark.parametrize("length", [1, 5, 64, 100, 257])
def test_chunked_equals_reference(dtype, tol, length):
    args = _inputs(2, length, 6, 4, dtype, seed=length)
    ref = selective_scan_ref(*args, delta_softplus=True)
    fast = selective_scan_chunked(*args, delta_softplus=True, chunk=16, sub_block=4)
    assert fast.dtype == dtype and fast.shape == (2, length, 6)
    assert _rel(fast, ref) < tol
    gy = torch.randn_like(ref)
    g_ref = torch.autograd.grad(ref, args, gy)
    g_fast = torch.autograd.grad(fast, args, gy)
    for name, a, b in zip(NAMES, g_fast, g_ref):
        if name == "A" and length == 1:  # dA = 0 when there is no previous state
            assert a.abs().max() == 0 and b.abs().max() == 0
            continue
        assert _rel(a, b) < tol, name


def test_large_decays_stay_exact():
    # Δ·|A| up to ~100 per step: states forget within a step or two; products of decays underflow
    # to 0 exactly as in the sequential scan, nothing overflows.
    args = _inputs(2, 40, 5, 3, torch.float64, seed=3, delta_scale=8.0)
    ref = selective_scan_ref(*args, delta_softplus=True)
    fast = selective_scan_chunked(*args, delta_softplus=True, chunk=16, sub_block=4)
    assert torch.isfinite(fast).all() and _rel(fast, ref) < 1e-10
    gr = torch.autograd.grad(ref.sum(), args)
    gf = torch.autograd.grad(fast.sum(), args)
    for name, a, b in zip(NAMES, gf, gr):
        assert torch.isfinite(a).all() and _rel(a, b) < 1e-9, name


@pytest.mark.parametrize("chunk,sub_block,length", [(8, 1, 19), (12, 3, 50), (16, 16, 37), (64, 8, 300),
                                                    (64, 8, 64), (5, 7, 23)])
def test_chunk_and_sub_block_shapes(chunk, sub_block, length):
    # one or several sub-blocks per chunk, several chunks, L not a multiple of the chunk (padded)
    args = _inputs(1, length, 4, 3, torch.float64, seed=length)
    ref = selective_scan_ref(*args, delta_softplus=True)
    fast = selective_scan_chunked(*args, delta_softplus=True, chunk=chunk, sub_block=sub_block)
    assert _rel(fast, ref) < 1e-10
    gy = torch.randn_like(ref)
    for name, a, b in zip(NAMES, torch.autograd.grad(fast, args, gy), torch.autograd.grad(ref, args, gy)):
        assert _rel(a, b) < 1e-9, name


def test_optional_arguments_and_dispatch():
    u, delta, a, b, c, d, z, bias = _inputs(1, 33, 3, 2, torch.float64, seed=7)
    delta = delta.detach().abs() + 0.01
    ref = selective_scan_ref(u, delta, a, b, c)  # no D, z, bias, softplus
    assert _rel(selective_scan_chunked(u, delta, a, b, c), ref) < 1e-12
    assert _rel(selective_scan(u, delta, a, b, c), ref) < 1e-12  # CPU default: chunked
    assert _rel(selective_scan(u, delta, a, b, c, impl="ref"), ref) == 0
    with pytest.raises(ValueError):
        selective_scan(u, delta, a, b, c, impl="nope")


def test_half_precision_inputs_compute_in_fp32():
    args = [t.detach() for t in _inputs(1, 20, 4, 2, torch.float32, seed=1)]
    out = selective_scan_chunked(*[t.bfloat16() for t in args], delta_softplus=True)
    ref = selective_scan_ref(*args, delta_softplus=True)
    assert out.dtype == torch.bfloat16 and _rel(out.float(), ref) < 5e-2


def test_mamba_ssm_absent_on_cpu_install(monkeypatch, request):
    # the CPU install: no mamba_ssm, so no kernel; "auto" is the pure scan (same output), "cuda" an error
    install(monkeypatch, {}, absent=("mamba_ssm",))
    request.addfinalizer(kernels.reset_kernels)
    assert mamba_ssm_available() is False
    args = _inputs(1, 33, 3, 2, torch.float64, seed=5)
    ref = selective_scan_ref(*args, delta_softplus=True)
    assert _rel(selective_scan(*args, delta_softplus=True), ref) < 1e-12
    with pytest.raises(DnadiffError, match="scan_impl=cuda needs mamba_ssm's selective_scan_fn: mamba_ssm is not "
                                           "installed"):
        selective_scan(*args, delta_softplus=True, impl="cuda")


def test_mamba_ssm_available_with_the_stand_in_kernels(fake_kernels):
    # the kernel importable: "auto" still takes the pure scan on CPU tensors, "cuda" calls the kernel
    assert mamba_ssm_available() is True
    args = _inputs(1, 33, 3, 2, torch.float32, seed=5)
    ref = selective_scan_ref(*args, delta_softplus=True)
    assert _rel(selective_scan(*args, delta_softplus=True), ref) < 2e-5 and fake_kernels.names() == []
    assert _rel(selective_scan(*args, delta_softplus=True, impl="cuda"), ref) < 2e-5
    assert fake_kernels.names() == ["selective_scan_fn"]



@pytest.mark.parametrize("impl", ["chunked", "ref"])
def test_bf16_autocast_keeps_the_scan_in_fp32(impl):
    # under autocast the C·h contractions (bmm/einsum) used to run in bf16
    # (relative error ~3e-3); the scan must compute in fp32 whatever the autocast state.
    args = _inputs(2, 40, 8, 4, torch.float32, seed=11)
    args64 = [t.detach().double().requires_grad_() for t in args]
    ref = selective_scan_ref(*args64, delta_softplus=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = selective_scan(*args, delta_softplus=True, impl=impl)
    assert out.dtype == torch.float32
    rel = ((out.double() - ref).norm() / ref.norm()).item()
    assert rel < 1e-5, rel
    gy = torch.randn(out.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ref_grads = torch.autograd.grad(ref, args64, gy)
    # backward outside autocast (as Lightning and PyTorch's AMP recipe run it); the custom chunked
    # Function also under autocast (someone calling backward inside the region)
    for inside in (False, True) if impl == "chunked" else (False,):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=inside):
            grads = torch.autograd.grad(out, args, gy.float(), retain_graph=True)
        for name, a, b in zip(NAMES, grads, ref_grads):
            assert ((a.double() - b).norm() / b.norm()).item() < 1e-5, (name, inside)
