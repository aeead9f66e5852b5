"""`model.init_from` says what it loaded, in one line: the path and the parameters matched / new / dropped
(issue 49: before, nothing confirmed that a pretrained network was read at all)."""

import torch

from dnadiff.backbones import build_backbone
from dnadiff.config import RunConfig
from dnadiff.config_options import load_config
from dnadiff.modelio.model_dir import save_model_dir
from dnadiff.tokenizers import DNATokenizer
from dnadiff.training.run import build_backbone_for, parameter_counts


def test_parameter_counts_match_by_name_then_by_value():
    torch.manual_seed(0)
    source = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 4), "b": torch.nn.Linear(4, 2),
                                  "gone": torch.nn.Linear(2, 2)})
    final = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 4), "renamed": torch.nn.Linear(4, 2),
                                 "extra": torch.nn.Linear(5, 1)})
    final["a"].load_state_dict(source["a"].state_dict())  # same name, same values
    final["renamed"].load_state_dict(source["b"].state_dict())  # a copy under another name (adapt_ar)
    read = {n: p.detach() for n, p in source.named_parameters()}
    assert parameter_counts(read, final) == (16 + 10, 6, 6)  # extra: 5 + 1 new; gone: 4 + 2 dropped
    with torch.no_grad():
        final["a"].weight[0, 0] += 1  # a changed tensor is no longer the one loaded
    assert parameter_counts(read, final) == (4 + 10, 12 + 6, 12 + 6)
    assert parameter_counts(read, source) == (16 + 10 + 6, 0, 0)


def test_init_from_announces_what_it_loaded(tmp_path, caplog):
    tok = DNATokenizer()
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["data.seq_len=16"])
    torch.manual_seed(1)
    src = build_backbone("caduceus", preset="tiny", vocab_size=tok.vocab_size)
    save_model_dir(tmp_path / "m", cfg, src, tok)
    total = sum(p.numel() for p in src.parameters())
    run_cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm",
                          ["data.seq_len=16", f"model.init_from={tmp_path / 'm'}"])
    with caplog.at_level("INFO", logger="dnadiff"):
        _, backbone = build_backbone_for(run_cfg, tok, announce=True)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("model.init_from")]
    assert lines == [f"model.init_from: loaded {tmp_path / 'm'} (a dnadiff model directory): {total:,} parameters "
                     f"matched, 0 new, 0 dropped"]
    assert all(torch.equal(a, b) for a, b in zip(backbone.state_dict().values(), src.state_dict().values()))
    caplog.clear()
    with caplog.at_level("INFO", logger="dnadiff"):
        build_backbone_for(run_cfg, tok)  # a resumed run (announce off) says nothing: its weights are the checkpoint's
    assert not [r for r in caplog.records if "init_from" in r.getMessage()]


def test_adapted_ar_reports_new_parameters(tmp_path, caplog):
    """model.adapt_ar: the Caduceus-PH copies the AR's tensors under new names (matched by value); the
    reverse mixers' zeroed rows are new."""
    tok = DNATokenizer()
    torch.manual_seed(2)
    ar = build_backbone("mamba", preset="tiny", vocab_size=tok.vocab_size)
    save_model_dir(tmp_path / "ar", load_config(RunConfig, "experiments/tiny_dna_mdlm",
                                                ["model.backbone=mamba", "objective.name=ar"]), ar, tok)
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"model.init_from={tmp_path / 'ar'}",
                                                              "model.adapt_ar=true"])
    with caplog.at_level("INFO", logger="dnadiff"):
        _, backbone = build_backbone_for(cfg, tok, announce=True)
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("model.init_from"))
    ar_total = sum(p.numel() for p in ar.parameters())
    total = sum(p.numel() for p in backbone.parameters())
    matched, new, dropped = parameter_counts({n: p.detach() for n, p in ar.named_parameters()}, backbone)
    assert "adapted into a Caduceus-PH" in line and f"{matched:,} parameters matched, {new:,} new" in line
    assert matched + new == total and matched + dropped == ar_total and 0 < new < total and matched > ar_total // 2
