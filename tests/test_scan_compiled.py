"""The compiled (numba) selective scan equals the float64 sequential reference and the chunked scan:
outputs, the last state and every input gradient; and `auto` dispatches to it on CPU."""

import pytest
import torch

from dnadiff.backbones import scan_compiled
from dnadiff.backbones.scan import selective_scan, selective_scan_chunked, selective_scan_ref
from dnadiff.backbones.scan_compiled import selective_scan_compiled

pytestmark = pytest.mark.skipif(not scan_compiled.available(), reason="numba is a dependency; absent here")

NAMES = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")


def _inputs(b, length, e, n, dtype, seed=0, delta_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    a = -torch.exp(r(e, n)) * 2.0
    tensors = [r(b, length, e), r(b, length, e) * delta_scale, a, r(b, length, n), r(b, length, n), r(e),
               r(b, length, e), r(e) - 1.0]
    return [t.requires_grad_() for t in tensors]


def _rel(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30)).item()


def _grads(out, args, gy):
    return torch.autograd.grad(out, args, gy)


# L=1, odd lengths, one below / at / above the kernel's stored-state block (32), several blocks
@pytest.mark.parametrize("batch,length", [(1, 1), (2, 1), (1, 7), (3, 31), (2, 32), (2, 33), (1, 65), (2, 101)])
def test_fp32_equals_float64_reference(batch, length):
    args = _inputs(batch, length, 6, 4, torch.float32, seed=length)
    args64 = [t.detach().double().requires_grad_() for t in args]
    ref, ref_last = selective_scan_ref(*args64, delta_softplus=True, return_last_state=True)
    out, last = selective_scan_compiled(*args, delta_softplus=True, return_last_state=True)
    assert out.dtype == torch.float32 and out.shape == (batch, length, 6) and last.shape == (batch, 6, 4)
    assert _rel(out, ref) < 1e-5 and _rel(last, ref_last) < 1e-5
    gy = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for name, a, b in zip(NAMES, _grads(out, args, gy.float()), _grads(ref, args64, gy)):
        if name == "A" and length == 1:  # no previous state: dA = 0 exactly
            assert a.abs().max() == 0 and b.abs().max() == 0
            continue
        assert _rel(a, b) < 1e-5, name


@pytest.mark.parametrize("length", [1, 40, 97])
def test_float64_matches_chunked_and_reference_to_rounding(length):
    args = _inputs(2, length, 5, 3, torch.float64, seed=7 + length)
    ref = selective_scan_ref(*args, delta_softplus=True)
    chunked = selective_scan_chunked(*args, delta_softplus=True, chunk=16, sub_block=4)
    out = selective_scan_compiled(*args, delta_softplus=True)
    assert _rel(out, ref) < 1e-12 and _rel(out, chunked) < 1e-12
    gy = torch.randn_like(ref)
    for name, a, b, c in zip(NAMES, _grads(out, args, gy), _grads(ref, args, gy), _grads(chunked, args, gy)):
        if name == "A" and length == 1:
            continue
        assert _rel(a, b) < 1e-11 and _rel(a, c) < 1e-11, name


def test_optional_arguments_absent():
    u, delta, a, b, c, *_ = _inputs(2, 45, 3, 2, torch.float64, seed=3)
    delta = (delta.detach().abs() + 0.01).requires_grad_()
    args = [u, delta, a, b, c]
    ref = selective_scan_ref(*args)  # no D, z, bias, softplus
    out = selective_scan_compiled(*args)
    assert _rel(out, ref) < 1e-12
    gy = torch.randn_like(ref)
    for a_, b_ in zip(_grads(out, args, gy), _grads(ref, args, gy)):
        assert _rel(a_, b_) < 1e-11


def test_large_decays_underflow_like_the_reference():
    # Δ·|A| up to ~100: decays below exp(-87) are flushed to 0 by the fp32 kernel (the reference
    # has denormals there); outputs and gradients agree and nothing is inf or NaN.
    args = _inputs(2, 40, 5, 3, torch.float32, seed=3, delta_scale=8.0)
    args64 = [t.detach().double().requires_grad_() for t in args]
    ref = selective_scan_ref(*args64, delta_softplus=True)
    out = selective_scan_compiled(*args, delta_softplus=True)
    assert torch.isfinite(out).all() and _rel(out, ref) < 1e-5
    for name, a, b in zip(NAMES, _grads(out.sum(), args, None), _grads(ref.sum(), args64, None)):
        assert torch.isfinite(a).all() and _rel(a, b) < 1e-5, name


def test_bf16_inputs_and_autocast_compute_in_fp32():
    args = [t.detach() for t in _inputs(2, 20, 4, 2, torch.float32, seed=1)]
    ref = selective_scan_ref(*[t.double() for t in args], delta_softplus=True)
    bf = [t.bfloat16() for t in args]
    out = selective_scan_compiled(*bf, delta_softplus=True)
    ref_bf = selective_scan_ref(*[t.double() for t in bf], delta_softplus=True)  # same rounded inputs
    assert out.dtype == torch.bfloat16 and _rel(out.float(), ref_bf) < 8e-3  # only the output rounding
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out32 = selective_scan(*args, delta_softplus=True, impl="compiled")
    assert out32.dtype == torch.float32 and _rel(out32, ref) < 1e-5


def test_threads_give_bitwise_identical_results(monkeypatch):
    monkeypatch.setattr(scan_compiled, "_PARALLEL_MIN_WORK", 0)  # the parallel kernels even for this small call
    args = _inputs(4, 70, 8, 4, torch.float32, seed=5)
    gy = torch.randn(4, 70, 8, generator=torch.Generator().manual_seed(2))
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            out = selective_scan_compiled(*args, delta_softplus=True)
            results.append((out, *_grads(out, args, gy)))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_auto_dispatch_and_fallback(monkeypatch):
    args = [t.detach() for t in _inputs(1, 9, 3, 2, torch.float32, seed=2)]
    calls = []
    real = scan_compiled.selective_scan_compiled
    monkeypatch.setattr(scan_compiled, "selective_scan_compiled", lambda *a: calls.append(1) or real(*a))
    selective_scan(*args, delta_softplus=True)  # CPU default: compiled
    assert calls == [1]
    monkeypatch.setenv("DNADIFF_DISABLE_NUMBA", "1")  # the documented fallback: numba unavailable
    assert not scan_compiled.available()
    out = selective_scan(*args, delta_softplus=True)
    assert calls == [1] and _rel(out, selective_scan_chunked(*args, delta_softplus=True)) == 0
    with pytest.raises(RuntimeError, match="numba"):
        selective_scan(*args, impl="compiled")


def test_return_last_state_agrees_across_implementations():
    args = [t.detach() for t in _inputs(2, 37, 4, 3, torch.float64, seed=9)]
    outs = {impl: selective_scan(*args, delta_softplus=True, return_last_state=True, impl=impl)
            for impl in ("ref", "chunked", "compiled")}
    for impl in ("chunked", "compiled"):
        assert _rel(outs[impl][0], outs["ref"][0]) < 1e-12
        assert _rel(outs[impl][1], outs["ref"][1]) < 1e-12, impl


def test_kernels_leave_torch_threads_alone_and_run_off_the_main_thread(monkeypatch):
    import threading

    monkeypatch.setattr(scan_compiled, "_PARALLEL_MIN_WORK", 0)
    args = _inputs(2, 40, 4, 3, torch.float32, seed=8)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        out = selective_scan_compiled(*args, delta_softplus=True)
        out.sum().backward()
        assert torch.get_num_threads() == 2  # numba's pool is its own (workqueue), not torch's OpenMP
        results = []
        worker = threading.Thread(target=lambda: results.append(selective_scan_compiled(*args, delta_softplus=True)))
        worker.start()
        worker.join()
        assert torch.equal(results[0], out)  # serial kernels off the main thread: same numbers
    finally:
        torch.set_num_threads(before)
