"""Contracts of every registered reward, tokenizer and official checkpoint format, the names taken from the
registries: a new extension is tested by registering it (samplers: test_sampler_contract.py; objectives:
test_objectives.py; guidance methods: test_guidance_methods.py; backbones: test_backbone_contract.py)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from dnadiff.backbones import BACKBONES
from dnadiff.backbones.formats import CHECKPOINT_FORMATS, CheckpointFormat
from dnadiff.diffusion import OBJECTIVES
from dnadiff.guidance.rewards import REWARDS, Reward, build_reward, rc_averaged, reward_specs, soft_support
from dnadiff.tokenizers import TOKENIZERS, DNATokenizer, Tokenizer, build_tokenizer

DNA = DNATokenizer()
# what the placeholders of a reward's `spec_help` stand for in these tests (DIR: a saved classifier); a
# reward whose spec needs a new kind of argument adds it here
PLACEHOLDERS = {"TARGET": "0.4", "SEQ": "ACG"}


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    from dnadiff.backbones import build_backbone
    from dnadiff.heads.classifier import SequenceClassifier
    from dnadiff.heads.saved import save_classifier_dir

    torch.manual_seed(0)
    clf = SequenceClassifier(build_backbone("hyena", preset="tiny", vocab_size=DNA.vocab_size), 2).eval()
    return str(save_classifier_dir(tmp_path_factory.mktemp("clf") / "c", clf, ["neg", "pos"]))


def _specs(name: str, classifier_dir: str) -> list[str]:
    """Every form of `name`'s spec_help ("gc | gc:TARGET" -> "gc", "gc:0.4") with its placeholder filled."""
    forms = [f.strip() for f in REWARDS.get(name).spec_help.split("|")]
    assert forms and all(f.partition(":")[0] == name for f in forms), f"{name}: spec_help {forms}"
    values = {**PLACEHOLDERS, "DIR": classifier_dir}
    return [re.sub(r"[A-Z]+", lambda m: values[m.group(0)], f) for f in forms]


@pytest.mark.parametrize("name", REWARDS.names())
def test_every_registered_reward_scores_by_its_spec(name, classifier_dir):
    cls = REWARDS.get(name)
    assert issubclass(cls, Reward) and cls.spec_help and cls.spec_help in reward_specs()
    x = torch.randint(7, 11, (5, 12), generator=torch.Generator().manual_seed(0))
    x[0, :3] = DNA.mask_id  # masks count as no base
    for spec in _specs(name, classifier_dir):
        reward = build_reward(spec, target="pos" if cls.takes_target else None)
        assert isinstance(reward, cls)
        r = reward(x)
        assert r.dtype == torch.float64 and r.shape == (5,) and bool(torch.isfinite(r).all()) and reward.calls == 5
        assert torch.equal(r, reward(x.clone()))  # deterministic
        unit = reward.strength_unit(12)
        assert unit is None or unit > 0
        # its strand average is symmetric: r̄(x) = r̄(rc(x))
        avg = rc_averaged(reward, DNA.complement_map())
        rc = torch.as_tensor(DNA.complement_map())[x].flip(1)
        torch.testing.assert_close(avg(x), avg(rc), rtol=1e-6, atol=1e-6)
        if soft_support(reward) is None:  # its relaxed score agrees with the hard one on one-hot input
            onehot = torch.nn.functional.one_hot(x, DNA.vocab_size).double()
            torch.testing.assert_close(reward.soft(onehot).double(), reward(x), rtol=1e-5, atol=1e-5)


def _tokenizer(kind: str, tmp_path) -> Tokenizer:
    """A tokenizer of `kind` from its config: without a path when it takes none, else a small local one."""
    try:
        return TOKENIZERS.get(kind).from_config(None)
    except Exception:
        from test_text_tokenizer import _train_local_tokenizer

        _train_local_tokenizer(tmp_path, with_mask=True)
        return TOKENIZERS.get(kind).from_config(str(tmp_path))


@pytest.mark.parametrize("kind", TOKENIZERS.names())
def test_every_registered_tokenizer_declares_what_models_take(kind, tmp_path):
    tok = _tokenizer(kind, tmp_path)
    assert isinstance(tok, Tokenizer) and tok.kind == kind
    assert type(build_tokenizer(kind, None if kind == "dna" else str(tmp_path))) is type(tok)
    V = tok.vocab_size
    content, never = set(tok.content_ids), set(tok.never_sampled_ids)
    assert content and content <= set(range(V)) and never <= set(range(V)) and not content & never
    assert tok.mask_id not in content and tok.pad_id in never and tok.mask_id != tok.pad_id
    assert tok.ar_context_id is None or 0 <= tok.ar_context_id < V
    ids = tok.encode("ACGT" if kind == "dna" else "hello world")
    assert ids and all(0 <= i < V for i in ids)


@pytest.mark.parametrize("name", CHECKPOINT_FORMATS.names())
def test_every_registered_format_declares_what_it_becomes(name, tmp_path):
    fmt = CHECKPOINT_FORMATS.get(name)
    assert issubclass(fmt, CheckpointFormat)
    assert fmt.backbone in BACKBONES and fmt.objective in OBJECTIVES
    OBJECTIVES.check_options(fmt.objective, dict(fmt.objective_options), "objective_options", exclude=("schedule",))
    assert fmt.detect(tmp_path) is False  # an empty folder is no checkpoint
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "dnadiff"}))
    assert fmt.detect(tmp_path) is False  # a dnadiff model directory is not an official one
