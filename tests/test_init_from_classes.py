"""`model.init_from` an unconditional DNA model into a class-conditional run (issue 47 §4: the chr22 MDLM as the
start of the conditional DHS MDLM): the shared network is copied, the class embedding and the backbone's cond_proj
are new (and reported as new), the model starts as the pretrained one for every label, and the DHS class names are
recorded; a model of another tokenizer is refused in one line."""

import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.config import RunConfig, replace
from dnadiff.config_options import load_config
from dnadiff.data.dhs import CELL_TYPES
from dnadiff.errors import DnadiffError
from dnadiff.modelio.model_dir import save_model_dir
from dnadiff.tokenizers import DNATokenizer
from dnadiff.training.init_labels import check_same_tokenizer
from dnadiff.training.run import build_backbone_for


@pytest.fixture(scope="module")
def chr22_model(tmp_path_factory):
    """A tiny unconditional Caduceus MDLM with the cpu-hour chr22 recipe's architecture (d64 x 2, cond_dim 0)."""
    tok = DNATokenizer()
    cfg = load_config(RunConfig, "experiments/cpu_hour_caduceus_mdlm", [])
    torch.manual_seed(4)
    src = build_backbone("caduceus", preset="tiny", vocab_size=tok.vocab_size, d_model=64, n_layer=2)
    path = tmp_path_factory.mktemp("chr22") / "model"
    save_model_dir(path, cfg, src, tok)
    return path, src


def test_chr22_model_initialises_the_conditional_dhs_model(chr22_model, caplog):
    path, src = chr22_model
    tok = DNATokenizer()
    cfg = load_config(RunConfig, "experiments/dhs_cond_mdlm", [f"model.init_from={path}"])
    with caplog.at_level("INFO", logger="dnadiff"):
        out_cfg, backbone = build_backbone_for(cfg, tok, announce=True)
    inner = backbone.backbone
    src_state = src.state_dict()
    assert set(inner.state_dict()) - set(src_state) == {"cond_proj.weight"}
    assert all(torch.equal(inner.state_dict()[k], v) for k, v in src_state.items())  # the shared network, copied
    assert torch.count_nonzero(inner.cond_proj.weight) == 0 and inner.cond_proj.weight.shape == (64, 32)
    assert backbone.label_embed.weight.shape == (len(CELL_TYPES) + 1, 32)
    total = sum(p.numel() for p in src.parameters())
    new = 64 * 32 + (len(CELL_TYPES) + 1) * 32
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("model.init_from"))
    assert line.endswith(f"{total:,} parameters matched, {new:,} new, 0 dropped")
    assert out_cfg.model.class_names == list(CELL_TYPES) and out_cfg.model.overrides["cond_dim"] == 32
    x = torch.randint(7, 11, (3, 40))
    t = torch.full((3,), 0.5)
    backbone.eval()
    with torch.no_grad():  # cond_proj at zero: every label starts as the pretrained network
        ref = src.eval()(x, t)
        for label in (0, 2, None):
            assert torch.allclose(backbone(x, t, labels=label), ref, atol=1e-6)


def test_another_tokenizer_is_refused(chr22_model):
    path, _ = chr22_model
    source = load_config(RunConfig, "experiments/cpu_hour_caduceus_mdlm", [])
    run = replace(load_config(RunConfig, "experiments/dhs_cond_mdlm", [f"model.init_from={path}"]),
                  **{"tokenizer.kind": "text", "tokenizer.path": "bert-base-uncased"})
    with pytest.raises(DnadiffError, match="uses the dna tokenizer, this run the text tokenizer bert-base-uncased"):
        check_same_tokenizer(source, run, str(path))
    check_same_tokenizer(source, replace(run, **{"tokenizer.kind": "dna", "tokenizer.path": None}), str(path))
