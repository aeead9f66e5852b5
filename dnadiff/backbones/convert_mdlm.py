"""Import the official MDLM text checkpoints (kuleshov-group/mdlm-owt) into the `dit` backbone.

Layout of such a directory (the Hugging Face `MDLM` wrapper, custom code `modeling_mdlm.py`):
    config.json         model_type "mdlm": vocab_size (50258 = GPT-2 + [MASK]), model_length,
                        hidden_dim, cond_dim, n_blocks, n_heads, dropout, time_conditioning
    model.safetensors   `MDLM.backbone` (the reference DiT) under the prefix `backbone.`

The wrapper's DiT is the MDLM reference `models/dit.py` (paper §5.1, docs/references.md "DiT"), which our
`dit` backbone reproduces module for module, so the import is a key rename:
    backbone.vocab_embed.embedding      (V, H) parameter  -> vocab_embed.weight (nn.Embedding)
    backbone.rotary_emb.inv_freq        buffer            -> dropped (recomputed; checked to be base 1e4)
    backbone.<everything else>                            -> <everything else>
The reference packs q, k, v as `(three h d)` on the output axis of `attn_qkv`, the same order as
our `view(B, L, 3, nh, hd)`; LayerNorm eps is torch's default 1e-5; the time MLP reads a 256-wide
sinusoid. The reference feeds σ(t) when time_conditioning is on (ours: `model.time_input: sigma`)
and zeros otherwise (mdlm-owt), which is what our DiT does with time_conditioning=False.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from dnadiff.backbones.dit import DiT, DiTConfig
from dnadiff.backbones.formats import CHECKPOINT_FORMATS, CheckpointFormat
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers import TextTokenizer
from dnadiff.weights import load_state_into, read_weights

PREFIX = "backbone."
_RENAMES = {"vocab_embed.embedding": "vocab_embed.weight"}
_DROPPED = ("rotary_emb.inv_freq",)


def read_config(path: str | Path) -> dict[str, Any]:
    cfg_file = Path(path) / "config.json"
    try:
        cfg = json.loads(cfg_file.read_text())
    except FileNotFoundError:
        raise DnadiffError(f"{path}: no config.json (not a Hugging Face-format model directory)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DnadiffError(f"{cfg_file}: invalid JSON ({str(exc).splitlines()[0][:80]})") from None
    if not isinstance(cfg, dict):
        raise DnadiffError(f"{cfg_file}: expected a JSON object")
    return cfg


def is_mdlm_dir(path: str | Path) -> bool:
    """True for a directory whose config.json describes the official HF `MDLM` wrapper."""
    try:
        cfg = read_config(path)
    except DnadiffError:
        return False
    return str(cfg.get("model_type", "")).lower() == "mdlm" or "MDLM" in (cfg.get("architectures") or [])


def dit_config_from_mdlm(cfg: dict[str, Any], where: str = "config.json") -> DiTConfig:
    """MDLMConfig fields -> DiTConfig (defaults of MDLMConfig where a field is absent)."""
    try:
        return DiTConfig(
            vocab_size=int(cfg.get("vocab_size", 50258)),
            hidden_size=int(cfg.get("hidden_dim", 768)),
            n_heads=int(cfg.get("n_heads", 12)),
            n_blocks=int(cfg.get("n_blocks", 12)),
            adaln_dim=int(cfg.get("cond_dim", 128)),
            dropout=float(cfg.get("dropout", 0.1)),
            time_conditioning=bool(cfg.get("time_conditioning", False)),
            causal=False,
        )
    except (TypeError, ValueError) as exc:
        raise DnadiffError(f"{where}: not an MDLM config ({exc})") from None


def convert_state_dict(src: dict[str, Tensor], where: str = "model.safetensors") -> dict[str, Tensor]:
    """`MDLM` wrapper keys -> `dit` backbone keys (see the module docstring)."""
    out: dict[str, Tensor] = {}
    for key, value in src.items():
        if not key.startswith(PREFIX):
            raise DnadiffError(f"{where}: unexpected key {key!r} (the MDLM wrapper stores backbone.*)")
        sub = key[len(PREFIX):]
        if sub in _DROPPED:
            dim = 2 * value.numel()
            base = 1.0 / (10_000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
            if not torch.allclose(value.double(), base, rtol=1e-5, atol=0):
                raise DnadiffError(f"{where}: {key} is not the rotary base 1e4 the dit backbone uses")
            continue
        out[_RENAMES.get(sub, sub)] = value
    return out


def load_mdlm_pretrained(path: str | Path) -> DiT:
    """Official MDLM directory -> dnadiff `dit` backbone with its weights (eval mode)."""
    path = Path(path)
    if not is_mdlm_dir(path):
        raise DnadiffError(f"{path}: not an MDLM model directory (config.json with model_type 'mdlm')")
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise DnadiffError(f"{path}: missing model.safetensors (only safetensors MDLM checkpoints are read)")
    backbone = DiT(dit_config_from_mdlm(read_config(path), str(path / "config.json")))
    state = convert_state_dict(read_weights(weights), str(weights))
    load_state_into(backbone, state, str(weights))
    return backbone.eval()


def extend_vocab(backbone: DiT, vocab_size: int, where: str = "tokenizer") -> DiT:
    """Give the backbone rows for tokens the checkpoint never saw (the dedicated [PAD] our text
    tokenizer adds; the reference aliased pad and mask for GPT-2). The new rows embed to zero and
    get a logit of -1e6 (SUBS's NEG_INF): they are never predicted, and the softmax over the
    checkpoint's own tokens is unchanged."""
    old = backbone.vocab_size
    if vocab_size == old:
        return backbone
    if vocab_size < old:
        raise DnadiffError(f"{where}: vocab_size {vocab_size} is smaller than the checkpoint's {old}")
    extra = vocab_size - old
    emb, lin = backbone.vocab_embed, backbone.output_layer.linear
    with torch.no_grad():
        new_emb = torch.nn.Embedding(vocab_size, emb.embedding_dim).to(emb.weight)
        new_emb.weight.copy_(torch.cat([emb.weight, emb.weight.new_zeros(extra, emb.embedding_dim)]))
        new_lin = torch.nn.Linear(lin.in_features, vocab_size).to(lin.weight)
        new_lin.weight.copy_(torch.cat([lin.weight, lin.weight.new_zeros(extra, lin.in_features)]))
        new_lin.bias.copy_(torch.cat([lin.bias, lin.bias.new_full((extra,), -1e6)]))
    backbone.vocab_embed, backbone.output_layer.linear = new_emb, new_lin
    backbone.config.vocab_size = backbone.vocab_size = vocab_size
    return backbone


def mdlm_tokenizer(path: str | Path, name: str, vocab_size: int):
    """The text tokenizer of an MDLM directory: its own tokenizer files when present, else `name`
    (mdlm-owt: GPT-2, from the local Hugging Face cache). The checkpoint's mask token is its last id."""
    path = Path(path)
    has_files = any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json"))
    if has_files:  # trust_remote_code=False: the folder's config.json names custom model code, never run it
        from transformers import AutoTokenizer

        try:
            hf = AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
        except (OSError, ValueError) as exc:
            raise DnadiffError(f"{path}: its tokenizer files do not load ({str(exc).splitlines()[0][:120]})") from None
        tok = TextTokenizer(str(path), hf_tokenizer=hf)
    else:
        tok = TextTokenizer(name)
    if tok.mask_id != vocab_size - 1:
        raise DnadiffError(f"{path}: tokenizer {tok.name_or_path!r} puts [MASK] at id {tok.mask_id}; the MDLM "
                           f"checkpoint (vocab_size {vocab_size}) has it at {vocab_size - 1}")
    return tok


@CHECKPOINT_FORMATS.register("mdlm")
class MDLMCheckpoint(CheckpointFormat):
    backbone, objective, text_model = "dit", "mdlm", True
    detect = staticmethod(is_mdlm_dir)

    @staticmethod
    def read(path: Path) -> tuple[DiTConfig, dict[str, Tensor]]:
        from dnadiff.weights import read_weights

        path = Path(path)
        config = dit_config_from_mdlm(read_config(path), str(path / "config.json"))
        return config, read_weights(path / "model.safetensors")

    @staticmethod
    def load(path: Path, vocab_size: int | None = None) -> DiT:
        # `vocab_size`: the tokenizer's (our text tokenizer adds a [PAD] after [MASK])
        backbone = load_mdlm_pretrained(path)
        return extend_vocab(backbone, vocab_size, str(path)) if vocab_size else backbone
