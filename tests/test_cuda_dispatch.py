"""The CUDA kernel path of the Mamba mixer, driven on CPU tensors through stand-in kernel modules
(tests/helpers/fake_kernels.py: the real signatures and checks, dnadiff's pure path inside).

conv_impl / scan_impl "cuda" force the kernels: Mamba, Caduceus PH and PS and the cached AR step
must equal the pure path (outputs and every gradient), hand the kernels the layouts they take
without hidden copies, and "auto" must fall back only in the documented cases, saying so once."""

from __future__ import annotations

import logging

import pytest
import torch

from dnadiff.backbones import build_backbone, kernels
from dnadiff.backbones.mamba import Mamba, MambaConfig
from dnadiff.errors import DnadiffError
from helpers.fake_kernels import KernelLog, _package, install, stand_in_modules

CUDA = dict(conv_impl="cuda", scan_impl="cuda")
PURE = dict(conv_impl="torch", scan_impl="chunked")


def _twins(make):
    """The same weights built twice: once forced onto the kernels, once on the pure path."""
    torch.manual_seed(0)
    fast = make(CUDA)
    pure = make(PURE)
    pure.load_state_dict(fast.state_dict())
    return fast, pure


def _mixer_twins(d_model, d_conv=4):
    fast, pure = _twins(lambda kw: Mamba(d_model, d_conv=d_conv, **kw))
    with torch.no_grad():  # D, dt bias and conv bias away from their tidy inits: every term shows
        for p in fast.parameters():
            p.add_(0.05 * torch.randn_like(p))
    pure.load_state_dict(fast.state_dict())
    return fast, pure


def _grads(module, out, gy, extra=()):
    params = [p for p in module.parameters() if p.requires_grad]
    return torch.autograd.grad(out, [*extra, *params], gy)


def _close(a, b, tol=2e-5):
    """Relative to the reference's scale: fp32 GEMMs in another order round differently."""
    assert a.shape == b.shape and a.dtype == b.dtype
    err = float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-12))
    assert err < tol, err


def test_mixer_at_paper_width_equals_pure_path_without_hidden_copies(fake_kernels):
    """dna-467k's mixer width (d_model 118, E = 236 channels, not a multiple of 8): causal_conv1d_fn
    gets a channel-first x, selective_scan_fn gets every operand with unit stride along L, and the
    forward makes no copy the kernels' wrappers would have to; output and all gradients equal."""
    fast, pure = _mixer_twins(118)
    hidden = torch.randn(2, 37, 118, requires_grad=True)
    y_fast, y_pure = fast(hidden), pure(hidden)
    assert fake_kernels.names() == ["causal_conv1d_fn", "selective_scan_fn"]
    assert fake_kernels.copies == []
    conv = fake_kernels.calls[0][1]
    assert conv["x"][0] == (2, 236, 37) and conv["x"][1][2] == 1  # channel-first, 236 channels
    scan = fake_kernels.calls[1][1]
    assert {k: v[1][-1] for k, v in scan.items() if len(v[0]) == 3} == {"u": 1, "delta": 1, "B": 1, "C": 1, "z": 1}
    assert all(v[2] == torch.float32 for v in scan.values())
    _close(y_fast, y_pure)
    gy = torch.randn_like(y_pure)
    for a, b in zip(_grads(fast, y_fast, gy, [hidden]), _grads(pure, y_pure, gy, [hidden])):
        _close(a, b, 5e-5)
    # backward: autograd hands out_proj's input gradient back in y's (E, B·L) layout and the GEMMs' in
    # x's, so neither kernel's backward needs to copy its output gradient either
    assert fake_kernels.copies == []


def test_the_channel_last_view_fails_at_236_channels(fake_kernels):
    """Why the mixer must stay channel-first: causal_conv1d's kernel takes a channel-last x only when
    the channel count is a multiple of 8 (the old code's transposed view of (B, L, E))."""
    import causal_conv1d

    w = torch.randn(236, 4)
    x_last = torch.randn(2, 37, 236).transpose(1, 2)  # (B, E, L) view, stride(1) == 1
    with pytest.raises(RuntimeError, match="divisible by 8"):
        causal_conv1d.causal_conv1d_fn(x_last, w, None, activation="silu")
    x_first = x_last.contiguous()
    out = causal_conv1d.causal_conv1d_fn(x_first, w, None, activation="silu")
    x_last8 = torch.randn(2, 37, 240).transpose(1, 2)  # 240 channels: channel-last is taken
    assert causal_conv1d.causal_conv1d_fn(x_last8, torch.randn(240, 4), activation="silu").stride() == x_last8.stride()
    ref = torch.nn.functional.conv1d(x_first, w.unsqueeze(1), padding=3, groups=236)[..., :37]
    torch.testing.assert_close(out, torch.nn.functional.silu(ref))


@pytest.mark.parametrize("name,preset", [("caduceus", "tiny"), ("caduceus", "tiny-ph"), ("mamba", "tiny")])
def test_caduceus_ps_ph_and_mamba_lm_equal_pure_path(fake_kernels, name, preset):
    fast, pure = _twins(lambda kw: build_backbone(name, preset, vocab_size=12, **kw))
    ids = torch.randint(7, 11, (3, 29), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(3, 29, dtype=torch.long)
    mask[1, 20:] = 0  # a right-padded row: per-row reversal for the reverse scans
    ids[1, 20:] = 0
    out_fast, out_pure = fast(ids, attention_mask=mask), pure(ids, attention_mask=mask)
    # per layer: Caduceus runs a forward and a reverse Mamba, each once per strand half for PS
    per_layer = {"tiny": 4, "tiny-ph": 2}[preset] if name == "caduceus" else 1
    assert fake_kernels.names() == ["causal_conv1d_fn", "selective_scan_fn"] * (2 * per_layer)
    assert fake_kernels.copies == []
    _close(out_fast, out_pure)
    gy = torch.randn_like(out_pure)
    for a, b in zip(_grads(fast, out_fast, gy), _grads(pure, out_pure, gy)):
        _close(a, b, 1e-4)


def test_mamba_lm_cached_decoding_equals_pure_path(fake_kernels):
    """AR decoding: allocate_cache + step through causal_conv1d_update and selective_state_update gives
    the pure step's logits and states, and the full forward's logits."""
    fast, pure = _twins(lambda kw: build_backbone("mamba", "tiny", vocab_size=12, **kw))
    fast.eval(), pure.eval()
    x = torch.randint(7, 11, (3, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        cf, cp = fast.allocate_cache(3, 24), pure.allocate_cache(3, 24)
        steps_fast = torch.stack([fast.step(x[:, i], cf) for i in range(24)], dim=1)
        steps_pure = torch.stack([pure.step(x[:, i], cp) for i in range(24)], dim=1)
        full = pure(x)
    assert fake_kernels.names() == ["causal_conv1d_update", "selective_state_update"] * (2 * 24)
    _close(steps_fast, steps_pure, 1e-6)
    for (conv_f, ssm_f), (conv_p, ssm_p) in zip(cf["layers"], cp["layers"]):
        _close(conv_f, conv_p, 1e-6)
        _close(ssm_f, ssm_p, 1e-6)
    torch.testing.assert_close(steps_fast, full, atol=2e-5, rtol=1e-4)


def test_autoregressive_sampler_with_kernels_gives_the_pure_tokens(fake_kernels):
    from dnadiff.diffusion import build_schedule
    from dnadiff.model import Denoiser
    from dnadiff.samplers import build_sampler

    fast, pure = _twins(lambda kw: build_backbone("mamba", "tiny", vocab_size=12, **kw))
    tokens = []
    for m in (fast, pure):
        s = build_sampler("autoregressive", first_token_ids=[7, 8, 9, 10], use_cache=True)
        tokens.append(s.generate(Denoiser(m.eval()), build_schedule("loglinear"), 3, (2, 20), generator=4))
    assert "selective_state_update" in fake_kernels.names()
    assert torch.equal(tokens[0], tokens[1])


def test_bf16_autocast_gives_the_kernels_one_input_dtype(fake_kernels):
    """Under bf16 autocast (bf16-mixed training) x, Δ, B, C and z reach selective_scan_fn in bf16 (the
    kernel's check), D and the Δ bias in fp32; the result tracks the fp32 pure path; backward runs."""
    fast, pure = _mixer_twins(24)
    hidden = torch.randn(2, 16, 24)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = fast(hidden)
    scan = dict(fake_kernels.calls)["selective_scan_fn"]
    assert {k: v[2] for k, v in scan.items()} == {"u": torch.bfloat16, "delta": torch.bfloat16, "B": torch.bfloat16,
                                                  "C": torch.bfloat16, "z": torch.bfloat16, "A": torch.float32,
                                                  "D": torch.float32, "delta_bias": torch.float32}
    ref = pure(hidden)
    assert float((y.float() - ref).norm() / ref.norm()) < 3e-2
    y.float().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in fast.parameters())


def test_length_major_entry_of_selective_scan(fake_kernels):
    """scan.selective_scan(impl="cuda") on (B, L, E) inputs: the kernel gets (B, E, L) copies, same result."""
    from dnadiff.backbones.scan import selective_scan, selective_scan_chunked

    g = torch.Generator().manual_seed(0)
    u, dl, z = (torch.randn(2, 19, 6, generator=g) for _ in range(3))
    a, b, c = (-torch.rand(6, 4, generator=g) - 0.5, torch.randn(2, 19, 4, generator=g),
               torch.randn(2, 19, 4, generator=g))
    d, bias = torch.randn(6, generator=g), torch.randn(6, generator=g)
    out = selective_scan(u, dl, a, b, c, d, z, bias, True, impl="cuda")
    assert fake_kernels.names() == ["selective_scan_fn"] and out.shape == (2, 19, 6)
    torch.testing.assert_close(out, selective_scan_chunked(u, dl, a, b, c, d, z, bias, True))


def test_stand_in_scan_with_groups_and_last_state(fake_kernels):
    """The stand-in also takes B, C as (B, G, N, L) and returns the last state, like the kernel."""
    import mamba_ssm.ops.selective_scan_interface as iface

    from dnadiff.backbones.scan import selective_scan_ref

    g = torch.Generator().manual_seed(3)
    u, dl = torch.randn(1, 4, 9, generator=g), torch.rand(1, 4, 9, generator=g)
    a, bm, cm = (-torch.rand(4, 3, generator=g), torch.randn(1, 2, 3, 9, generator=g),
                 torch.randn(1, 2, 3, 9, generator=g))
    out, last = iface.selective_scan_fn(u, dl, a, bm, cm, return_last_state=True)
    for i in range(2):  # channels 2i, 2i+1 read group i
        sl = slice(2 * i, 2 * i + 2)
        ref, h = selective_scan_ref(u[:, sl].mT, dl[:, sl].mT, a[sl], bm[:, i].mT, cm[:, i].mT, return_last_state=True)
        torch.testing.assert_close(out[:, sl], ref.mT)
        torch.testing.assert_close(last[:, sl], h)


# ---- when "auto" uses the kernels, and when it does not ---------------------------------------------

@pytest.fixture
def on_cuda(monkeypatch):
    """Make "auto" treat CPU tensors as CUDA ones (the only thing a CPU cannot show)."""
    monkeypatch.setattr(kernels, "is_cuda", lambda t: True)


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "dnadiff" and r.levelno == logging.WARNING]


def test_auto_uses_the_kernels_on_cuda(fake_kernels, on_cuda, caplog):
    fast, pure = _mixer_twins(16)
    fast.conv_impl = fast.scan_impl = "auto"
    h = torch.randn(1, 8, 16)
    _close(fast(h), pure(h))
    assert fake_kernels.names() == ["causal_conv1d_fn", "selective_scan_fn"] and _warnings(caplog) == []


def test_auto_without_the_packages_is_the_pure_path_silently(monkeypatch, on_cuda, caplog):
    install(monkeypatch, {}, absent=("mamba_ssm", "causal_conv1d"))
    torch.manual_seed(0)
    auto, pure = Mamba(16), Mamba(16, **PURE)
    pure.load_state_dict(auto.state_dict())
    h = torch.randn(2, 11, 16)
    assert torch.equal(auto(h), pure(h)) and _warnings(caplog) == []
    with pytest.raises(DnadiffError, match="conv_impl=cuda needs causal_conv1d"):
        Mamba(16, conv_impl="cuda")(h)
    with pytest.raises(DnadiffError, match="scan_impl=cuda needs mamba_ssm"):
        Mamba(16, scan_impl="cuda", conv_impl="torch")(h)


def test_broken_installs_fall_back_and_say_so_once(monkeypatch, on_cuda, caplog):
    log = KernelLog()
    mods = stand_in_modules(log)
    mods["mamba_ssm.ops.selective_scan_interface"].selective_scan_cuda = None  # extension missing (mamba_ssm 2.3)
    mods["causal_conv1d"] = _package("causal_conv1d")  # imports, but without its functions (ImportError)
    install(monkeypatch, mods)
    torch.manual_seed(0)
    auto, pure = Mamba(16), Mamba(16, **PURE)
    pure.load_state_dict(auto.state_dict())
    h = torch.randn(2, 11, 16)
    for _ in range(3):
        assert torch.equal(auto(h), pure(h))
    said = _warnings(caplog)
    assert len(said) == 2 and log.calls == []
    assert "causal_conv1d is installed but unusable" in said[0] and "AttributeError" in said[0]
    assert "without its selective_scan_cuda extension" in said[1]
    assert "selective_scan_cuda" in kernels.import_problem("selective_scan_fn")
    with pytest.raises(DnadiffError, match="selective_scan_cuda"):
        Mamba(16, scan_impl="cuda", conv_impl="torch")(h)


def test_inputs_the_kernels_do_not_take(fake_kernels, on_cuda, caplog):
    """auto: d_conv = 5 runs the PyTorch conv (the scan kernel still runs), float64 runs both pure ops;
    one warning each, however many calls. cuda: the same inputs are errors."""
    torch.manual_seed(0)
    wide, ref = Mamba(16, d_conv=5), Mamba(16, d_conv=5, **PURE)
    ref.load_state_dict(wide.state_dict())
    h = torch.randn(2, 11, 16)
    for _ in range(2):
        _close(wide(h), ref(h))
    assert fake_kernels.names() == ["selective_scan_fn"] * 2
    assert _warnings(caplog) == [("causal_conv1d_fn does not take convolution width d_conv=5 (it takes 2 to 4): "
                                  "the pure PyTorch convolution runs instead")]
    caplog.clear()
    wide64, ref64 = wide.double(), ref.double()
    _close(wide64(h.double()), ref64(h.double()), 1e-12)
    said = _warnings(caplog)
    assert len(said) == 2 and all("torch.float64 inputs" in s for s in said)
    with pytest.raises(DnadiffError, match="conv_impl=cuda: causal_conv1d_fn does not take convolution width"):
        Mamba(16, d_conv=5, conv_impl="cuda", scan_impl="chunked")(h)
    with pytest.raises(DnadiffError, match="scan_impl=cuda: selective_scan_fn does not take torch.float64"):
        Mamba(16, conv_impl="torch", scan_impl="cuda").double()(h.double())


def test_a_kernel_error_is_never_swallowed(monkeypatch, on_cuda):
    log = KernelLog()
    mods = stand_in_modules(log)

    def broken(x, weight, bias=None, activation=None):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    mods["causal_conv1d"].causal_conv1d_fn = broken
    install(monkeypatch, mods)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        Mamba(16)(torch.randn(1, 5, 16))


def test_conv_impl_is_checked_and_not_saved():
    from dnadiff.config import RUNTIME_BACKBONE_KEYS

    with pytest.raises(DnadiffError, match="conv_impl must be auto|torch|cuda"):
        MambaConfig(conv_impl="triton")
    assert "conv_impl" in RUNTIME_BACKBONE_KEYS
    m = build_backbone("caduceus", "tiny", conv_impl="torch")
    assert {layer.mixer.submodule.mamba_fwd.conv_impl for layer in m.backbone.layers} == {"torch"}


class _OwnOps:
    """Records the aten ops dnadiff itself runs (the stand-ins' insides left out)."""

    def __init__(self, log):
        from torch.utils._python_dispatch import TorchDispatchMode

        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if not log.depth:
                    outer.ops.append(func.overloadpacket.__name__)
                return func(*args, **(kwargs or {}))

        self.ops: list[str] = []
        self.mode = Mode()


COPYING = {"clone", "copy_", "cat", "_to_copy", "contiguous", "index", "gather", "flip"}  # (_unsafe_view: a view)


def test_the_kernel_path_itself_copies_nothing_forward_and_two_concatenations_backward(fake_kernels):
    """Every copy left on the kernel path of the mixer (fp32): none in the forward (x, z, Δ, B, C reach the
    kernels and y reaches out_proj as views of the GEMM outputs); in the backward, autograd's split
    backward concatenates (dx, dz) into d(xz) and (dΔ, dB, dC) into d(x_dbl): two torch.cat."""
    m = Mamba(118, **CUDA)
    hidden = torch.randn(2, 37, 118, requires_grad=True)
    rec = _OwnOps(fake_kernels)
    with rec.mode:
        y = m(hidden)
    assert not COPYING & set(rec.ops), rec.ops
    rec.ops.clear()
    with rec.mode:
        y.backward(torch.randn_like(y))
    assert sorted(op for op in rec.ops if op in COPYING) == ["cat", "cat"]
    assert fake_kernels.copies == []


def test_the_cached_step_copies_nothing_in_fp32(fake_kernels):
    m = build_backbone("mamba", "tiny", vocab_size=12, **CUDA).eval()
    cache = m.allocate_cache(2, 4)
    rec = _OwnOps(fake_kernels)
    with torch.no_grad(), rec.mode:
        m.step(torch.tensor([7, 8]), cache)
    assert not COPYING & set(rec.ops), rec.ops
