"""Reward-directed editing (dnadiff/guidance/editing.py) and `dnadiff edit`: greedy mutagenesis reaches the exact
optimum of a GC reward within M edits, no editor passes M, the header's edit list reproduces the output from the
input, and bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from dnadiff.cli import main
from dnadiff.data.records import read_fasta
from dnadiff.errors import DnadiffError
from dnadiff.guidance.editing import (
    MarkovProposer,
    RemaskEditor,
    apply_edits,
    edit_list,
    format_edits,
    greedy_edit,
)
from dnadiff.guidance.rewards import build_reward
from dnadiff.tokenizers import DNATokenizer
from helpers.cli_model import tiny_model_dir

TOK = DNATokenizer()


def ids(seq: str) -> torch.Tensor:
    return torch.tensor([TOK.encode(seq)])


def best_within(seq: str, reward, m: int) -> float:
    """The exact optimum over every sequence within m edits of seq (enumerated)."""
    x = ids(seq)[0]
    rows = [x]
    for k in range(1, m + 1):
        for pos in itertools.combinations(range(len(seq)), k):
            for bases in itertools.product(range(3), repeat=k):
                y = x.clone()
                for p, b in zip(pos, bases):
                    others = [t for t in TOK.nucleotide_ids if t != int(x[p])]
                    y[p] = others[b]
                rows.append(y)
    return float(reward(torch.stack(rows)).max())


@pytest.mark.parametrize("spec,seq,m", [("gc", "ATATTAGCATAT", 3), ("gc:0.5", "GGGCCGCGATGC", 2),
                                        ("gc:0.5", "ATATTAGCATAT", 3)])
def test_greedy_reaches_the_exact_optimum_within_m_edits(spec, seq, m):
    reward = build_reward(spec)
    out = greedy_edit(ids(seq), reward, m)
    assert float(out.reward_after[0]) == pytest.approx(best_within(seq, reward, m))
    assert int(out.edit_counts(ids(seq))[0]) <= m
    assert out.reward_calls >= 3 * len(seq) and out.network_calls == 0  # round 1 scores all 3 L single mutants


def test_greedy_keeps_protected_positions_and_stops_at_a_local_optimum():
    seq = "ATATATATAT"
    editable = torch.zeros(1, 10, dtype=torch.bool)
    editable[0, 6:] = True
    out = greedy_edit(ids(seq), build_reward("gc"), 8, editable)
    new = TOK.decode(out.x[0])
    assert new[:6] == seq[:6] and set(new[6:]) <= {"C", "G"}
    assert out.rounds == 5  # 4 improving rounds, then one that finds nothing better
    assert out.reward_calls == 3 * 4 + 3 * 4 + 3 * 4 + 3 * 4 + 3 * 4


def test_greedy_snapshots_are_exactly_the_smaller_budget_runs():
    """The path claim of greedy_edit(snapshot_at=...): the state after round m is the max_edits = m run's result,
    reward calls and rounds included, for a reward where every round improves and one that stops early."""
    gen = torch.Generator().manual_seed(0)
    weights = torch.randn(30, 12, generator=gen, dtype=torch.float64)  # a position-specific score of every id

    def linear(x):
        return weights[torch.arange(x.shape[1]), x].sum(dim=1)

    x0 = torch.stack([torch.tensor(TOK.encode(s)) for s in (("ACGT" * 8)[:30], ("TTGCA" * 6)[:30])])
    for reward in (linear, build_reward("gc:0.55")):  # gc:0.55: both rows reach it within 3 edits and stop
        whole = greedy_edit(x0, reward, 12, snapshot_at=(1, 3, 7))
        assert sorted(whole.snapshots) == [1, 3, 7]
        for m, snap in whole.snapshots.items():
            alone = greedy_edit(x0, reward, m)
            assert torch.equal(snap.x, alone.x) and torch.equal(snap.reward_after, alone.reward_after)
            assert (snap.reward_calls, snap.rounds) == (alone.reward_calls, alone.rounds)
            assert int(snap.edit_counts(x0).max()) <= m
        assert whole.snapshots[1].reward_calls == 2 * 3 * 30
        if reward is linear:
            assert whole.rounds == 12 and whole.snapshots[7].reward_calls < whole.reward_calls
        else:
            assert whole.rounds < 7 and torch.equal(whole.snapshots[7].x, whole.x)
    with pytest.raises(DnadiffError, match="below max_edits"):
        greedy_edit(x0, linear, 4, snapshot_at=(4,))


def test_edit_lists_round_trip():
    before, after = "ACGTACGT", "ACCTACGA"
    edits = edit_list(before, after)
    assert edits == [(3, "G", "C"), (8, "T", "A")] and format_edits(edits) == "3:G>C,8:T>A"
    assert apply_edits(before, format_edits(edits)) == after and apply_edits(before, "-") == before
    with pytest.raises(Exception, match="does not apply"):
        apply_edits(before, "3:A>C")


def test_markov_posterior_editor_stays_within_the_budget_and_never_lowers_the_reward():
    from dnadiff.backbones.markov import MarkovChain, MarkovConfig, count_ngrams

    rng = np.random.default_rng(0)
    chain = MarkovChain(MarkovConfig(order=2)).set_counts(count_ngrams(rng.choice(4, size=(8, 50)), 3))
    x0 = torch.tensor([TOK.encode("".join(rng.choice(list("ACGT"), 40))) for _ in range(3)])
    reward = build_reward("gc")
    for positions in ("saliency", "confidence", "random"):
        out = RemaskEditor(MarkovProposer(chain), rounds=4, candidates=3, positions=positions).edit(x0, reward, 5)
        assert bool((out.edit_counts(x0) <= 5).all()) and bool((out.reward_after >= out.reward_before).all())
        assert bool((out.reward_after > out.reward_before).any()) and out.network_calls == 0
        assert bool((reward(out.x) == out.reward_after).all())


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("edit"), seq_len=24)


def write_inputs(path, seqs):
    path.write_text("".join(f">s{i} native\n{s}\n" for i, s in enumerate(seqs)))
    return str(path)


SEQS = ["ACGTTGCAATATTAGCATATGCAT", "TTTTAAAACCCCGGGGATATATAT", "ATATATATATATATATATATATAT"]


@pytest.fixture(scope="module")
def markov_dir(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("edit_markov"), seq_len=24, overrides=[
        "model.backbone=markov", "model.preset=auto", "model.overrides.order=2", "objective.name=ar",
        "sample.sampler=autoregressive"])


@pytest.mark.parametrize("method", ["greedy", "remask", "markov"])
def test_edit_command_writes_edits_that_reproduce_the_output(tmp_path, model_dir, markov_dir, method):
    inp = write_inputs(tmp_path / "in.fa", SEQS)
    out = tmp_path / "out.fa"
    argv = ["edit", markov_dir if method == "markov" else model_dir, "--in", inp, "--reward", "gc", "--max-edits", "4",
            "--method", method,
            "--out", str(out), "--threads", "1", "-q", "--protect", "1-2"]
    if method != "greedy":
        argv += ["--rounds", "3", "--candidates", "2"]
    assert main(argv) == 0
    recs = read_fasta(out, full_headers=True)
    stats = json.loads((tmp_path / "out.json").read_text())
    tsv = (tmp_path / "out.tsv").read_text().splitlines()
    assert tsv[0] == "id\tposition\tfrom\tto"
    n_rows = 0
    for (header, new), old in zip(recs, SEQS):
        fields = dict(f.split("=", 1) for f in header.split()[1:])
        assert apply_edits(old, fields["edits"]) == new and new[:2] == old[:2]
        assert int(fields["n_edits"]) == len(edit_list(old, new)) <= 4
        assert float(fields["reward_after"]) >= float(fields["reward_before"])
        n_rows += int(fields["n_edits"])
    assert len(tsv) - 1 == n_rows
    assert stats["summary"]["edits_mean"] <= 4 and stats["reward_calls"] > 0
    if method == "remask":
        assert stats["network_calls"] > 0 and stats["positions"] == "saliency"
    else:
        assert stats["network_calls"] == 0


def test_also_at_writes_what_the_smaller_budget_runs_write(tmp_path, model_dir):
    inp = write_inputs(tmp_path / "in.fa", SEQS)
    base = ["edit", model_dir, "--in", inp, "--reward", "gc:0.6", "--method", "greedy", "--threads", "1", "-q"]
    assert main(base + ["--max-edits", "6", "--also-at", "4,1", "--out", str(tmp_path / "m6.fa")]) == 0
    for m in (1, 4):
        assert main(base + ["--max-edits", str(m), "--out", str(tmp_path / f"alone{m}.fa")]) == 0
        path = tmp_path / f"m6.m{m}.fa"
        assert read_fasta(path, full_headers=True) == read_fasta(tmp_path / f"alone{m}.fa", full_headers=True)
        assert (tmp_path / f"m6.m{m}.tsv").read_text() == (tmp_path / f"alone{m}.tsv").read_text()
        got, want = (json.loads((tmp_path / f"{stem}.json").read_text()) for stem in (f"m6.m{m}", f"alone{m}"))
        assert got["budget_of"] == 6 and want["budget_of"] is None
        for key in ("edits_mean", "reward_after_mean", "reward_calls_per_sequence", "max_edits"):
            assert got["summary"][key] == want["summary"][key]
    six = json.loads((tmp_path / "m6.json").read_text())["summary"]
    assert six["max_edits"] == 6 and six["reward_calls_per_sequence"] >= got["summary"]["reward_calls_per_sequence"]


BAD = [
    (["--max-edits", "0"], SEQS, "--max-edits must be at least 1"),
    (["--max-edits", "4", "--also-at", "2", "--method", "remask"], SEQS, "--also-at applies to --method greedy"),
    (["--max-edits", "4", "--also-at", "2,4", "--method", "greedy"], SEQS, "below --max-edits 4"),
    (["--max-edits", "4", "--also-at", "two", "--method", "greedy"], SEQS, "expected comma-separated integers"),
    (["--max-edits", "25"], SEQS, "above the length of record"),
    (["--max-edits", "2"], ["ACGTNACGTACGTACGTACGTACG"], "'N' at position 5, which may be edited"),
    (["--max-edits", "2"], ["ACGTRACGTACGTACGTACGTACG"], "'R' at position 5"),
    (["--max-edits", "2", "--reward", "motif:" + "A" * 30], SEQS, "longer than the sequences"),
    (["--max-edits", "2", "--method", "markov"], SEQS, "needs a Markov chain model"),
    (["--max-edits", "2", "--protect", "5-3"], SEQS, "--protect '5-3'"),
]


@pytest.mark.parametrize("extra,seqs,message", BAD)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, model_dir, capsys, extra, seqs, message):
    inp = write_inputs(tmp_path / "in.fa", seqs)
    argv = ["edit", model_dir, "--in", inp, "--out", str(tmp_path / "o.fa"), "--threads", "1", "-q"]
    if "--reward" not in extra:
        argv += ["--reward", "gc"]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.fa"]


def test_n_inside_a_protected_range_is_kept(tmp_path, model_dir):
    inp = write_inputs(tmp_path / "in.fa", ["NNGTTGCAATATTAGCATATGCAT"])
    assert main(["edit", model_dir, "--in", inp, "--reward", "gc", "--max-edits", "2", "--method", "greedy",
                 "--protect", "1-2", "--out", str(tmp_path / "o.fa"), "--threads", "1", "-q"]) == 0
    (_, new), = read_fasta(tmp_path / "o.fa")
    assert new.startswith("NN") and len(edit_list("NNGTTGCAATATTAGCATATGCAT", new)) == 2


def test_a_model_that_cannot_read_the_length_is_refused(tmp_path, capsys):
    short = tiny_model_dir(tmp_path / "h", seq_len=16, overrides=["model.backbone=hyena", "model.overrides.l_max=16"])
    inp = write_inputs(tmp_path / "in.fa", SEQS)
    assert main(["edit", short, "--in", inp, "--reward", "gc", "--max-edits", "2", "--method", "greedy",
                 "--out", str(tmp_path / "o.fa"), "--threads", "1", "-q"]) == 2
    assert "reads at most 16 bases" in capsys.readouterr().err
    assert not (tmp_path / "o.fa").exists()
