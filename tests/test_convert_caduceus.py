"""Official HF-format Caduceus directories load into the dnadiff backbone: every key maps, tied keys
are re-tied, and the result equals an independent transcription of the official forward pass
(fused RCPS half swap included) built from transformers' MambaMixer."""

import json
import logging
import re

import pytest
import torch
from safetensors.torch import save_file
from transformers import MambaConfig as HFMambaConfig  # noqa: E402  (a core dependency: imported, never skipped)
from transformers.models.mamba.modeling_mamba import MambaMixer  # noqa: E402

from dnadiff.backbones import build_backbone
from dnadiff.backbones.convert_caduceus import is_caduceus_dir, load_caduceus_pretrained
from dnadiff.errors import DnadiffError

logging.getLogger("transformers").setLevel(logging.ERROR)
CMAP16 = [0, 1, 2, 3, 4, 5, 6, 10, 9, 8, 7, 11, 12, 13, 14, 15]


def _official_config(d_model, n_layer, rcps, fused):
    return {
        "architectures": ["CaduceusForMaskedLM"], "model_type": "caduceus", "d_model": d_model, "n_layer": n_layer,
        "vocab_size": 16, "pad_vocab_size_multiple": 8, "rcps": rcps, "fused_add_norm": fused,
        "bidirectional": True, "bidirectional_strategy": "add", "bidirectional_weight_tie": True,
        "residual_in_fp32": False, "rms_norm": True, "norm_epsilon": 1e-5,
        "complement_map": {str(i): c for i, c in enumerate(CMAP16)},
        "initializer_cfg": {"initializer_range": 0.02, "n_residuals_per_layer": 1, "rescale_prenorm_residual": True},
        "ssm_cfg": {"d_state": 16, "d_conv": 4, "expand": 2, "dt_rank": "auto", "dt_min": 0.001, "dt_max": 0.1,
                    "dt_init": "random", "dt_scale": 1.0, "dt_init_floor": 1e-4, "conv_bias": True, "bias": False,
                    "use_fast_path": True},
    }


def _official_state(model, rcps, fused, keep_lm_head=False):
    """dnadiff weights under the official names, tied copies dropped as the official save does."""
    sd = {}
    for k, v in model.state_dict().items():
        if re.search(r"mamba_rev\.(in|out)_proj", k):
            continue
        if k in ("lm_head.weight", "lm_head.lm_head.weight") and not keep_lm_head:
            continue
        if rcps and not fused:
            k = re.sub(r"(layers\.\d+\.norm|norm_f)\.weight$", r"\1.submodule.weight", k)
        sd["caduceus." + k] = v.detach().clone().contiguous()
    return sd


def _write_dir(path, model, rcps, fused, fmt="safetensors", keep_lm_head=False):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(_official_config(model.config.d_model, model.config.n_layer,
                                                                  rcps, fused)))
    sd = _official_state(model, rcps, fused, keep_lm_head)
    if fmt == "safetensors":
        save_file(sd, str(path / "model.safetensors"))
    else:
        torch.save(sd, path / "pytorch_model.bin")
    return sd


def _official_forward(sd, cfg, ids):
    """Independent transcription of the official CaduceusForMaskedLM forward (modeling_caduceus.py /
    modeling_rcps.py, fused and non-fused add-norm), on the raw official keys."""
    d, rcps, fused = cfg["d_model"], cfg["rcps"], cfg["fused_add_norm"]
    comp = torch.tensor(list(cfg["complement_map"].values()))
    hf_cfg = HFMambaConfig(hidden_size=d, state_size=16, expand=2, conv_kernel=4, use_conv_bias=True,
                           use_bias=False, time_step_rank="auto", use_mambapy=False)

    def rc(x):
        return torch.flip(x, dims=[-2, -1])

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    def bimamba(prefix):
        mods = []
        for direction in ("fwd", "rev"):
            m = MambaMixer(hf_cfg, layer_idx=0)
            state = {}
            for name in m.state_dict():
                key = f"{prefix}.mamba_{direction}.{name}"
                state[name] = sd[key] if key in sd else sd[f"{prefix}.mamba_fwd.{name}"]  # tied in/out proj
            m.load_state_dict(state)
            mods.append(m)
        return lambda h: mods[0](h) + mods[1](h.flip(1)).flip(1)

    b = "caduceus.backbone."
    if rcps:
        e = sd[b + "embeddings.word_embeddings.embedding.weight"]
        h = torch.cat([e[ids], rc(e[comp[ids.flip(-1)]])], dim=-1)
    else:
        e = sd[b + "embeddings.word_embeddings.weight"]
        h = e[ids]
    res = None
    for i in range(cfg["n_layer"]):
        pre = f"{b}layers.{i}"
        if not rcps:
            res = h if res is None else h + res
            h = bimamba(pre + ".mixer")(rms(res, sd[pre + ".norm.weight"]))
            continue
        w = sd.get(pre + ".norm.weight", sd.get(pre + ".norm.submodule.weight"))
        if fused:  # RCPSMambaBlock fused branch: "fwd" reads the SECOND half, "rc" the first
            r_f = h[..., d:] if res is None else h[..., d:] + res[..., d:]
            r_rc = rc(h[..., :d]) if res is None else rc(h[..., :d]) + rc(res[..., :d])
        else:  # RCPSAddNormWrapper
            r_f = h[..., :d] if res is None else h[..., :d] + res[..., :d]
            r_rc = rc(h[..., d:]) if res is None else rc(h[..., d:]) + rc(res[..., d:])
        res = torch.cat([r_f, rc(r_rc)], dim=-1)
        h = torch.cat([rms(r_f, w), rc(rms(r_rc, w))], dim=-1)
        mix = bimamba(pre + ".mixer.submodule")
        h = torch.cat([mix(h[..., :d]), rc(mix(rc(h[..., d:])))], dim=-1)  # RCPSWrapper
    if rcps:  # final norm: never swapped
        w = sd.get(b + "norm_f.weight", sd.get(b + "norm_f.submodule.weight"))
        out = torch.cat([rms(h[..., :d] + res[..., :d], w), rc(rms(rc(h[..., d:]) + rc(res[..., d:]), w))], -1)
        head = sd.get("caduceus.lm_head.lm_head.weight", sd.get("lm_head.lm_head.weight", e))
        return out[..., :d] @ head.T + torch.flip(out[..., d:], dims=[-1]) @ head[comp].T
    out = rms(h + res, sd[b + "norm_f.weight"])
    return out @ sd.get("lm_head.weight", e).T


@pytest.mark.parametrize("rcps,fused,fmt", [(True, True, "safetensors"), (True, False, "bin"),
                                            (False, True, "safetensors")])
def test_load_official_directory_matches_official_forward(tmp_path, rcps, fused, fmt):
    torch.manual_seed(0)
    src = build_backbone("caduceus", "tiny", rcps=rcps, fused_add_norm=fused).eval()
    with torch.no_grad():  # non-trivial weights everywhere (norm weights start at 1)
        for p in src.parameters():
            p.add_(0.05 * torch.randn_like(p))
    sd = _write_dir(tmp_path / "m", src, rcps, fused, fmt)
    assert is_caduceus_dir(tmp_path / "m")
    model = load_caduceus_pretrained(tmp_path / "m")
    assert model.config.rcps == rcps and model.config.fused_add_norm == fused and model.vocab_size == 12
    ids = torch.randint(0, 12, (2, 23))
    with torch.no_grad():
        ours = model(ids)
        ref = _official_forward(sd, _official_config(32, 2, rcps, fused), ids)[..., :12]
        assert torch.allclose(ours, src(ids), atol=1e-6)
    err = (ours - ref).abs().max().item()
    assert err < 1e-4, err
    # re-tied: the reverse direction shares the forward projections, the head shares the embedding
    layer = model.backbone.layers[0].mixer
    bi = layer.submodule if rcps else layer
    assert bi.mamba_rev.in_proj.weight is bi.mamba_fwd.in_proj.weight
    if fused and rcps:  # with the swap ignored, the same weights give other logits
        plain = load_caduceus_pretrained(tmp_path / "m", fused_add_norm=False)
        with torch.no_grad():
            assert (plain(ids) - ref).abs().max() > 1e-3


def test_lm_head_key_present_and_checked(tmp_path):
    src = build_backbone("caduceus", "tiny-ph")
    sd = _write_dir(tmp_path / "a", src, False, True, keep_lm_head=True)
    assert "caduceus.lm_head.weight" in sd
    load_caduceus_pretrained(tmp_path / "a")
    sd["caduceus.lm_head.weight"] = sd["caduceus.lm_head.weight"] + 1.0
    save_file(sd, str(tmp_path / "a" / "model.safetensors"))
    with pytest.raises(DnadiffError, match="differs"):
        load_caduceus_pretrained(tmp_path / "a")


def test_mismatched_checkpoints_are_rejected(tmp_path):
    src = build_backbone("caduceus", "tiny")
    sd = _write_dir(tmp_path / "m", src, True, True)
    extra = dict(sd, **{"caduceus.backbone.layers.0.mixer.submodule.extra": torch.zeros(1)})
    save_file(extra, str(tmp_path / "m" / "model.safetensors"))
    with pytest.raises(DnadiffError, match="unexpected"):
        load_caduceus_pretrained(tmp_path / "m")
    missing = {k: v for k, v in sd.items() if "layers.1.mixer.submodule.mamba_rev.A_log" not in k}
    save_file(missing, str(tmp_path / "m" / "model.safetensors"))
    with pytest.raises(DnadiffError, match="missing"):
        load_caduceus_pretrained(tmp_path / "m")
    (tmp_path / "empty").mkdir()
    assert not is_caduceus_dir(tmp_path / "empty")
    with pytest.raises(DnadiffError):
        load_caduceus_pretrained(tmp_path / "empty")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    assert not is_caduceus_dir(tmp_path / "other")


@pytest.mark.parametrize("rcps", [True, False])
def test_complement_map_keys_in_string_order(tmp_path, rcps):
    # A config.json re-saved by `save_pretrained` (json sort_keys) lists the
    # complement_map keys "0", "1", "10", "11", ..., "2": the map must be read by integer key.
    torch.manual_seed(1)
    src = build_backbone("caduceus", "tiny" if rcps else "tiny-ph").eval()
    with torch.no_grad():
        for p in src.parameters():
            p.add_(0.05 * torch.randn_like(p))
    _write_dir(tmp_path / "natural", src, rcps, True)
    _write_dir(tmp_path / "sorted", src, rcps, True)
    cfg_file = tmp_path / "sorted" / "config.json"
    cfg_file.write_text(json.dumps(json.loads(cfg_file.read_text()), sort_keys=True))
    assert list(json.loads(cfg_file.read_text())["complement_map"])[:4] == ["0", "1", "10", "11"]
    ids = torch.randint(0, 12, (2, 19))
    models = [load_caduceus_pretrained(tmp_path / d) for d in ("natural", "sorted")]
    for m in models:
        assert m.vocab_size == 12 and m.config.complement_map[:12] == CMAP16[:12]
    with torch.no_grad():
        torch.testing.assert_close(models[1](ids), models[0](ids), rtol=0, atol=0)
        torch.testing.assert_close(models[1](ids), src(ids), rtol=0, atol=1e-6)
    # keys that are not the ids 0..n-1 are refused with the file named
    bad = json.loads(cfg_file.read_text())
    bad["complement_map"] = {"a": 0, "1": 1}
    cfg_file.write_text(json.dumps(bad))
    with pytest.raises(DnadiffError, match="complement_map"):
        load_caduceus_pretrained(tmp_path / "sorted")


def test_caduceus_format_reads_config_and_state(tmp_path):
    from dnadiff.backbones.formats import CHECKPOINT_FORMATS, detect_format

    src = build_backbone("caduceus", "tiny", rcps=True, fused_add_norm=True).eval()
    sd = _write_dir(tmp_path / "m", src, True, True)
    assert detect_format(tmp_path / "m") == "caduceus"
    config, tensors = CHECKPOINT_FORMATS.get("caduceus").read(tmp_path / "m")
    assert config.rcps and config.fused_add_norm and set(tensors) == set(sd)
    assert all(torch.equal(tensors[k], sd[k]) for k in sd)
