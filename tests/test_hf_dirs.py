"""Hugging Face-compatible model directories: config.json + model.safetensors,
loading by Hub id from the local cache, push_to_hub, and the official MDLM (mdlm-owt) layout."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import dnadiff
from dnadiff.backbones import build_backbone
from dnadiff.checkpoint import load, load_backbone, official_kind
from dnadiff.config import RunConfig, load_config
from dnadiff.errors import DnadiffError
from dnadiff.modelio.model_dir import save_model_dir
from dnadiff.tokenizers import DNATokenizer
from helpers.legacy_layout import to_legacy_layout

X = torch.tensor([[7, 8, 9, 10, 3, 3, 7, 11], [10, 3, 9, 9, 8, 7, 3, 10]])


def _model_dir(path: Path, backbone: str = "dit") -> tuple[Path, torch.nn.Module]:
    torch.manual_seed(0)
    bb = build_backbone(backbone, preset="tiny", vocab_size=12, **({"l_max": 64} if backbone == "hyena" else {}))
    for p in bb.parameters():  # zero-initialised output layers would make every logit 0
        p.data.normal_(0, 0.2)
    cfg = load_config(RunConfig, None, [f"model.backbone={backbone}", "data.seq_len=8"])
    return save_model_dir(path, cfg, bb, DNATokenizer(), {"val_nll": 1.25}), bb.eval()


def _logits(model, x=X):
    with torch.no_grad():
        return model.backbone(x)


def test_model_dir_is_a_hf_folder_and_old_yaml_dirs_still_load(tmp_path):
    d, bb = _model_dir(tmp_path / "m")
    assert sorted(p.name for p in d.iterdir()) == ["config.json", "metrics.json", "model.safetensors"]
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["model_type"] == "dnadiff" and cfg["dnadiff_version"] == dnadiff.__version__
    assert cfg["model"]["backbone"] == "dit" and cfg["model"]["overrides"]["hidden_size"] == 64
    model = dnadiff.load(d)
    torch.testing.assert_close(_logits(model), _logits_of(bb), rtol=0, atol=0)
    assert model.metrics == {"val_nll": 1.25}
    # the config.yaml layout of older versions: same model
    to_legacy_layout(d)
    assert not (d / "config.json").exists()
    old = dnadiff.load(d)
    assert old.config == model.config
    torch.testing.assert_close(_logits(old), _logits_of(bb), rtol=0, atol=0)


def test_only_a_config_yaml_beside_weights_is_an_old_model_dir(tmp_path):
    # the migration of the config.yaml layout (model_dir.legacy_config_file) takes nothing else for one
    from dnadiff.modelio.model_dir import is_model_dir, legacy_config_file

    d, _ = _model_dir(tmp_path / "m")
    assert legacy_config_file(d) is None  # config.json
    to_legacy_layout(d)
    assert legacy_config_file(d) == d / "config.yaml" and is_model_dir(d)
    # a training run directory: the run's config.yaml, the weights in model/
    run = tmp_path / "run"
    shutil.copytree(d, run / "model")
    shutil.move(run / "model" / "config.yaml", run / "config.yaml")
    assert legacy_config_file(run) is None and not is_model_dir(run)
    with pytest.raises(DnadiffError, match="missing config.json"):
        dnadiff.load(run)
    (d / "config.yaml").write_text("")  # emptied: an error naming the file, not the default config
    with pytest.raises(DnadiffError, match=r"config.yaml: empty config \(no keys\)"):
        dnadiff.load(d)


def _logits_of(bb):
    with torch.no_grad():
        return bb(X)


@pytest.mark.parametrize("backbone", ["caduceus", "hyena"])
def test_dnadiff_config_json_is_not_taken_for_an_official_one(tmp_path, backbone):
    """A dnadiff directory of a Caduceus/HyenaDNA backbone keeps its own objective (not the official
    loaders' mlm/ar), and init_from (load_backbone) reads it as a dnadiff directory."""
    d, bb = _model_dir(tmp_path / backbone, backbone)
    assert official_kind(d) is None
    model = load(d)
    assert model.config.objective.name == "mdlm" and model.config.model.backbone == backbone
    torch.testing.assert_close(_logits(model), _logits_of(bb), rtol=0, atol=0)
    name, loaded = load_backbone(d)
    assert name == backbone
    with torch.no_grad():
        torch.testing.assert_close(loaded(X), bb(X), rtol=0, atol=0)


# ----------------------------------------------------------------------------- Hub id, local cache


def _fake_hf_cache(cache: Path, repo_id: str, model_dir: Path, commit: str = "0123456789abcdef" * 2 + "01234567"):
    """The layout huggingface_hub writes: models--org--name/{refs/main, snapshots/<commit>/...}."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(model_dir, repo / "snapshots" / commit)
    return repo / "snapshots" / commit


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants as hc

    cache = tmp_path / "hf_home" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the tests never reach the network
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))  # read at import time by huggingface_hub
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    return cache


def test_load_by_hub_id_from_the_local_cache(tmp_path, hf_cache, monkeypatch):
    d, bb = _model_dir(tmp_path / "m")
    snap = _fake_hf_cache(hf_cache, "someone/tiny-dna-dit", d)
    monkeypatch.chdir(tmp_path)  # "someone/tiny-dna-dit" is not a local path here
    model = dnadiff.load("someone/tiny-dna-dit")
    assert Path(model.path) == snap
    torch.testing.assert_close(_logits(model), _logits_of(bb), rtol=0, atol=0)
    name, _ = load_backbone("someone/tiny-dna-dit")  # init_from accepts a Hub id too
    assert name == "dit"
    with pytest.raises(DnadiffError, match="not in the Hugging Face cache"):
        dnadiff.load("someone/not-downloaded")
    # `dnadiff train model.init_from=org/name`: checked against the cache before training starts
    from dnadiff.commands.checks import check_train_inputs

    check_train_inputs(load_config(RunConfig, None, ["data.kind=text", "model.init_from=someone/tiny-dna-dit"]))
    with pytest.raises(DnadiffError, match="model.init_from: someone/not-downloaded: no such local directory"):
        check_train_inputs(load_config(RunConfig, None, ["data.kind=text", "model.init_from=someone/not-downloaded"]))


def test_cli_samples_from_a_hub_id(tmp_path, hf_cache, monkeypatch):
    from dnadiff.cli import main

    d, _ = _model_dir(tmp_path / "m")
    _fake_hf_cache(hf_cache, "someone/tiny-dna-dit", d)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "s.fa"
    assert main(["sample", "someone/tiny-dna-dit", "--num", "2", "--length", "8", "--steps", "2",
                 "--out", str(out)]) == 0
    assert out.read_text().count(">") == 2


# ----------------------------------------------------------------------------- push_to_hub


class FakeApi:
    """Records the Hub calls; checks the folder while it exists (it is a temporary staging copy)."""

    def __init__(self):
        self.calls = []

    def create_repo(self, repo_id, **kw):
        self.calls.append(("create_repo", repo_id, kw))

    def upload_folder(self, **kw):
        folder = Path(kw["folder_path"])
        self.files = sorted(p.name for p in folder.iterdir())
        self.card = (folder / "README.md").read_text()
        self.logits = _logits(dnadiff.load(folder))
        self.calls.append(("upload_folder", kw["repo_id"], {k: v for k, v in kw.items() if k != "folder_path"}))
        return "commit-info"


def test_push_to_hub_uploads_the_model_folder(tmp_path, monkeypatch):
    d, bb = _model_dir(tmp_path / "m")
    made = []

    class HfApi(FakeApi):
        def __init__(self, token=None):
            super().__init__()
            made.append((token, self))

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", HfApi)
    model = dnadiff.load(d)
    assert model.push_to_hub("someone/tiny", private=True, token="tok", commit_message="first") == "commit-info"
    (token, api), = made
    assert token == "tok"
    assert api.calls[0] == ("create_repo", "someone/tiny", {"private": True, "exist_ok": True, "repo_type": "model"})
    assert api.calls[1] == ("upload_folder", "someone/tiny",
                            {"repo_id": "someone/tiny", "repo_type": "model", "revision": None,
                             "commit_message": "first"})
    assert api.files == ["README.md", "config.json", "metrics.json", "model.safetensors"]
    assert "library_name: dnadiff" in api.card and 'dnadiff.load("someone/tiny")' in api.card
    assert "| val_nll | 1.25 |" in api.card
    torch.testing.assert_close(api.logits, _logits_of(bb), rtol=0, atol=0)
    # a directory in the old config.yaml layout is uploaded as a config.json folder
    from dnadiff.modelio.push import push_to_hub

    to_legacy_layout(d)
    api2 = FakeApi()
    push_to_hub(str(d), "someone/tiny", api=api2)
    assert api2.files == ["README.md", "config.json", "metrics.json", "model.safetensors"]
    torch.testing.assert_close(api2.logits, _logits_of(bb), rtol=0, atol=0)
    with pytest.raises(DnadiffError, match="not a Hub repository id"):
        push_to_hub(str(d), "no-slash", api=FakeApi())


# ----------------------------------------------------------------------------- official MDLM layout

MDLM_CFG = {"architectures": ["MDLM"], "auto_map": {"AutoConfig": "configuration_mdlm.MDLMConfig",
                                                    "AutoModelForMaskedLM": "modeling_mdlm.MDLM"},
            "model_type": "mdlm", "vocab_size": 0, "model_length": 16, "hidden_dim": 32, "cond_dim": 16,
            "n_blocks": 2, "n_heads": 4, "dropout": 0.1, "time_conditioning": False,
            "return_dict": False, "torch_dtype": "float32", "transformers_version": "4.38.2"}


def _tiny_tokenizer(path: Path) -> int:
    """A word-level GPT-2-like tokenizer (no mask, no pad): len(vocab) ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<|endoftext|>", "the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                            unk_token="<|endoftext|>").save_pretrained(str(path))
    return len(words)


def _mdlm_dir(path: Path, time_conditioning: bool = False) -> tuple[dict, dict]:
    """A tiny checkpoint in the layout of kuleshov-group/mdlm-owt: the HF `MDLM` wrapper's state
    (`backbone.` + the reference DiT's names) and its config.json, with random weights."""
    path.mkdir()
    V = _tiny_tokenizer(path) + 1  # + [MASK], the last id (as GPT-2 + mask = 50258)
    cfg = {**MDLM_CFG, "vocab_size": V, "time_conditioning": time_conditioning}
    H, C, nh = cfg["hidden_dim"], cfg["cond_dim"], cfg["n_heads"]
    hd = H // nh
    g = torch.Generator().manual_seed(1)
    shapes = {"vocab_embed.embedding": (V, H), "sigma_map.mlp.0.weight": (C, 256), "sigma_map.mlp.0.bias": (C,),
              "sigma_map.mlp.2.weight": (C, C), "sigma_map.mlp.2.bias": (C,),
              "output_layer.norm_final.weight": (H,), "output_layer.linear.weight": (V, H),
              "output_layer.linear.bias": (V,), "output_layer.adaLN_modulation.weight": (2 * H, C),
              "output_layer.adaLN_modulation.bias": (2 * H,)}
    for i in range(cfg["n_blocks"]):
        shapes.update({f"blocks.{i}.norm1.weight": (H,), f"blocks.{i}.attn_qkv.weight": (3 * H, H),
                       f"blocks.{i}.attn_out.weight": (H, H), f"blocks.{i}.norm2.weight": (H,),
                       f"blocks.{i}.mlp.0.weight": (4 * H, H), f"blocks.{i}.mlp.0.bias": (4 * H,),
                       f"blocks.{i}.mlp.2.weight": (H, 4 * H), f"blocks.{i}.mlp.2.bias": (H,),
                       f"blocks.{i}.adaLN_modulation.weight": (6 * H, C),
                       f"blocks.{i}.adaLN_modulation.bias": (6 * H,)})
    state = {"backbone." + k: torch.randn(s, generator=g) * (0.3 if len(s) > 1 else 0.5) for k, s in shapes.items()}
    for k in state:
        if k.endswith("norm1.weight") or k.endswith("norm2.weight") or k.endswith("norm_final.weight"):
            state[k] = 1 + state[k] * 0.2
    state["backbone.rotary_emb.inv_freq"] = 1.0 / (10_000 ** (torch.arange(0, hd, 2).float() / hd))
    import safetensors.torch

    safetensors.torch.save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return cfg, state


def _reference_mdlm(state: dict, cfg: dict, ids: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """The official MDLM DiT forward (models/dit.py of the reference, paper §5.1), written out from
    the raw checkpoint tensors: adaLN-zero blocks, qkv as (three h d), rotate-half rotary on q and k."""
    s = {k[len("backbone."):]: v.double() for k, v in state.items()}
    H, nh = cfg["hidden_dim"], cfg["n_heads"]
    hd = H // nh
    B, L = ids.shape
    ln = lambda x, w: F.layer_norm(x, (H,)) * w  # noqa: E731
    if not cfg["time_conditioning"]:
        sigma = torch.zeros_like(sigma)
    half = 128
    freqs = torch.exp(-math.log(10_000) * torch.arange(half, dtype=torch.float64) / half)
    t_freq = torch.cat([torch.cos(sigma.double()[:, None] * freqs), torch.sin(sigma.double()[:, None] * freqs)], -1)
    c = F.linear(F.silu(F.linear(t_freq, s["sigma_map.mlp.0.weight"], s["sigma_map.mlp.0.bias"])),
                 s["sigma_map.mlp.2.weight"], s["sigma_map.mlp.2.bias"])
    c = F.silu(c)
    ang = torch.outer(torch.arange(L, dtype=torch.float64), s["rotary_emb.inv_freq"])
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()  # (L, hd)

    def rot(x):  # x: (B, L, nh, hd)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos[None, :, None] + torch.cat([-x2, x1], -1) * sin[None, :, None]

    x = s["vocab_embed.embedding"][ids]
    for i in range(cfg["n_blocks"]):
        p = lambda n: s[f"blocks.{i}.{n}"]  # noqa: E731
        sh1, sc1, g1, sh2, sc2, g2 = F.linear(c, p("adaLN_modulation.weight"),
                                              p("adaLN_modulation.bias"))[:, None].chunk(6, -1)
        h = ln(x, p("norm1.weight")) * (1 + sc1) + sh1
        qkv = (h @ p("attn_qkv.weight").T).view(B, L, 3, nh, hd)
        q, k, v = rot(qkv[:, :, 0]), rot(qkv[:, :, 1]), qkv[:, :, 2]
        att = torch.einsum("blhd,bmhd->bhlm", q, k) / math.sqrt(hd)
        a = torch.einsum("bhlm,bmhd->blhd", att.softmax(-1), v).reshape(B, L, H)
        x = x + g1 * (a @ p("attn_out.weight").T)
        h = ln(x, p("norm2.weight")) * (1 + sc2) + sh2
        m = F.gelu(F.linear(h, p("mlp.0.weight"), p("mlp.0.bias")), approximate="tanh")
        x = x + g2 * F.linear(m, p("mlp.2.weight"), p("mlp.2.bias"))
    sh, sc = F.linear(c, s["output_layer.adaLN_modulation.weight"],
                      s["output_layer.adaLN_modulation.bias"])[:, None].chunk(2, -1)
    h = ln(x, s["output_layer.norm_final.weight"]) * (1 + sc) + sh
    return F.linear(h, s["output_layer.linear.weight"], s["output_layer.linear.bias"])


@pytest.mark.parametrize("time_conditioning", [False, True])
def test_mdlm_checkpoint_imports_into_dit(tmp_path, time_conditioning):
    from dnadiff.backbones.convert_mdlm import load_mdlm_pretrained
    from dnadiff.backbones.dit import DiT, DiTConfig

    cfg, state = _mdlm_dir(tmp_path / "mdlm-owt", time_conditioning)
    V = cfg["vocab_size"]
    assert official_kind(tmp_path / "mdlm-owt") == "mdlm"
    bb = load_mdlm_pretrained(tmp_path / "mdlm-owt")
    ids = torch.randint(0, V, (2, 12), generator=torch.Generator().manual_seed(2))
    sigma = torch.tensor([0.3, 2.0])
    with torch.no_grad():
        got = bb(ids, sigma)
    # the official forward, from the raw tensors
    torch.testing.assert_close(got.double(), _reference_mdlm(state, cfg, ids, sigma),
                               rtol=1e-4, atol=2e-4)  # float32 vs float64
    # a DiT built directly with those weights
    direct = DiT(DiTConfig(vocab_size=V, hidden_size=32, n_heads=4, n_blocks=2, adaln_dim=16,
                           time_conditioning=time_conditioning)).eval()
    direct.load_state_dict({("vocab_embed.weight" if k == "backbone.vocab_embed.embedding" else k[len("backbone."):]): v
                            for k, v in state.items() if not k.endswith("inv_freq")})
    with torch.no_grad():
        torch.testing.assert_close(got, direct(ids, sigma), rtol=0, atol=0)


def test_mdlm_dir_loads_as_a_text_model_and_saves_as_dnadiff(tmp_path):
    cfg, state = _mdlm_dir(tmp_path / "mdlm-owt", time_conditioning=True)
    V = cfg["vocab_size"]
    model = dnadiff.load(tmp_path / "mdlm-owt")
    tok = model.tokenizer
    assert (tok.mask_id, tok.pad_id, tok.vocab_size) == (V - 1, V, V + 1)  # our dedicated [PAD] comes last
    assert model.config.objective.name == "mdlm" and model.config.model.time_input == "sigma"
    assert model.config.schedule.name == "loglinear" and model.config.data.seq_len == 16
    ids = torch.tensor([tok.encode("the cat sat on a mat")])
    t = torch.tensor([0.5])
    with torch.no_grad():
        logits = model.denoiser(ids, t)  # (1, 6, V + 1)
    sigma = -torch.log1p(-(1 - 1e-3) * t)  # log-linear σ(t) (MDLM §3.5, eps 1e-3)
    ref = _reference_mdlm(state, cfg, ids, sigma)
    torch.testing.assert_close(logits[..., :V].double(), ref, rtol=1e-4, atol=2e-4)  # float32 vs float64
    assert (logits[..., V] == -1e6).all()  # the added [PAD] is never predicted
    # the imported model written as a dnadiff directory loads back to the same network
    out = model.save_pretrained(tmp_path / "converted")
    assert json.loads((out / "config.json").read_text())["model_type"] == "dnadiff"
    again = dnadiff.load(out)
    assert again.tokenizer.vocab_size == V + 1 and again.config.model.init_from is None
    with torch.no_grad():
        torch.testing.assert_close(again.denoiser(ids, t), logits, rtol=0, atol=0)
    # init_from (continued training with our text tokenizer): the backbone gets the tokenizer's vocabulary
    from dnadiff.training.run import build_backbone_for

    run_cfg = load_config(RunConfig, None, ["data.kind=text", "model.backbone=dit", "tokenizer.kind=text",
                                            f"model.init_from={tmp_path / 'mdlm-owt'}"])
    run_cfg, bb = build_backbone_for(run_cfg, tok)
    assert bb.vocab_size == V + 1 and run_cfg.model.time_input == "sigma"
    with torch.no_grad():
        torch.testing.assert_close(bb.eval()(ids, sigma), logits, rtol=1e-5, atol=1e-5)  # train() mode: dropout
    # a tokenizer whose mask id does not sit where the checkpoint has it
    (tmp_path / "mdlm-owt" / "config.json").write_text(json.dumps({**cfg, "vocab_size": V + 3}))
    with pytest.raises(DnadiffError, match="MASK"):
        from dnadiff.backbones.convert_mdlm import mdlm_tokenizer

        mdlm_tokenizer(tmp_path / "mdlm-owt", "gpt2", V + 3)


@pytest.mark.parametrize("backbone", ["caduceus", "mamba"])
def test_saved_model_does_not_depend_on_its_preset(tmp_path, backbone):
    """config.json holds every backbone field (the runtime `scan_impl` is left out): the network is
    rebuilt from them, not from the preset, whose definition may change or vanish."""
    d, bb = _model_dir(tmp_path / "m", backbone)
    cfg = json.loads((d / "config.json").read_text())
    assert "scan_impl" not in cfg["model"]["overrides"]
    cfg["model"]["preset"] = "a-preset-that-no-longer-exists"
    (d / "config.json").write_text(json.dumps(cfg))
    torch.testing.assert_close(_logits(dnadiff.load(d)), _logits_of(bb), rtol=0, atol=0)


def test_load_model_dir_takes_a_hub_id_like_load(tmp_path, hf_cache, monkeypatch):
    from dnadiff.checkpoint import load_model_dir

    d, bb = _model_dir(tmp_path / "m")
    snap = _fake_hf_cache(hf_cache, "someone/tiny-dna-dit", d)
    monkeypatch.chdir(tmp_path)
    model = load_model_dir("someone/tiny-dna-dit")
    assert Path(model.path) == snap
    torch.testing.assert_close(_logits(model), _logits_of(bb), rtol=0, atol=0)


def test_each_official_format_is_detected_and_read_through_its_registered_class(tmp_path):
    """backbones/formats.py: detect picks exactly one format per folder; read gives the backbone config and
    the stored tensors; load equals the converter's own loader."""
    from dnadiff.backbones.convert_mdlm import load_mdlm_pretrained
    from dnadiff.backbones.formats import CHECKPOINT_FORMATS, detect_format

    assert CHECKPOINT_FORMATS.names() == ["caduceus", "hyena", "mdlm"]
    cfg, state = _mdlm_dir(tmp_path / "mdlm-owt")
    fmt = CHECKPOINT_FORMATS.get("mdlm")
    assert detect_format(tmp_path / "mdlm-owt") == "mdlm"
    detected = [n for n in CHECKPOINT_FORMATS.names() if CHECKPOINT_FORMATS.get(n).detect(tmp_path / "mdlm-owt")]
    assert detected == ["mdlm"]
    config, tensors = fmt.read(tmp_path / "mdlm-owt")
    assert config.vocab_size == cfg["vocab_size"] and config.hidden_size == cfg["hidden_dim"]
    assert set(tensors) == set(state) and all(torch.equal(tensors[k], state[k]) for k in state)
    assert (fmt.backbone, fmt.objective, fmt.text_model) == ("dit", "mdlm", True)
    a, b = fmt.load(tmp_path / "mdlm-owt"), load_mdlm_pretrained(tmp_path / "mdlm-owt")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "config.json").write_text("{}")
    assert detect_format(tmp_path / "plain") is None
