"""`dnadiff design` end to end on a tiny untrained model: FASTA + JSON for every method, templates
kept, rewards in the JSON equal to the reward of the written sequences, seeds reproducible, one-line
errors for bad input."""

from __future__ import annotations

import json

import pytest
import torch

from dnadiff.cli import main
from dnadiff.data import read_fasta
from dnadiff.guidance.rewards import build_reward
from dnadiff.tokenizers.dna import DNATokenizer
from helpers.cli_model import tiny_model_dir

TOK = DNATokenizer()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("design"), seq_len=16)


@pytest.mark.parametrize("method,options", [
    ("none", []), ("best_of_n", ["--option", "n=3"]), ("svdd", ["--option", "candidates=3"]),
    ("smc", ["--option", "particles=4", "--option", "alpha=0.05"]), ("cg", ["--option", "scale=20"]),
    ("cg_grad", ["--option", "scale=20"]),
])
def test_design_writes_fasta_and_rewards(model, tmp_path, method, options):
    torch.set_num_threads(1)
    out = tmp_path / f"{method}.fa"
    argv = ["design", model, "--reward", "gc:0.6", "--method", method, "--num", "3", "--length", "16",
            "--steps", "4", "--prefix", "ACGT", "--seed", "5", "--out", str(out), *options]
    assert main(argv) == 0
    recs = read_fasta(out)
    stats = json.loads(out.with_suffix(".json").read_text())
    assert len(recs) == 3 and all(len(s) == 16 and s.startswith("ACGT") and set(s) <= set("ACGT") for _, s in recs)
    x = torch.tensor([TOK.encode(s) for _, s in recs])
    want = build_reward("gc:0.6")(x)
    got = torch.tensor([r["reward"] for r in stats["rewards"]], dtype=torch.float64)
    assert torch.allclose(got, want)
    assert stats["method"] == method and stats["summary"]["reward_mean"] == pytest.approx(float(want.mean()))
    assert stats["denoiser_rows"] >= stats["denoiser_calls"] >= 1
    per = stats["summary"]["nfe_per_sequence"]
    if method == "best_of_n":
        assert per == 3 * 4 and stats["summary"]["reward_evals_per_sequence"] == 3
    if method == "none":
        assert per == 4 and stats["reward_calls"] == 0
    if method == "cg":
        assert stats["reward_calls"] > 3 * 4  # 4 bases × masked positions per call
    # the same seed gives the same designs
    again = tmp_path / f"{method}_again.fa"
    assert main(argv[:-len(options) - 2 if options else -2] + ["--out", str(again), *options]) == 0
    assert [s for _, s in read_fasta(again)] == [s for _, s in recs]


def test_guidance_raises_the_reward_over_unguided(model, tmp_path):
    torch.set_num_threads(1)
    common = ["--reward", "gc", "--num", "6", "--length", "16", "--steps", "4", "--seed", "1"]
    assert main(["design", model, *common, "--method", "none", "--out", str(tmp_path / "a.fa")]) == 0
    assert main(["design", model, *common, "--method", "svdd", "--option", "candidates=8",
                 "--out", str(tmp_path / "b.fa")]) == 0
    a = json.loads((tmp_path / "a.json").read_text())["summary"]["reward_mean"]
    b = json.loads((tmp_path / "b.json").read_text())["summary"]["reward_mean"]
    assert b > a + 0.1


@pytest.mark.parametrize("args,message", [
    (["--reward", "gc:2"], r"GC target must be in \[0, 1\]"),
    (["--reward", "gc", "--method", "magic"], "unknown; choose from"),
    (["--reward", "gc", "--method", "smc", "--option", "n=3"],
     "--option n: not an option of --method smc; valid options: particles (int"),
    (["--reward", "gc", "--method", "best_of_n", "--option", "n=abc"],
     "--option n=.abc.: --method best_of_n expects int"),
    (["--reward", "gc", "--method", "cg", "--option", "scale=abc"], "--option scale=.abc.: --method cg expects float"),
    (["--reward", "gc", "--method", "smc", "--option", "particles=[1]"], "--method smc expects int"),
    (["--reward", "gc", "--method", "svdd", "--option", "candidates=0"], "candidates must be >= 1"),
    (["--reward", "gc", "--num", "0"], "--num must be positive"),
    (["--reward", "gc", "--target", "coding"], "--target applies to"),
    (["--reward", "gc", "--sampler", "semi_ar"], "guidance wraps"),
    (["--reward", "gc", "--option", "oops"], "expected KEY=VALUE"),
])
def test_bad_design_input_is_one_line(model, tmp_path, capsys, args, message):
    out = tmp_path / "x.fa"
    rc = main(["design", model, "--length", "16", "--steps", "2", "--out", str(out), *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert message in err or __import__("re").search(message, err)
    assert not out.exists()


def test_design_print_config(model, capsys):
    import yaml

    assert main(["design", model, "--reward", "gc", "--method", "smc", "--option", "particles=8",
                 "--out", "x.fa", "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["method"] == "smc" and printed["option"] == {"particles": 8}


def test_rc_symmetric_design_reports_the_strand_averaged_reward(model, tmp_path):
    torch.set_num_threads(1)
    out = tmp_path / "rc.fa"
    assert main(["design", model, "--reward", "motif:ACG", "--method", "svdd", "--option", "candidates=2",
                 "--rc-symmetric", "--num", "2", "--length", "16", "--steps", "3", "--out", str(out)]) == 0
    stats = json.loads(out.with_suffix(".json").read_text())
    x = torch.tensor([TOK.encode(s) for _, s in read_fasta(out)])
    r = build_reward("motif:ACG")
    want = 0.5 * (r(x) + r(torch.tensor(TOK.reverse_complement(x))))
    assert stats["reward"] == "rc(motif:ACG)" and stats["rc_symmetric"] is True
    assert torch.allclose(torch.tensor([v["reward"] for v in stats["rewards"]], dtype=torch.float64), want)


class NotWeights:  # any object outside torch's weights-only allow-list
    pass


def test_pickled_classifier_file_is_one_error_line(model, tmp_path, capsys):
    """A classifier directory whose classifier.pt is a pickle of arbitrary objects: refused in one
    `error:` line naming the file, never torch's suggestion to retry with weights_only=False."""
    import pickle

    from dnadiff.backbones import build_backbone
    from dnadiff.heads.classifier import SequenceClassifier
    from dnadiff.heads.saved import save_classifier_dir

    clf = SequenceClassifier(build_backbone("hyena", preset="tiny", vocab_size=12), 2).eval()
    folder = save_classifier_dir(tmp_path / "clf", clf, ["neg", "pos"])
    with open(folder / "classifier.pt", "wb") as fh:
        pickle.dump({"weights": NotWeights()}, fh)
    out = tmp_path / "d.fa"
    rc = main(["design", model, "--reward", f"classifier:{folder}", "--length", "16", "--steps", "2",
               "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err, err
    assert str(folder / "classifier.pt") in err and "weights_only=False" not in err and "Traceback" not in err
    assert not out.exists()
