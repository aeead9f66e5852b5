import pytest

from dnadiff.errors import DnadiffError
from dnadiff.tokenizers import TextTokenizer, build_tokenizer


def _train_local_tokenizer(path, with_mask: bool):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = ["[UNK]", "<eos>"] + (["[MASK]"] if with_mask else [])
    tok.train_from_iterator(["the cat sat on the mat", "a dog ran"], trainers.WordLevelTrainer(special_tokens=specials))
    kwargs = {"unk_token": "[UNK]", "eos_token": "<eos>"}
    if with_mask:
        kwargs["mask_token"] = "[MASK]"
    PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs).save_pretrained(str(path))


@pytest.mark.parametrize("with_mask", [True, False])
def test_local_tokenizer_gets_distinct_mask_and_pad(tmp_path, with_mask):
    _train_local_tokenizer(tmp_path, with_mask)
    tok = build_tokenizer("text", str(tmp_path))
    assert isinstance(tok, TextTokenizer)
    assert tok.mask_id != tok.pad_id
    assert tok.mask_id < tok.vocab_size and tok.pad_id < tok.vocab_size
    ids = tok.encode("the cat sat")
    assert tok.decode(ids) == "the cat sat"


def test_missing_tokenizer_is_a_clean_error(tmp_path):
    with pytest.raises(DnadiffError, match="no tokenizer folder there; set tokenizer.train") as err:
        TextTokenizer(str(tmp_path / "no-such-tokenizer"))
    assert "huggingface" not in str(err.value).lower() and "\n" not in str(err.value)
    with pytest.raises(DnadiffError, match="fetch it once with: python -c") as err:
        TextTokenizer("no-such-hub-tokenizer")
    assert "huggingface.co" not in str(err.value) and "\n" not in str(err.value)
