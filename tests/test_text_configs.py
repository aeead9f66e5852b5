"""Every config under configs/text loads into a RunConfig, and the paper settings are as stated."""

from pathlib import Path

import pytest

from dnadiff.config import CONFIG_ROOT, RunConfig, load_config
from dnadiff.data.text_sources import TextOptions

TEXT_CONFIGS = sorted((Path(CONFIG_ROOT) / "text").glob("*.yaml"))


def test_there_are_text_configs():
    names = {p.stem for p in TEXT_CONFIGS}
    assert {"lm1b_mdlm", "lm1b_ar", "owt_mdlm", "owt_ar", "bert_mdlm_ft", "cpu_fortunes_mdlm"} <= names


@pytest.mark.parametrize("path", TEXT_CONFIGS, ids=lambda p: p.stem)
def test_text_config_loads(path):
    cfg = load_config(RunConfig, path)
    assert cfg.data.kind == "text" and cfg.tokenizer.kind == "text" and cfg.tokenizer.path
    TextOptions.from_mapping(cfg.data.text)  # the text options are valid
    if cfg.objective.name == "ar":
        assert cfg.model.preset.endswith("causal") or cfg.model.overrides.get("causal") is True
    if cfg.objective.name == "sedd":
        assert cfg.model.overrides.get("time_conditioning") is True


def test_paper_settings():
    lm1b = load_config(RunConfig, "text/lm1b_mdlm")
    assert (lm1b.model.backbone, lm1b.model.preset) == ("dit", "small")
    assert lm1b.data.seq_len == 128 and lm1b.train.batch_size * lm1b.train.accumulate == 512
    assert lm1b.train.lr == 3e-4 and lm1b.train.warmup_steps == 2500 and lm1b.train.lr_schedule == "constant"
    assert TextOptions.from_mapping(lm1b.data.text).wrapped is False
    owt = load_config(RunConfig, "text/owt_mdlm")
    assert owt.data.seq_len == 1024 and TextOptions.from_mapping(owt.data.text).wrapped
    assert owt.data.text["holdout_docs"] == 100_000 and owt.tokenizer.path == "gpt2"
    ar = load_config(RunConfig, "text/owt_ar")
    assert ar.objective.name == "ar" and ar.model.preset == "small-causal" and ar.data.seq_len == 1024
    semi = load_config(RunConfig, "text/owt_mdlm_semi_ar")
    assert semi.sample.length == 2048 and semi.sample.options["stride"] == 512
    bert = load_config(RunConfig, "text/bert_mdlm_ft")
    assert bert.model.backbone == "hf_mlm" and bert.objective.name == "mdlm"
