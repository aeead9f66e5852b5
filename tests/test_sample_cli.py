"""`dnadiff sample` and `dnadiff metrics` end to end on a tiny model trained on the bundled chr22 sample."""

import json
import math

import pytest

from dnadiff.cli import main
from dnadiff.config import RunConfig, load_config
from dnadiff.data import bundled_genome, read_fasta
from dnadiff.training import train


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [
        f"out_dir={out}", "data.seq_len=32", "train.batch_size=4", "train.max_steps=3", "train.progress=false",
        "train.val_every=3", "train.ckpt_every=3"])
    return str(train(cfg).model_dir)


@pytest.mark.training
def test_sample_with_prefix_suffix(tiny_model, tmp_path):
    out = tmp_path / "s.fa"
    rc = main(["sample", tiny_model, "--num", "3", "--length", "40", "--steps", "8", "--sampler", "cached",
               "--prefix", "ACGTACGT", "--suffix", "TTTT", "--out", str(out)])
    assert rc == 0
    recs = read_fasta(out)
    assert len(recs) == 3
    for _, seq in recs:
        assert len(seq) == 40 and seq.startswith("ACGTACGT") and seq.endswith("TTTT") and set(seq) <= set("ACGT")
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["num"] == 3 and stats["nfe_total"] >= 1 and stats["tokens_per_second"] > 0
    # per sequence: the cached sampler evaluates a sequence only when it changed (at most every call)
    assert stats["denoiser_rows"] <= 3 * stats["nfe_total"] and stats["nfe_per_sequence"] == stats["denoiser_rows"] / 3
    assert 1 <= stats["nfe_per_sequence_min"] <= stats["nfe_per_sequence_max"] <= stats["nfe_total"]


def test_sample_template_and_rc_symmetric(tiny_model, tmp_path):
    tmpl = tmp_path / "t.fa"
    tmpl.write_text(">a\nACGTNNNNNNNNGGCC\n")
    out = tmp_path / "f.fa"
    assert main(["sample", tiny_model, "--num", "2", "--length", "16", "--steps", "4", "--template-fasta", str(tmpl),
                 "--rc-symmetric", "--out", str(out)]) == 0
    for _, seq in read_fasta(out):
        assert seq[:4] == "ACGT" and seq[-4:] == "GGCC" and "N" not in seq


def test_sample_bad_input(tiny_model, tmp_path, capsys):
    assert main(["sample", tiny_model, "--num", "1", "--length", "4", "--prefix", "ACGTACGT",
                 "--out", str(tmp_path / "x.fa")]) == 2
    assert "do not fit" in capsys.readouterr().err
    assert main(["sample", tiny_model, "--num", "1", "--length", "8", "--sampler", "nope",
                 "--out", str(tmp_path / "x.fa")]) == 2
    assert "unknown sampler 'nope'" in capsys.readouterr().err
    assert main(["sample", tiny_model, "--num", "1", "--length", "8", "--class", "coding",
                 "--out", str(tmp_path / "x.fa")]) == 2
    assert "not class-conditional" in capsys.readouterr().err
    assert not (tmp_path / "x.fa").exists()


def test_metrics_genome_reference_and_oracle(tiny_model, tmp_path):
    out = tmp_path / "s.fa"
    assert main(["sample", tiny_model, "--num", "4", "--length", "64", "--steps", "8", "--out", str(out)]) == 0
    fasta, bed = bundled_genome()
    mdir = tmp_path / "m"
    assert main(["metrics", str(out), "--reference", fasta, "--bed", bed, "--split", "test", "--oracle", tiny_model,
                 "--max-reference-windows", "100", "--kmax", "3", "--markov-order", "2", "--no-plots",
                 "--out", str(mdir)]) == 0
    res = json.loads((mdir / "metrics.json").read_text())
    assert res["oracle"]["kind"] == "bound" and res["oracle"]["samples_perplexity"] > 1.0
    assert res["oracle"]["real_perplexity"] > 1.0
    # the same numbers from the bound computed directly (DiffusionModel.nll, one batch, the --seed 0 draws):
    # perplexity = exp(summed NLL / summed tokens) over the samples, and over the first 4 reference windows
    import torch

    import dnadiff
    from dnadiff.data import genome_reference

    model = dnadiff.load(tiny_model)
    real = genome_reference(fasta, bed, "test", 64, 100)[:4]
    for name, seqs in (("samples", [s for _, s in read_fasta(out)]), ("real", real)):
        x0 = torch.stack([torch.as_tensor(model.tokenizer.encode(s)) for s in seqs])
        loss = model.nll(x0, x0 != model.tokenizer.n_id, generator=torch.Generator().manual_seed(0))
        bits = float(loss.nll.double().sum() / loss.num_tokens.double().sum()) / math.log(2)
        assert res["oracle"][f"{name}_bits_per_base"] == pytest.approx(bits, rel=1e-6), name
        assert res["oracle"][f"{name}_perplexity"] == pytest.approx(2 ** bits, rel=1e-6), name
    assert res["oracle"]["ratio_samples_to_real"] == pytest.approx(
        res["oracle"]["samples_perplexity"] / res["oracle"]["real_perplexity"])


def test_samples_do_not_depend_on_batch_size(tiny_model, tmp_path):
    """Counter-based seeds: --batch-size 2, 4 and 6 give the same FASTA, byte for byte."""
    texts = []
    for bs in (2, 4, 6):
        out = tmp_path / f"b{bs}.fa"
        assert main(["sample", tiny_model, "--num", "6", "--length", "24", "--steps", "6", "--batch-size", str(bs),
                     "--seed", "11", "--out", str(out)]) == 0
        texts.append(out.read_text())
    assert texts[0] == texts[1] == texts[2]
    other = tmp_path / "s12.fa"
    assert main(["sample", tiny_model, "--num", "6", "--length", "24", "--steps", "6", "--seed", "12",
                 "--out", str(other)]) == 0
    assert other.read_text() != texts[0]  # and the seed matters


def test_default_batch_size_on_cpu_is_a_token_budget(tiny_model, tmp_path, monkeypatch):
    """Without --batch-size a CPU diffusion run is split into calls of ~CPU_TOKENS_PER_CALL tokens (the
    same samples as one call: the streams are per sequence); an explicit --batch-size is kept."""
    from dnadiff.commands import sample

    monkeypatch.setattr(sample, "CPU_TOKENS_PER_CALL", 48)  # 48 tokens = 2 sequences of 24
    out, one = tmp_path / "d.fa", tmp_path / "one.fa"
    assert main(["sample", tiny_model, "--num", "5", "--length", "24", "--steps", "4", "--out", str(out)]) == 0
    assert json.loads((tmp_path / "d.json").read_text())["batch_size"] == 2
    assert main(["sample", tiny_model, "--num", "5", "--length", "24", "--steps", "4", "--batch-size", "5",
                 "--out", str(one)]) == 0
    assert json.loads((tmp_path / "one.json").read_text())["batch_size"] == 5
    assert out.read_text() == one.read_text()
    monkeypatch.setattr(sample, "CPU_TOKENS_PER_CALL", 8)  # shorter than one sequence: one per call
    assert main(["sample", tiny_model, "--num", "3", "--length", "24", "--steps", "4", "--out", str(out),
                 "--force"]) == 0
    assert json.loads((tmp_path / "d.json").read_text())["batch_size"] == 1


def test_sample_json_records_steps_and_first_hitting_rejects_steps(tiny_model, tmp_path, capsys):
    out = tmp_path / "a.fa"
    assert main(["sample", tiny_model, "--num", "2", "--length", "16", "--steps", "5", "--sampler", "ancestral",
                 "--out", str(out)]) == 0
    stats = json.loads((tmp_path / "a.json").read_text())
    assert stats["steps"] == 5 and 1 <= stats["steps_used"] <= 5
    assert stats["eps"] == 1e-3  # the model's training t_min, not the reference's 1e-5
    fh = tmp_path / "fh.fa"
    assert main(["sample", tiny_model, "--num", "2", "--length", "16", "--sampler", "first_hitting",
                 "--out", str(fh)]) == 0
    stats = json.loads((tmp_path / "fh.json").read_text())
    assert stats["steps"] is None and stats["steps_used"] == 16  # one step per generated token
    assert main(["sample", tiny_model, "--num", "2", "--length", "16", "--steps", "8", "--sampler", "first_hitting",
                 "--out", str(tmp_path / "x.fa")]) == 2
    assert "first_hitting" in capsys.readouterr().err and not (tmp_path / "x.fa").exists()


def test_sampling_never_queries_below_training_t_min(tiny_model):
    """The grid, noise removal and first_hitting stay at t >= objective.t_min."""
    import dnadiff

    model = dnadiff.load(tiny_model)
    t_min = model.config.objective.t_min
    for name, steps in (("ancestral", 8), ("first_hitting", None), ("remdm", 8)):
        seen = []

        def recorder(x, t, _den=model.denoiser):
            seen.append(float(t.min()))
            return _den(x, t)

        smp = model.build_sampler(name, steps)
        assert smp.eps == t_min
        smp.generate(recorder, model.schedule, model.tokenizer.mask_id, (2, 12), generator=0)
        assert min(seen) >= t_min * (1 - 1e-6), name
    from dnadiff.errors import DnadiffError

    with pytest.raises(DnadiffError, match="t_min"):
        model.build_sampler("ancestral", 8, eps=1e-5)


@pytest.mark.training
def test_sampling_past_the_trained_length_warns_and_names_semi_ar(tiny_model, tmp_path, capsys):
    # results/mdlm_diagnosis.md: samples drift beyond the trained window; the warning says how to avoid it
    assert main(["sample", tiny_model, "--num", "1", "--length", "64", "--steps", "4", "--seed", "0",
                 "--out", str(tmp_path / "long.fa"), "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert "--length 64 is longer than the 32-token windows" in err
    assert "--sampler semi_ar --option window=32 --option stride=16" in err
    assert main(["sample", tiny_model, "--num", "1", "--length", "64", "--steps", "4", "--seed", "0",
                 "--sampler", "semi_ar", "--option", "window=32", "--option", "stride=16",
                 "--out", str(tmp_path / "windows.fa"), "--threads", "1"]) == 0
    assert "longer than the" not in capsys.readouterr().err
    assert main(["sample", tiny_model, "--num", "1", "--length", "32", "--steps", "4", "--seed", "0",
                 "--out", str(tmp_path / "short.fa"), "--threads", "1"]) == 0
    assert "longer than the" not in capsys.readouterr().err
