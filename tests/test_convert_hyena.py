"""Official HyenaDNA checkpoints: small directories written with the official key names
(docs/references.md; LongSafari/hyenadna-*-hf `modeling_hyena.py`, GitHub `standalone_hyenadna.py`) load
with every key mapped and nothing left over; bad files give one-line DnadiffErrors."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from dnadiff.backbones.convert_hyena import is_hyena_dir, load_hyena_pretrained
from dnadiff.errors import DnadiffError

D, N_LAYER, D_INNER, ORDER, EMB, L_MAX, VOCAB, PADDED = 8, 2, 32, 16, 5, 20, 12, 16

HF_CONFIG = {
    "_name_or_path": "LongSafari/hyenadna-tiny-1k-seqlen-hf", "architectures": ["HyenaDNAForCausalLM"],
    "model_type": "hyenadna", "d_model": D, "n_layer": N_LAYER, "d_inner": D_INNER, "vocab_size": VOCAB,
    "max_seq_len": L_MAX, "hyena_order": 2, "filter_order": ORDER, "short_filter_order": 3, "emb_dim": EMB,
    "num_inner_mlps": 2, "activation_freq": 10, "train_freq": True, "use_bias": True, "embed_dropout": 0.1,
    "hyena_dropout": 0.0, "hyena_filter_dropout": 0.0, "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
    "pad_vocab_size_multiple": 8,
}


def official_subkeys() -> dict[str, tuple[int, ...]]:
    """Backbone sub-keys and shapes of the official model, written out from the reference."""
    keys = {"embeddings.word_embeddings.weight": (PADDED, D), "ln_f.weight": (D,), "ln_f.bias": (D,)}
    for i in range(N_LAYER):
        p = f"layers.{i}."
        keys.update({
            p + "mixer.in_proj.weight": (3 * D, D), p + "mixer.in_proj.bias": (3 * D,),
            p + "mixer.out_proj.weight": (D, D), p + "mixer.out_proj.bias": (D,),
            p + "mixer.short_filter.weight": (3 * D, 1, 3), p + "mixer.short_filter.bias": (3 * D,),
            p + "mixer.filter_fn.bias": (D,),
            p + "mixer.filter_fn.pos_emb.z": (1, L_MAX, EMB), p + "mixer.filter_fn.pos_emb.t": (1, L_MAX, 1),
            p + "mixer.filter_fn.implicit_filter.0.weight": (ORDER, EMB),
            p + "mixer.filter_fn.implicit_filter.0.bias": (ORDER,),
            p + "mixer.filter_fn.implicit_filter.2.weight": (ORDER, ORDER),
            p + "mixer.filter_fn.implicit_filter.2.bias": (ORDER,),
            p + "mixer.filter_fn.implicit_filter.4.weight": (ORDER, ORDER),
            p + "mixer.filter_fn.implicit_filter.4.bias": (ORDER,),
            p + "mixer.filter_fn.implicit_filter.6.weight": (D, ORDER),
            p + "mixer.filter_fn.modulation.deltas": (1, 1, D),
            p + "norm1.weight": (D,), p + "norm1.bias": (D,), p + "norm2.weight": (D,), p + "norm2.bias": (D,),
            p + "mlp.fc1.weight": (D_INNER, D), p + "mlp.fc1.bias": (D_INNER,),
            p + "mlp.fc2.weight": (D, D_INNER), p + "mlp.fc2.bias": (D,),
        })
    return keys


def official_state(prefix: str, freq_copies=(1,), seed=0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    sd = {prefix + k: torch.randn(shape, generator=g) for k, shape in official_subkeys().items()}
    for i in range(N_LAYER):
        freq = torch.randn(1, ORDER, generator=g)
        for c in freq_copies:
            sd[f"{prefix}layers.{i}.mixer.filter_fn.implicit_filter.{c}.freq"] = freq.clone()
    return sd


def write_dir(path, config, state, fmt="safetensors"):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    if fmt == "safetensors":
        save_file(state, str(path / "model.safetensors"))
    elif fmt == "bin":
        torch.save(state, path / "pytorch_model.bin")
    else:
        torch.save({"state_dict": state}, path / "weights.ckpt")
    return path


def check_loaded(model, src: dict[str, torch.Tensor], prefix: str, infix: bool = False):
    """Every source tensor sits, unchanged, under the matching name; nothing of ours is left unset."""
    own = model.state_dict()
    norm = {}
    for key, value in src.items():
        if key == "lm_head.weight":
            assert model.lm_head is not None and torch.equal(model.lm_head.weight, value)
            norm[key] = value
            continue
        sub = key[len(prefix):]
        if infix:
            sub = sub.replace(".mixer.layer.", ".mixer.").replace(".mlp.layer.", ".mlp.")
        norm["backbone." + sub] = value
    for key, value in norm.items():
        if key.endswith(".freq") and key not in own:
            raise AssertionError(key)
        assert torch.equal(own[key], value), key
    for key in own:  # freq copies absent from the file come from the shared Sin module
        if key not in norm:
            assert key.endswith(".freq"), key
            layer = key.split(".implicit_filter.")[0]
            saved = [v for k, v in norm.items() if k.startswith(layer + ".implicit_filter.") and k.endswith(".freq")]
            assert saved and torch.equal(own[key], saved[0]), key


def test_hf_causal_lm_safetensors(tmp_path):
    state = official_state("hyena.backbone.")
    state["lm_head.weight"] = torch.randn(PADDED, D)
    d = write_dir(tmp_path / "hf", HF_CONFIG, state)
    assert is_hyena_dir(d)
    model = load_hyena_pretrained(d)
    assert model.is_causal and model.config.l_max == L_MAX and model.config.activation_freq == 10
    assert model.lm_head is not None  # untied head kept
    check_loaded(model, state, "hyena.backbone.")
    x = torch.randint(0, VOCAB, (2, L_MAX))
    with torch.no_grad():
        out = model(x)
        torch.testing.assert_close(out, model.features(x) @ state["lm_head.weight"][:VOCAB].T)
    assert out.shape == (2, L_MAX, VOCAB) and torch.isfinite(out).all()
    # the Sin frequency is one shared parameter after loading
    fn = model.backbone.layers[1].mixer.filter_fn
    assert fn.implicit_filter[3].freq is fn.implicit_filter[1].freq


def test_hf_base_model_bin_ties_head(tmp_path):
    state = official_state("backbone.", freq_copies=(1, 3, 5))
    config = dict(HF_CONFIG, architectures=["HyenaDNAModel"])
    model = load_hyena_pretrained(write_dir(tmp_path / "bin", config, state, fmt="bin"))
    assert model.lm_head is None
    check_loaded(model, state, "backbone.")


def test_head_equal_to_embedding_is_tied(tmp_path):
    state = official_state("hyena.backbone.")
    state["lm_head.weight"] = state["hyena.backbone.embeddings.word_embeddings.weight"].clone()
    model = load_hyena_pretrained(write_dir(tmp_path / "tied", HF_CONFIG, state))
    assert model.lm_head is None


def test_github_checkpoint_with_infixes(tmp_path):
    base = official_state("model.backbone.")
    state = {k.replace(".mixer.", ".mixer.layer.").replace(".mlp.", ".mlp.layer."): v for k, v in base.items()}
    config = {"d_model": D, "n_layer": N_LAYER, "d_inner": D_INNER, "vocab_size": VOCAB,
              "pad_vocab_size_multiple": 8, "layer": {"_name_": "hyena", "emb_dim": EMB, "filter_order": ORDER,
                                                       "local_order": 3, "l_max": L_MAX, "w": 10}}
    model = load_hyena_pretrained(write_dir(tmp_path / "gh", config, state, fmt="ckpt"))
    check_loaded(model, state, "model.backbone.", infix=True)


def test_bidirectional_override_keeps_forward_filters(tmp_path):
    state = official_state("hyena.backbone.")
    model = load_hyena_pretrained(write_dir(tmp_path / "bi", HF_CONFIG, state), causal=False)
    assert not model.is_causal
    assert torch.equal(model.backbone.layers[0].mixer.in_proj.weight,
                       state["hyena.backbone.layers.0.mixer.in_proj.weight"])


@pytest.mark.parametrize("problem", ["extra", "missing", "shape", "freq"])
def test_bad_checkpoints(tmp_path, problem):
    state = official_state("hyena.backbone.", freq_copies=(1, 3))
    if problem == "extra":
        state["hyena.backbone.layers.0.mixer.mystery.weight"] = torch.zeros(1)
    elif problem == "missing":
        del state["hyena.backbone.layers.1.mlp.fc2.bias"]
    elif problem == "shape":
        state["hyena.backbone.ln_f.weight"] = torch.zeros(D + 1)
    else:
        state["hyena.backbone.layers.0.mixer.filter_fn.implicit_filter.3.freq"] += 1
    with pytest.raises(DnadiffError, match="HyenaDNA checkpoint"):
        load_hyena_pretrained(write_dir(tmp_path / problem, HF_CONFIG, state))


def test_not_a_hyena_dir(tmp_path):
    assert not is_hyena_dir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "caduceus", "d_model": 8}))
    assert not is_hyena_dir(tmp_path)
    with pytest.raises(DnadiffError):
        load_hyena_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    assert not is_hyena_dir(tmp_path)


def test_pickled_objects_are_refused(tmp_path):
    d = tmp_path / "evil"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(HF_CONFIG))
    torch.save({"state_dict": official_state("backbone."), "obj": _Unsafe()}, d / "pytorch_model.bin")
    with pytest.raises(DnadiffError, match="weights-only"):
        load_hyena_pretrained(d)


def test_missing_weights_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(HF_CONFIG))
    with pytest.raises(DnadiffError, match="no weights file"):
        load_hyena_pretrained(tmp_path)


class _Unsafe:
    pass


def test_hyena_format_reads_config_and_raw_state(tmp_path):
    from dnadiff.backbones.formats import CHECKPOINT_FORMATS, detect_format

    state = official_state("hyena.backbone.")
    d = write_dir(tmp_path / "hf", HF_CONFIG, state)
    assert detect_format(d) == "hyena"
    fmt = CHECKPOINT_FORMATS.get("hyena")
    config, tensors = fmt.read(d)
    assert config.l_max == L_MAX and set(tensors) == set(state)
    assert (fmt.backbone, fmt.objective, fmt.objective_options) == ("hyena", "ar", {"bos_id": None})
