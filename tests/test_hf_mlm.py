"""HF masked-LM adapter: contract basics, resize for added tokens, MDLM fine-tuning, model-dir round trip."""

import shutil

import pytest
import torch

import dnadiff
from dnadiff.backbones import build_backbone
from dnadiff.config import RunConfig, from_dict
from dnadiff.data.tokenizer_training import train_tokenizer
from dnadiff.diffusion import build_objective, build_schedule
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers import TextTokenizer

TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the dog and the cat are friends"] * 3


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    corpus = root / "c.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    return TextTokenizer(train_tokenizer([corpus], root / "bert", "bert-like", vocab_size=300, min_frequency=1))


def _batch(tok, L=10):
    rows = []
    for t in TEXTS[:3]:
        ids = [tok.bos_id] + tok.encode(t)[: L - 2] + [tok.eos_id]
        rows.append(ids + [tok.pad_id] * (L - len(ids)))
    x0 = torch.tensor(rows)
    return x0, (x0 != tok.pad_id).long()


def test_tiny_shapes_and_time_ignored(tok):
    torch.manual_seed(0)
    bb = build_backbone("hf_mlm", preset="tiny", vocab_size=tok.vocab_size).eval()
    x0, _ = _batch(tok)
    with torch.no_grad():
        a, b = bb(x0, torch.full((3,), 0.2)), bb(x0, torch.full((3,), 0.9))
    assert a.shape == (3, x0.shape[1], tok.vocab_size) and a.dtype == torch.float32
    assert torch.equal(a, b)
    assert bb.features(x0).shape == (3, x0.shape[1], 64)


def test_from_pretrained_resizes_for_added_tokens(tmp_path):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    hf = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                    intermediate_size=64)).eval()
    hf.save_pretrained(str(tmp_path / "bert"))
    bb = build_backbone("hf_mlm", preset="from_pretrained", path=str(tmp_path / "bert"), vocab_size=52).eval()
    assert bb.vocab_size == 52 and bb.config.hf_config["vocab_size"] == 52
    x = torch.randint(0, 50, (2, 7))
    with torch.no_grad():
        ref = hf(input_ids=x).logits  # (2, 7, 50)
        got = bb(x)
    assert got.shape == (2, 7, 52)
    torch.testing.assert_close(got[..., :50], ref, rtol=1e-4, atol=1e-4)  # pretrained weights kept
    with pytest.raises(DnadiffError, match="path"):
        build_backbone("hf_mlm", preset="from_pretrained", vocab_size=52)
    with pytest.raises(DnadiffError, match="not found locally"):
        build_backbone("hf_mlm", preset="from_pretrained", path=str(tmp_path / "missing"), vocab_size=52)


def test_mdlm_finetune_steps_and_model_dir_round_trip(tok, tmp_path):
    from dnadiff.modelio.model_dir import save_model_dir

    torch.manual_seed(0)
    bb = build_backbone("hf_mlm", preset="tiny", vocab_size=tok.vocab_size)
    obj = build_objective("mdlm", schedule=build_schedule("loglinear"), mask_id=tok.mask_id, vocab_size=tok.vocab_size)
    x0, am = _batch(tok)
    opt = torch.optim.AdamW(bb.parameters(), lr=3e-3)

    def denoiser(x_t, t):
        return bb(x_t, None)

    def eval_loss():
        bb.eval()
        with torch.no_grad():
            g = torch.Generator().manual_seed(7)
            return sum(obj.loss(denoiser, x0, am, generator=g).loss.item() for _ in range(4)) / 4

    before = eval_loss()
    for step in range(25):
        bb.train()
        out = obj.loss(denoiser, x0, am, generator=torch.Generator().manual_seed(step))
        opt.zero_grad()
        out.loss.backward()
        opt.step()
    after = eval_loss()
    assert after < 0.7 * before, (before, after)

    cfg = from_dict(RunConfig, {"name": "bert_ft", "tokenizer": {"kind": "text", "path": tok.name_or_path},
                                "model": {"backbone": "hf_mlm", "preset": "tiny"},
                                "objective": {"name": "mdlm"}, "data": {"kind": "text", "seq_len": 10}})
    save_model_dir(tmp_path / "model", cfg, bb, tokenizer=tok, metrics={"loss": after})
    model = dnadiff.load(tmp_path / "model")
    assert model.config.model.backbone == "hf_mlm" and model.tokenizer.vocab_size == tok.vocab_size
    bb.eval()
    with torch.no_grad():
        torch.testing.assert_close(model.backbone(x0), bb(x0), rtol=0, atol=0)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert model.nll(x0, am, generator=g1).nll.tolist() == obj.loss(denoiser, x0, am, generator=g2).nll.tolist()


def test_pretrained_model_dir_loads_without_the_original_folder(tok, tmp_path):
    from transformers import BertConfig, BertForMaskedLM

    from dnadiff.modelio.model_dir import save_model_dir

    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(str(tmp_path / "bert"))
    bb = build_backbone("hf_mlm", preset="from_pretrained", path=str(tmp_path / "bert"),
                        vocab_size=tok.vocab_size).eval()
    cfg = from_dict(RunConfig, {"tokenizer": {"kind": "text", "path": tok.name_or_path},
                                "model": {"backbone": "hf_mlm", "preset": "from_pretrained"},
                                "objective": {"name": "mdlm"}, "data": {"kind": "text", "seq_len": 10}})
    save_model_dir(tmp_path / "model", cfg, bb, tokenizer=tok)
    shutil.rmtree(tmp_path / "bert")
    model = dnadiff.load(tmp_path / "model")
    x0, _ = _batch(tok)
    with torch.no_grad():
        torch.testing.assert_close(model.backbone(x0), bb(x0), rtol=0, atol=0)
