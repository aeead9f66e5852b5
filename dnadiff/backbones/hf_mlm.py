"""Any Hugging Face masked LM as an MDLM backbone (MDLM app. D.6: BERT fine-tuned with the MDLM
objective; also DNA MLMs such as Nucleotide Transformer).

An adapter over `AutoModelForMaskedLM` that follows the backbone contract (base.py):

    forward(input_ids: Long[B, L], t=None, cond=None) -> logits Float[B, L, vocab_size]
    features(input_ids, t=None, cond=None)             -> the MLM's last hidden state [B, L, H]

MLMs are not time-conditioned (the paper fine-tunes BERT without time conditioning), so `t` is
ignored. Presets:
    tiny             a tiny randomly initialised BertConfig (tests, CPU seconds)
    bert-base        a randomly initialised bert-base-uncased-sized BertConfig
    from_pretrained  weights from a local folder or the HF cache: `path` (required, offline)

Vocabulary: `vocab_size` is the tokenizer's size. A pretrained model whose embedding is smaller
(a tokenizer that gained [MASK]/[PAD]) is resized (`resize_token_embeddings`); extra model
columns beyond `vocab_size` (vocab padding) are dropped from the logits.

Saved model directories rebuild without the original folder: after loading from `path`, the
model's HF config is kept in `hf_config`, and a config with a non-empty `hf_config` builds the
architecture from it (randomly initialised; the weights then come from model.safetensors).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

from torch import Tensor, nn

from dnadiff.backbones.base import BACKBONES, Backbone, padding_mask
from dnadiff.errors import DnadiffError


@dataclasses.dataclass
class HFMLMConfig:
    vocab_size: int = 0  # 0: the pretrained model's vocabulary size
    path: Optional[str] = None  # local folder / HF-cache name of a pretrained masked LM
    hf_config: dict[str, Any] = dataclasses.field(default_factory=dict)  # a HF config (to_diff_dict)
    # fields of the BertConfig built when neither path nor hf_config is given
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 128
    max_position_embeddings: int = 512
    dropout: float = 0.0
    cond_dim: int = 0  # width of an optional per-sequence vector added to the token embeddings


def _bert_config(cfg: HFMLMConfig, vocab_size: int):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads, intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_position_embeddings, hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.dropout,
    )


def _hf_config_dict(hf_cfg) -> dict[str, Any]:
    """A plain (YAML/JSON-able) dict of the HF config's non-default fields, with model_type."""
    d = json.loads(hf_cfg.to_json_string(use_diff=True))
    d["model_type"] = hf_cfg.model_type
    for k in ("_name_or_path", "transformers_version", "architectures"):
        d.pop(k, None)
    return d


@BACKBONES.register("hf_mlm")
class HFMaskedLM(Backbone):
    Config = HFMLMConfig
    PRESETS = {
        "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
        "bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                          dropout=0.1),
        "from_pretrained": dict(),  # needs path=...
    }

    @classmethod
    def from_preset(cls, preset: str = "tiny", **overrides: Any) -> "HFMaskedLM":
        if preset == "from_pretrained" and not overrides.get("path") and not overrides.get("hf_config"):
            raise DnadiffError("hf_mlm preset from_pretrained: set model.overrides.path to a local masked-LM folder")
        return super().from_preset(preset, **overrides)

    def __init__(self, config: HFMLMConfig):
        super().__init__()
        from transformers import AutoConfig, AutoModelForMaskedLM

        self.config = config
        if config.hf_config:  # a saved model: architecture only, weights come from the checkpoint
            hf_cfg_dict = dict(config.hf_config)
            model_type = hf_cfg_dict.pop("model_type", None)
            if not model_type:
                raise DnadiffError("hf_mlm config: hf_config lacks model_type")
            try:
                hf_cfg = AutoConfig.for_model(model_type, **hf_cfg_dict)
            except (ValueError, KeyError) as exc:
                raise DnadiffError(f"hf_mlm config: bad hf_config ({str(exc).splitlines()[0][:160]})") from None
            model = AutoModelForMaskedLM.from_config(hf_cfg)
        elif config.path:
            try:
                model = AutoModelForMaskedLM.from_pretrained(config.path, local_files_only=True)
            except (OSError, ValueError) as exc:
                raise DnadiffError(
                    f"model.overrides.path: masked LM {config.path!r} not found locally "
                    f"({str(exc).splitlines()[0][:160]})"
                ) from None
        else:
            if config.vocab_size < 1:
                raise DnadiffError("hf_mlm config: vocab_size must be set when building a model from scratch")
            model = AutoModelForMaskedLM.from_config(_bert_config(config, config.vocab_size))
        model_vocab = model.get_input_embeddings().num_embeddings
        vocab = config.vocab_size or model_vocab
        if vocab > model_vocab:  # the tokenizer gained tokens (e.g. [MASK]/[PAD]): grow the embedding
            model.resize_token_embeddings(vocab)
        if config.path and not config.hf_config:
            config.hf_config = _hf_config_dict(model.config)
        config.vocab_size = vocab
        self.model = model
        self.vocab_size = vocab
        self.hidden_size = int(model.config.hidden_size)
        self.cond_proj = nn.Linear(config.cond_dim, self.hidden_size, bias=False) if config.cond_dim > 0 else None
        if self.cond_proj is not None:
            nn.init.normal_(self.cond_proj.weight, std=0.02)

    def _inputs(
        self, input_ids: Tensor, cond: Tensor | None, attention_mask: Tensor | None = None
    ) -> dict[str, Tensor]:
        if input_ids.dim() != 2:
            raise DnadiffError(f"hf_mlm: input_ids must be [B, L], got shape {tuple(input_ids.shape)}")
        real = padding_mask(input_ids, attention_mask)
        extra = {} if real is None else {"attention_mask": real.long()}  # the HF key padding mask
        if cond is None:
            return {"input_ids": input_ids, **extra}
        if self.cond_proj is None:
            raise DnadiffError("hf_mlm: a cond vector was passed but the model was built with cond_dim=0")
        emb = self.model.get_input_embeddings()(input_ids)  # (B, L, H)
        return {"inputs_embeds": emb + self.cond_proj(cond.to(emb.dtype))[:, None], **extra}

    def features(self, input_ids: Tensor, t: Tensor | None = None, cond: Tensor | None = None,
                 attention_mask: Tensor | None = None) -> Tensor:
        out = self.model.base_model(**self._inputs(input_ids, cond, attention_mask))
        return out.last_hidden_state  # (B, L, H)

    def forward(self, input_ids: Tensor, t: Tensor | None = None, cond: Tensor | None = None,
                attention_mask: Tensor | None = None) -> Tensor:
        logits = self.model(**self._inputs(input_ids, cond, attention_mask)).logits  # (B, L, V_model)
        return logits[..., : self.vocab_size].float()  # (B, L, V)
