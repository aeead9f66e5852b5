"""Load official HyenaDNA checkpoints (LongSafari/hyenadna-*-hf and the GitHub release) by key mapping.

Accepted: a local directory with `config.json` plus `model.safetensors` or `pytorch_model.bin`
(HF port, custom code) or `weights.ckpt` (GitHub release). `.bin`/`.ckpt` files are read with
`torch.load(weights_only=True)` only: nothing is unpickled beyond tensors and plain containers.

Key names (docs/references.md "Official HyenaDNA checkpoint format"): `HyenaDNAForCausalLM` saves
`hyena.backbone.<sub>` plus an untied `lm_head.weight`; `HyenaDNAModel` saves `backbone.<sub>`;
GitHub `weights.ckpt` files add `model.` and, for checkpointed blocks, `.mixer.layer.` /
`.mlp.layer.` infixes. `<sub>` is the same as our `HyenaDNA.backbone` (see hyena.py), so the
mapping is a prefix rewrite. The shared Sin frequency appears as `implicit_filter.{1,3,5}.freq`
(safetensors may keep only one copy); any present copies must agree. `score.weight` (the
sequence-classification head of HyenaDNAForSequenceClassification) is not part of a backbone and
is dropped. Every other key must map onto a tensor of the same shape, and every parameter of the
backbone must be covered; otherwise DnadiffError names the keys. The deterministic buffers
`pos_emb.t` and `modulation.deltas` may be absent (they are recomputed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from dnadiff.backbones.formats import CHECKPOINT_FORMATS, CheckpointFormat
from dnadiff.backbones.hyena import HyenaConfig, HyenaDNA
from dnadiff.errors import DnadiffError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "weights.ckpt")
_PREFIXES = ("hyena.backbone.", "model.backbone.", "backbone.")
_DROPPED = ("score.weight",)
_OPTIONAL_BUFFERS = ("pos_emb.t", "modulation.deltas")


def _read_config(path: Path) -> dict[str, Any]:
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise DnadiffError(f"{path}: no config.json (not a Hugging Face-format model directory)")
    try:
        return json.loads(cfg_file.read_text())
    except json.JSONDecodeError as exc:
        raise DnadiffError(f"{cfg_file}: invalid JSON ({exc.msg} at line {exc.lineno})") from None


def is_hyena_dir(path: str | Path) -> bool:
    """True when `path` holds a HyenaDNA config.json (HF port or GitHub release)."""
    path = Path(path)
    try:
        cfg = _read_config(path)
    except DnadiffError:
        return False
    if not isinstance(cfg, dict):
        return False
    if str(cfg.get("model_type", "")).lower() in ("hyenadna", "hyena"):
        return True
    if any("hyena" in str(a).lower() for a in cfg.get("architectures", []) or []):
        return True
    layer = cfg.get("layer")
    return isinstance(layer, dict) and layer.get("_name_") == "hyena"


def config_from_json(cfg: dict[str, Any], cfg_name: str = "config.json") -> HyenaConfig:
    """Map the flat HF fields (or the GitHub `layer` dict) onto HyenaConfig."""
    layer = cfg.get("layer") if isinstance(cfg.get("layer"), dict) else {}

    def get(*names: str, default: Any = None) -> Any:
        for src in (cfg, layer):
            for n in names:
                if n in src and src[n] is not None:
                    return src[n]
        return default

    try:
        d_model = int(get("d_model"))
        n_layer = int(get("n_layer"))
    except (TypeError, ValueError):
        raise DnadiffError(f"{cfg_name}: HyenaDNA config needs integer d_model and n_layer") from None
    return HyenaConfig(
        vocab_size=int(get("vocab_size", default=12)),
        d_model=d_model,
        n_layer=n_layer,
        d_inner=int(get("d_inner", default=4 * d_model)),
        l_max=int(get("max_seq_len", "l_max", default=1024)),
        hyena_order=int(get("hyena_order", "order", default=2)),
        filter_order=int(get("filter_order", default=64)),
        short_filter_order=int(get("short_filter_order", "local_order", default=3)),
        emb_dim=int(get("emb_dim", default=3)),
        num_inner_mlps=int(get("num_inner_mlps", default=2)),
        activation_freq=float(get("activation_freq", "w", default=1.0)),
        train_freq=bool(get("train_freq", default=True)),
        modulate=bool(get("modulate", default=True)),
        embed_dropout=float(get("embed_dropout", default=0.1)),
        hyena_dropout=float(get("hyena_dropout", "dropout", default=0.0)),
        resid_dropout=float(get("resid_dropout", default=0.0)),
        layer_norm_epsilon=float(get("layer_norm_epsilon", default=1e-5)),
        pad_vocab_size_multiple=int(get("pad_vocab_size_multiple", default=8)),
        initializer_range=float(get("initializer_range", default=0.02)),
        causal=True,  # the released models are causal language models
    )


def read_state_dict(path: Path) -> dict[str, Tensor]:
    for name in WEIGHT_FILES:
        f = path / name
        if not f.is_file():
            continue
        if name.endswith(".safetensors"):
            from safetensors.torch import load_file

            return load_file(str(f))
        try:
            obj = torch.load(str(f), map_location="cpu", weights_only=True)
        except Exception as exc:  # pickle with non-tensor objects, corrupt file
            raise DnadiffError(f"{f}: cannot read as a weights-only torch file ({type(exc).__name__})") from None
        if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
            obj = obj["state_dict"]
        if not isinstance(obj, dict):
            raise DnadiffError(f"{f}: expected a dict of tensors")
        return {k: v for k, v in obj.items() if isinstance(v, Tensor)}
    raise DnadiffError(f"{path}: no weights file ({', '.join(WEIGHT_FILES)})")


def map_key(key: str) -> str | None:
    """Official key -> our state_dict key (`backbone.<sub>` or `lm_head.weight`); None if dropped."""
    if key in _DROPPED:
        return None
    if key == "lm_head.weight" or key == "model.lm_head.weight":
        return "lm_head.weight"
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            sub = key[len(prefix):]
            sub = re.sub(r"\.(mixer|mlp)\.layer\.", r".\1.", sub)
            return "backbone." + sub
    raise DnadiffError(f"HyenaDNA checkpoint: unexpected key {key!r}")


def convert_state_dict(src: dict[str, Tensor], model: HyenaDNA) -> dict[str, Tensor]:
    """Rename official keys onto `model`'s state_dict keys; check shapes and coverage."""
    own = model.state_dict()
    out: dict[str, Tensor] = {}
    freq_groups: dict[str, list[Tensor]] = {}
    for key, value in src.items():
        ours = map_key(key)
        if ours is None:
            continue
        m = re.match(r"(.*\.implicit_filter)\.\d+\.freq$", ours)
        if m:  # one shared Sin module: gather every saved copy
            freq_groups.setdefault(m.group(1), []).append(value)
            continue
        if ours == "lm_head.weight" and "lm_head.weight" not in own:
            continue  # decided by the caller (tied head)
        if ours not in own:
            raise DnadiffError(f"HyenaDNA checkpoint: key {key!r} has no counterpart ({ours})")
        if tuple(own[ours].shape) != tuple(value.shape):
            raise DnadiffError(
                f"HyenaDNA checkpoint: {key!r} has shape {tuple(value.shape)}, "
                f"the model expects {tuple(own[ours].shape)}"
            )
        out[ours] = value
    for prefix, copies in freq_groups.items():
        for c in copies[1:]:
            if not torch.equal(c, copies[0]):
                raise DnadiffError(f"HyenaDNA checkpoint: the shared Sin frequency copies of {prefix} differ")
        for k in own:
            if k.startswith(prefix + ".") and k.endswith(".freq"):
                out[k] = copies[0]
    missing = [
        k for k in own
        if k not in out and not k.endswith(_OPTIONAL_BUFFERS) and not k.endswith("rev_bias")
    ]
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise DnadiffError(f"HyenaDNA checkpoint: {len(missing)} tensor(s) missing: {shown}")
    return out


def load_hyena_pretrained(path: str | Path, **overrides: Any) -> HyenaDNA:
    """Build a causal `HyenaDNA` from an official checkpoint directory and load its weights.

    The LM head is tied to the embedding when the file has no `lm_head.weight` or when it equals
    the embedding, else kept as a separate `lm_head`. `overrides` change config fields (e.g.
    `embed_dropout=0.0`); `causal=False` keeps the loaded filters for the forward lags and starts the
    backward kernel from the same MLP (its `rev_bias` keeps its fresh initialisation).
    """
    path = Path(path)
    if not is_hyena_dir(path):
        raise DnadiffError(f"{path}: config.json does not describe a HyenaDNA model")
    cfg = config_from_json(_read_config(path), str(path / "config.json"))
    src = read_state_dict(path)
    emb_key = next((k for k in src if k.endswith("embeddings.word_embeddings.weight")), None)
    head = src.get("lm_head.weight", src.get("model.lm_head.weight"))
    tie = head is None or (emb_key is not None and head.shape == src[emb_key].shape and torch.equal(head, src[emb_key]))
    values = {f: getattr(cfg, f) for f in cfg.__dataclass_fields__}
    values.update(tie_embeddings=tie)
    unknown = sorted(set(overrides) - set(values))
    if unknown:
        raise DnadiffError(f"load_hyena_pretrained: unknown config key(s) {', '.join(unknown)}")
    values.update(overrides)
    model = HyenaDNA(HyenaConfig(**values))
    state = convert_state_dict(src, model)
    model.load_state_dict(state, strict=False)
    return model.eval()


@CHECKPOINT_FORMATS.register("hyena")
class HyenaCheckpoint(CheckpointFormat):
    backbone, objective = "hyena", "ar"
    objective_options = {"bos_id": None}  # official HyenaDNA was trained without a [BOS]: its first token is context
    detect = staticmethod(is_hyena_dir)

    @staticmethod
    def read(path: Path) -> tuple[HyenaConfig, dict[str, Tensor]]:
        path = Path(path)
        return config_from_json(_read_config(path), str(path / "config.json")), read_state_dict(path)

    @staticmethod
    def load(path: Path, vocab_size: int | None = None) -> HyenaDNA:
        return load_hyena_pretrained(path)
