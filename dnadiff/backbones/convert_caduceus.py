"""Load an official Hugging Face-format Caduceus directory (kuleshov-group/caduceus-{ph,ps}_*) into the
dnadiff `caduceus` backbone, without the official code, mamba_ssm or trust_remote_code.

Directory: config.json (model_type "caduceus") + model.safetensors (or a sharded
model.safetensors.index.json, or pytorch_model.bin, read with torch.load(weights_only=True)).

Key mapping (docs/references.md "Official Caduceus checkpoint format"):
- prefix `caduceus.` (CaduceusForMaskedLM) is dropped; a bare `backbone.` (Caduceus) is accepted;
- non-fused PS names `layers.{i}.norm.submodule.weight`, `norm_f.submodule.weight` -> `.norm.weight`;
- tied weights saved once are re-tied: `mamba_rev.{in,out}_proj.*` from `mamba_fwd`, the LM head from
  the embedding (checked equal when both are present);
- `fused_add_norm` from config.json is kept: the dnadiff model then hands every RCPS block its
  channel halves swapped exactly like the official fused add-norm path (PS checkpoints trained with
  it need that ordering; PH is unaffected).
Every key must map and nothing may be left over, else DnadiffError names the keys.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

from dnadiff.backbones.caduceus import Caduceus, CaduceusConfig
from dnadiff.backbones.formats import CHECKPOINT_FORMATS, CheckpointFormat
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.dna import DNA_COMPLEMENT

_SSM_KEYS = ("d_state", "d_conv", "expand", "dt_rank", "dt_min", "dt_max", "dt_init", "dt_scale",
             "dt_init_floor", "conv_bias", "bias")
_TOP_KEYS = ("d_model", "n_layer", "rms_norm", "residual_in_fp32", "fused_add_norm", "pad_vocab_size_multiple",
             "norm_epsilon", "bidirectional", "bidirectional_strategy", "bidirectional_weight_tie", "rcps")
_DNA_VOCAB = len(DNA_COMPLEMENT)


def _read_config(path: Path) -> dict[str, Any]:
    cfg_file = path / "config.json"
    try:
        return json.loads(cfg_file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DnadiffError(f"{cfg_file}: cannot read a JSON config ({exc})") from None


def is_caduceus_dir(path: str | Path) -> bool:
    """True for a directory whose config.json describes an official Caduceus model."""
    path = Path(path)
    if not (path / "config.json").is_file():
        return False
    try:
        cfg = json.loads((path / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    if not isinstance(cfg, dict):
        return False
    return cfg.get("model_type") == "caduceus" or {"d_model", "n_layer", "rcps", "bidirectional"} <= set(cfg)


def _complement_map(raw: Any) -> list[int] | None:
    """config.json's complement_map -> [complement of id 0, of id 1, ...].

    The official code reads list(values()), which is the id order only while the keys are written
    0, 1, 2, ...; a config re-saved by `save_pretrained` sorts them as strings ("10" before "2").
    The official model is rescued by the complement_map buffer in its weights file; here the map
    is read by integer key, so both orders give the same map."""
    if raw is None:
        return None
    if isinstance(raw, list):
        return [int(v) for v in raw]
    if not isinstance(raw, dict):
        raise DnadiffError("config.json: complement_map must be a mapping {id: complement id}")
    try:
        by_id = {int(k): int(v) for k, v in raw.items()}
    except (TypeError, ValueError):
        raise DnadiffError("config.json: complement_map keys and values must be token ids (integers)") from None
    if sorted(by_id) != list(range(len(by_id))):
        raise DnadiffError(f"config.json: complement_map keys must be the ids 0..{len(by_id) - 1}")
    return [by_id[i] for i in range(len(by_id))]


def caduceus_config_from_hf(cfg: dict[str, Any], vocab_size: int | None = None) -> CaduceusConfig:
    """Official config.json -> CaduceusConfig. The public files store the padded vocab (16); when the
    complement map is the Caduceus character tokenizer's, the real vocabulary (12 ids) is used."""
    kwargs: dict[str, Any] = {k: cfg[k] for k in _TOP_KEYS if k in cfg}
    ssm = cfg.get("ssm_cfg") or {}
    kwargs.update({k: ssm[k] for k in _SSM_KEYS if k in ssm})
    init = cfg.get("initializer_cfg") or {}
    for k in ("initializer_range", "rescale_prenorm_residual", "n_residuals_per_layer"):
        if k in init:
            kwargs[k] = init[k]
    cmap = _complement_map(cfg.get("complement_map"))
    file_vocab = int(cfg.get("vocab_size", _DNA_VOCAB))
    if vocab_size is None:
        is_dna = cmap is None or (tuple(cmap[:_DNA_VOCAB]) == DNA_COMPLEMENT
                                  and all(c == i for i, c in enumerate(cmap) if i >= _DNA_VOCAB))
        vocab_size = _DNA_VOCAB if is_dna and file_vocab >= _DNA_VOCAB else file_vocab
    kwargs["vocab_size"] = vocab_size
    kwargs["complement_map"] = cmap
    if "d_model" not in kwargs or "n_layer" not in kwargs:
        raise DnadiffError("config.json: a Caduceus config needs d_model and n_layer")
    return CaduceusConfig(**kwargs)  # keys filtered to the known ones above: a TypeError here is a bug


def _load_weights(path: Path) -> dict[str, torch.Tensor]:
    if (path / "model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(str(path / "model.safetensors"))
    index = path / "model.safetensors.index.json"
    if index.is_file():
        from safetensors.torch import load_file

        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        state: dict[str, torch.Tensor] = {}
        for f in files:
            state.update(load_file(str(path / f)))
        return state
    if (path / "pytorch_model.bin").is_file():
        try:
            return torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
        except Exception as exc:  # pickled objects beyond tensors are refused on purpose
            raise DnadiffError(f"{path / 'pytorch_model.bin'}: cannot load with weights_only=True ({exc})") from None
    raise DnadiffError(f"{path}: no model.safetensors, model.safetensors.index.json or pytorch_model.bin")


def map_caduceus_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename official keys to dnadiff keys (no re-tying here)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        new = key[len("caduceus."):] if key.startswith("caduceus.") else key
        new = re.sub(r"(layers\.\d+\.norm|norm_f)\.submodule\.", r"\1.", new)
        if new in out:
            raise DnadiffError(f"checkpoint: keys {key!r} and another both map to {new!r}")
        out[new] = value
    return out


def _retie(state: dict[str, torch.Tensor], model: Caduceus) -> None:
    """Fill tied keys that the file stores once; check the copies agree when both are stored."""
    pairs = []
    cfg = model.config
    if cfg.bidirectional and cfg.bidirectional_weight_tie:
        mixer = "mixer.submodule" if cfg.rcps else "mixer"
        for i in range(cfg.n_layer):
            for p in ("in_proj.weight", "in_proj.bias", "out_proj.weight", "out_proj.bias"):
                pairs.append((f"backbone.layers.{i}.{mixer}.mamba_fwd.{p}",
                              f"backbone.layers.{i}.{mixer}.mamba_rev.{p}"))
    emb = "backbone.embeddings.word_embeddings." + ("embedding.weight" if cfg.rcps else "weight")
    pairs.append((emb, "lm_head.lm_head.weight" if cfg.rcps else "lm_head.weight"))
    for src, dst in pairs:
        if src not in state:
            continue
        if dst not in state:
            state[dst] = state[src]
        elif state[dst].shape != state[src].shape or not torch.equal(state[dst], state[src]):
            raise DnadiffError(f"checkpoint: {dst} differs from {src}, but the model ties them")
    for name, buf in model.named_buffers():
        if name.endswith("complement_map") and name not in state:
            state[name] = buf.clone()


def load_caduceus_pretrained(path: str | Path, vocab_size: int | None = None, **overrides: Any) -> Caduceus:
    """Official Caduceus directory -> dnadiff `caduceus` backbone with its weights (eval mode)."""
    path = Path(path)
    if not is_caduceus_dir(path):
        raise DnadiffError(f"{path}: not a Caduceus model directory (config.json with model_type 'caduceus')")
    config = caduceus_config_from_hf(_read_config(path), vocab_size)
    for k, v in overrides.items():
        if not hasattr(config, k):
            raise DnadiffError(f"caduceus: unknown config key {k!r}")
        setattr(config, k, v)
    model = Caduceus(config)
    state = map_caduceus_keys(_load_weights(path))
    _retie(state, model)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise DnadiffError(f"{path}: checkpoint does not match the config: missing {missing[:6]}"
                           f"{'...' if len(missing) > 6 else ''}, unexpected {unexpected[:6]}"
                           f"{'...' if len(unexpected) > 6 else ''}")
    bad = [k for k in expected if expected[k].shape != state[k].shape]
    if bad:
        raise DnadiffError(f"{path}: shape mismatch for {bad[0]}: file {tuple(state[bad[0]].shape)}, "
                           f"model {tuple(expected[bad[0]].shape)}")
    if "backbone.embeddings.word_embeddings.complement_map" in state:
        file_map = state["backbone.embeddings.word_embeddings.complement_map"]
        if not torch.equal(file_map, model.complement):
            raise DnadiffError(f"{path}: complement_map buffer differs from the config's complement_map")
    model.load_state_dict({k: v.to(expected[k].dtype) for k, v in state.items()}, strict=True)
    model.tie_weights()
    return model.eval()


@CHECKPOINT_FORMATS.register("caduceus")
class CaduceusCheckpoint(CheckpointFormat):
    backbone, objective = "caduceus", "mlm"
    detect = staticmethod(is_caduceus_dir)

    @staticmethod
    def read(path: Path) -> tuple[CaduceusConfig, dict[str, torch.Tensor]]:
        return caduceus_config_from_hf(_read_config(Path(path))), _load_weights(Path(path))

    @staticmethod
    def load(path: Path, vocab_size: int | None = None) -> Caduceus:
        return load_caduceus_pretrained(path)  # the official vocabulary is the DNA tokenizer's
