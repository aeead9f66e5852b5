"""FSDP settings: per-family wrap units, ties kept inside one unit, float32 scan.

Lightning 2.6 refuses FSDP on the CPU ("The strategy `fsdp` requires a GPU accelerator"), so the
multi-process FSDP run itself is in benchmarks/gpu_check.py; here the policy is checked on the
modules it would wrap, and the CPU refusal is a one-line error.
"""

from __future__ import annotations

import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.cli import main
from dnadiff.config import RunConfig, load_config
from dnadiff.errors import DnadiffError
from dnadiff.training import strategy as st

FAMILIES = {"caduceus": ["tiny", "tiny-ph"], "mamba": ["tiny"], "hyena": ["tiny"], "dit": ["tiny"]}


def _unit_of(name: str, units: list[str]) -> str:
    """The wrapped unit (module name) a parameter name belongs to; '' = the root unit."""
    owners = [u for u in units if name.startswith(u + ".")]
    return max(owners, key=len) if owners else ""


@pytest.mark.parametrize("family,preset", [(f, p) for f, ps in FAMILIES.items() for p in ps])
def test_wrap_policy_wraps_the_blocks_and_keeps_ties_in_one_unit(family, preset):
    model = build_backbone(family, preset=preset, vocab_size=12)
    classes = tuple(st.block_classes(family))
    units = [n for n, m in model.named_modules() if isinstance(m, classes)]
    assert len(units) == model.config.n_layer if hasattr(model.config, "n_layer") else len(units) >= 2
    wrapped = sum(p.numel() for n, p in model.named_parameters() if _unit_of(n, units))
    total = sum(p.numel() for p in model.parameters())
    assert wrapped > 0.3 * total, (wrapped, total)  # the blocks are where the parameters are
    names_of: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names_of.setdefault(id(p), []).append(name)
    ties = [names for names in names_of.values() if len(names) > 1]
    if family == "caduceus":
        assert ties  # the BiMamba in/out projections and the LM head are tied
    for names in ties:  # FSDP needs both ends of a tie in the same unit
        assert len({_unit_of(n, units) for n in names}) == 1, names


def test_mixed_precision_keeps_the_scan_and_long_filters_in_float32():
    from dnadiff.backbones.hyena import HyenaFilter
    from dnadiff.backbones.mamba import Mamba

    mp = st.fsdp_mixed_precision("bf16-mixed", "caduceus")
    assert mp.param_dtype == torch.bfloat16 and mp.reduce_dtype == torch.float32
    assert Mamba in mp._module_classes_to_ignore
    assert HyenaFilter in st.fsdp_mixed_precision("bf16-mixed", "hyena")._module_classes_to_ignore
    assert st.fsdp_mixed_precision("32-true", "dit") is None


def test_fsdp_strategy_on_a_gpu_machine(monkeypatch):
    monkeypatch.setattr(st, "_on_cpu", lambda cfg: False)
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["train.strategy=fsdp", "train.ema=0",
                                                               "train.precision=bf16-mixed"])
    strategy = st.build_strategy(cfg)
    assert type(strategy).__name__ == "FSDPStrategy"
    assert strategy._state_dict_type == "sharded" and strategy.kwargs["use_orig_params"] is True
    assert strategy.mixed_precision.param_dtype == torch.bfloat16
    with pytest.raises(DnadiffError, match="train.ema"):
        st.build_strategy(load_config(RunConfig, "experiments/tiny_dna_mdlm", ["train.strategy=fsdp"]))


def test_fsdp_on_cpu_is_a_one_line_error(tmp_path, capsys):
    rc = main(["train", "experiments/tiny_dna_mdlm", "train.strategy=fsdp", "train.accelerator=cpu",
               "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and "fsdp runs on GPUs only" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()  # nothing left behind
