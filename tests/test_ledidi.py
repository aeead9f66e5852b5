"""Ledidi editing (dnadiff/guidance/ledidi.py, `dnadiff edit --method ledidi`): on rewards whose optimum within M
edits is known by enumeration it reaches that optimum, it never passes M, a large edit cost makes no edit, a seed
fixes the output, and a reward without a gradient is refused in one line with nothing written."""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from dnadiff.cli import main
from dnadiff.data.records import read_fasta
from dnadiff.guidance.editing import apply_edits
from dnadiff.guidance.ledidi import ledidi_edit, roll_back
from dnadiff.guidance.rewards import build_reward
from dnadiff.tokenizers import DNATokenizer
from helpers.cli_model import tiny_model_dir

TOK = DNATokenizer()


class Linear:
    """r(x) = Σ_i w[i, x_i]: the optimum within M edits takes the M largest per-position gains."""

    name = "linear"

    def __init__(self, w: torch.Tensor):
        self.w, self.calls = w, 0  # (L, V)

    def __call__(self, x):
        self.calls += x.shape[0]
        return self.w[torch.arange(x.shape[1]), x].sum(1)

    def soft(self, onehot):
        return (onehot * self.w).sum((1, 2))


def ids(*seqs: str) -> torch.Tensor:
    return torch.tensor([TOK.encode(s) for s in seqs])


def best_within(x: torch.Tensor, reward, m: int) -> float:
    """The exact optimum over every sequence within m edits of x (enumerated)."""
    rows = []
    for k in range(m + 1):
        for pos in itertools.combinations(range(x.shape[0]), k):
            for bases in itertools.product(TOK.nucleotide_ids, repeat=k):
                y = x.clone()
                y[list(pos)] = torch.tensor(bases, dtype=torch.long)
                if int((y != x).sum()) == k:
                    rows.append(y)
    return float(reward(torch.stack(rows)).max())


@pytest.mark.parametrize("m", [1, 2, 3])
def test_ledidi_reaches_the_enumerated_optimum_of_a_linear_reward(m):
    w = torch.randn(8, TOK.vocab_size, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    reward = Linear(w)
    x0 = ids("ACGTACGT", "TTTTAAAA")
    out = ledidi_edit(x0, reward, m, edit_cost=0.01, steps=60, seed=0)
    for b in range(2):  # the small edit cost: every positive gain is wanted, the roll-back keeps the M best
        assert float(out.reward_after[b]) == pytest.approx(best_within(x0[b], reward, m))
    assert out.edit_counts(x0).tolist() == [m, m] and out.network_calls == 0
    assert torch.equal(reward(out.x), out.reward_after)
    assert out.reward_calls >= 2 * 8  # at least one step of 8 draws for each of the 2 sequences


def test_ledidi_finds_a_motif_one_edit_away_and_not_one_four_away():
    reward = build_reward("motif:TATA")  # palindromic: a site counts twice
    x0 = ids("GCTACAGCGC", "GCGCGCGCGC")
    out = ledidi_edit(x0, reward, 2, edit_cost=0.01, steps=100, seed=0)
    assert out.reward_after.tolist() == [best_within(x0[0], reward, 2), best_within(x0[1], reward, 2)] == [2.0, 0.0]
    assert out.edit_counts(x0).tolist() == [1, 0]  # the unhelpful edits cost λ each: none kept


def test_a_large_edit_cost_makes_no_edit_and_the_seed_fixes_the_output():
    w = torch.randn(12, TOK.vocab_size, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    x0 = ids("ACGTACGTACGT")
    none = ledidi_edit(x0, Linear(w), 4, edit_cost=100.0, steps=20, seed=0)
    assert torch.equal(none.x, x0) and torch.equal(none.reward_after, none.reward_before)
    a, b, c = (ledidi_edit(x0, Linear(w), 6, edit_cost=0.5, steps=30, tau=2.0, seed=s) for s in (3, 3, 4))
    assert torch.equal(a.x, b.x) and a.reward_calls == b.reward_calls
    assert int(a.edit_counts(x0)[0]) <= 6 and int(c.edit_counts(x0)[0]) <= 6


def test_protected_positions_are_never_edited_and_the_budget_holds():
    reward = build_reward("gc")
    x0 = ids("NNATATATATATATAT", "ATATATATATATATAT")
    editable = torch.ones_like(x0, dtype=torch.bool)
    editable[:, :4] = False
    out = ledidi_edit(x0, reward, 3, editable, edit_cost=0.001, steps=40, seed=0)
    assert torch.equal(out.x[:, :4], x0[:, :4]) and out.edit_counts(x0).tolist() == [3, 3]
    assert out.reward_after.tolist() == pytest.approx([3 / 16, 3 / 16])  # from no G/C (N counts as no base)


def test_roll_back_keeps_the_edits_of_largest_gain():
    w = torch.zeros(6, TOK.vocab_size, dtype=torch.float64)
    gains = torch.tensor([1.0, 5.0, 2.0, 4.0, 3.0, 0.5], dtype=torch.float64)
    w[torch.arange(6), TOK.c_id] = gains  # the gain of each A -> C
    x0, x = ids("AAAAAA"), ids("CCCCCC")
    calls = [0]
    kept = roll_back(x0, x, Linear(w), 2, calls)
    assert TOK.decode(kept[0]) == "ACACAA" and calls[0] > 0


# ----------------------------------------------------------------------------- the command

SEQS = ["ACGTTGCAATATTAGCATATGCAT", "TTTTAAAACCCCGGGGATATATAT", "ATATATATATATATATATATATAT"]


def not_differentiable(x):
    return (x == TOK.c_id).double().sum(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("ledidi"), seq_len=24)


def write_inputs(path, seqs=SEQS):
    path.write_text("".join(f">s{i} native\n{s}\n" for i, s in enumerate(seqs)))
    return str(path)


def test_edit_command_ledidi_writes_edits_that_reproduce_the_output(tmp_path, model_dir):
    inp = write_inputs(tmp_path / "in.fa")
    out = tmp_path / "out.fa"
    assert main(["edit", model_dir, "--in", inp, "--reward", "gc", "--max-edits", "4", "--method", "ledidi",
                 "--edit-cost", "0.001", "--steps", "40", "--protect", "1-2", "--out", str(out), "--threads", "1",
                 "-q"]) == 0
    stats = json.loads((tmp_path / "out.json").read_text())
    tsv = (tmp_path / "out.tsv").read_text().splitlines()
    n_rows = 0
    for (header, new), old in zip(read_fasta(out, full_headers=True), SEQS):
        fields = dict(f.split("=", 1) for f in header.split()[1:])
        assert fields["method"] == "ledidi" and apply_edits(old, fields["edits"]) == new and new[:2] == old[:2]
        assert int(fields["n_edits"]) == 4  # GC rises with every A/T -> C/G: the budget is used
        assert float(fields["reward_after"]) == pytest.approx(float(fields["reward_before"]) + 4 / 24, abs=1e-5)
        n_rows += 4
    assert len(tsv) - 1 == n_rows
    assert stats["network_calls"] == 0 and stats["reward_calls"] >= 3 * 8
    assert stats["ledidi"] == {"edit_cost": 0.001, "steps": 40, "lr": 1.0, "tau": 1.0, "draws": 8}


@pytest.mark.parametrize("extra,message", [
    (["--reward", "test_ledidi:not_differentiable"], "--method ledidi needs a differentiable reward"),
    (["--reward", "gc", "--tau", "0"], "--tau must be positive"),
    (["--reward", "gc", "--edit-cost", "-1"], "--edit-cost must be >= 0"),
    (["--reward", "gc", "--class", "1"], "--class applies to --method remask or markov, not ledidi"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, model_dir, capsys, extra, message):
    inp = write_inputs(tmp_path / "in.fa")
    argv = ["edit", model_dir, "--in", inp, "--max-edits", "2", "--method", "ledidi", "--out", str(tmp_path / "o.fa"),
            "--threads", "1", "-q"]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.fa"]
