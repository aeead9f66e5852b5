"""Per-window scores (evaluate_bound per_sequence), low-discrepancy t across a window's repeats, and the
paired difference of two models on the same windows (eval/paired.py)."""

import math

import numpy as np
import pytest
import torch

from dnadiff.diffusion import build_objective, build_schedule
from dnadiff.errors import DnadiffError
from dnadiff.eval.paired import describe_difference, paired_difference
from dnadiff.eval.perplexity import evaluate_bound

LN2 = math.log(2.0)


def _res(nats, tokens):
    return {"sequence_nats": list(nats), "sequence_tokens": list(tokens)}


def test_paired_difference_exact_small_case():
    tokens = [4, 4, 2, 0]  # the last window has no scored token: left out
    a = _res([4 * LN2, 8 * LN2, 2 * LN2, 0.0], tokens)  # 1, 2, 1 bits/base
    b = _res([8 * LN2, 8 * LN2, 4 * LN2, 0.0], tokens)  # 2, 2, 2 bits/base
    d = paired_difference(a, b)
    diffs = np.array([-1.0, 0.0, -1.0])
    assert d["n_windows"] == 3
    assert d["mean"] == pytest.approx(-2 / 3)
    assert d["std_error"] == pytest.approx(diffs.std(ddof=1) / math.sqrt(3))  # sqrt(1/3)/sqrt(3) = 1/3
    assert d["std_error"] == pytest.approx(1 / 3)
    assert d["beyond_2se"] is False  # 2/3 is exactly 2 SE: not beyond
    assert d["a_mean"] == pytest.approx(4 / 3) and d["b_mean"] == pytest.approx(2.0)
    assert d["wins"] == pytest.approx(2 / 3)
    assert "within 2 SE" in describe_difference(d, "A", "B")
    # a constant improvement on every window: zero spread, clearly beyond 2 SE
    c = _res([7 * LN2, 7 * LN2, 3.5 * LN2, 0.0], tokens)  # 1.75 bits/base everywhere
    d2 = paired_difference(c, b)
    assert d2["mean"] == pytest.approx(-0.25) and d2["std_error"] == pytest.approx(0.0, abs=1e-12)
    assert d2["beyond_2se"] is True and "A better" in describe_difference(d2, "A", "B")


def test_paired_difference_refuses_other_windows():
    a = _res([1.0, 2.0], [4, 4])
    with pytest.raises(DnadiffError, match="window 1 has 4 scored tokens in one run and 3"):
        paired_difference(a, _res([1.0, 2.0], [4, 3]))
    with pytest.raises(DnadiffError, match="2 windows against 3"):
        paired_difference(a, _res([1.0, 2.0, 3.0], [4, 4, 4]))
    with pytest.raises(DnadiffError, match="per_sequence=True"):
        paired_difference(a, {"bits_per_token": 2.0})


def test_per_sequence_values_add_up_to_the_dataset_figure():
    g = torch.Generator().manual_seed(0)
    table = torch.randn(5, 5, generator=g)

    def bigram(x, t):
        return table[x]

    x = torch.randint(0, 5, (4, 6), generator=g)
    res = evaluate_bound(bigram, build_objective("ar"), [(x[:3], None), (x[3:], None)], per_sequence=True)
    lp = table.log_softmax(-1)
    expect = [-sum(float(lp[x[b, i - 1], x[b, i]]) for i in range(1, 6)) for b in range(4)]
    assert res["sequence_nats"] == pytest.approx(expect, rel=1e-6)
    assert res["sequence_tokens"] == [5.0] * 4
    assert sum(res["sequence_nats"]) / 20 == pytest.approx(res["nats_per_token"], rel=1e-12)
    assert "sequence_nats" not in evaluate_bound(bigram, build_objective("ar"), [(x, None)])


def test_stratified_repeats_put_one_time_in_each_stratum():
    """K = 4 draws per window: one t in each quarter of [t_min, 1], for every window."""
    seen = []

    def uniform(x, t):
        seen.append(t.clone())
        return torch.zeros(*x.shape, 4)

    obj = build_objective("mdlm", schedule=build_schedule("loglinear", eps=0.0), mask_id=3, vocab_size=4, t_min=0.1)
    x = torch.randint(0, 3, (7, 5), generator=torch.Generator().manual_seed(0))
    res = evaluate_bound(uniform, obj, [(x, None)], num_samples=4, stratify_repeats=True,
                         generator=torch.Generator().manual_seed(1))
    assert res["stratified_repeats"] is True and res["num_samples"] == 4
    t = torch.stack(seen, 1).double()  # (windows, K)
    strata = torch.floor((t - 0.1) / 0.9 * 4).clamp(0, 3)
    assert (strata == torch.arange(4).double()).all()
    with pytest.raises(DnadiffError, match="stratify_repeats"):
        evaluate_bound(uniform, build_objective("mdlm", schedule=build_schedule("loglinear"), mask_id=3, vocab_size=4,
                                                T=10), [(x, None)], num_samples=2, stratify_repeats=True)


def test_paired_accuracy_averages_runs_per_sequence_then_pairs():
    """Row a right on sequences {0,1,2} in both runs, b on {0} and then {0,1}: per sequence a − b =
    (0, 0.5, 1, 0), mean 0.375, SE = sd / 2."""
    from dnadiff.eval import describe_accuracy_difference, paired_accuracy

    a = [{"test_correct": [1, 1, 1, 0]}, {"test_correct": [1, 1, 1, 0]}]
    b = [{"test_correct": [1, 0, 0, 0]}, {"test_correct": [1, 1, 0, 0]}]
    d = paired_accuracy(a, b)
    diffs = np.array([0.0, 0.5, 1.0, 0.0])
    assert d["mean"] == pytest.approx(0.375) and d["n_sequences"] == 4
    assert d["std_error"] == pytest.approx(diffs.std(ddof=1) / 2)
    assert d["a_mean"] == pytest.approx(0.75) and d["b_mean"] == pytest.approx(0.375)
    assert d["a_only"] == 0.5 and d["b_only"] == 0.0 and d["beyond_2se"] is (0.375 > 2 * d["std_error"])
    assert paired_accuracy(b, a)["mean"] == pytest.approx(-0.375)
    assert "a − b: +0.375" in describe_accuracy_difference(d, "a", "b")
    with pytest.raises(DnadiffError, match="without per-sequence test outcomes"):
        paired_accuracy(a, [{"test": {}}])
    with pytest.raises(DnadiffError, match="4 test sequences against 3"):
        paired_accuracy(a, [{"test_correct": [1, 0, 1]}])


def test_trim_tail_padding_scores_a_padded_window_as_its_scored_length():
    """A denoiser that reads the whole row (here: the count of token 4, the pad, shifts every logit) gets
    other numbers from a [PAD]-tailed window than from the same bases alone; with trim_tail_padding each
    row is scored as its scored prefix, exactly as if given alone. A causal bigram is unchanged by it."""
    g = torch.Generator().manual_seed(0)
    table = torch.randn(5, 5, generator=g)

    def reads_the_tail(x, t):
        return table[x] + (x == 4).sum(1, keepdim=True)[..., None].float() * torch.arange(5.0)

    x = torch.randint(0, 4, (3, 8), generator=g)
    mask = torch.ones_like(x)
    x[1, 5:], mask[1, 5:] = 4, 0  # 3 pads at the tail
    x[2, 2:], mask[2, 2:] = 4, 0
    ar = build_objective("ar")
    plain = evaluate_bound(reads_the_tail, ar, [(x, mask)], per_sequence=True)
    trimmed = evaluate_bound(reads_the_tail, ar, [(x, mask)], per_sequence=True, trim_tail_padding=True)
    alone = [evaluate_bound(reads_the_tail, ar, [(x[i:i + 1, :n], mask[i:i + 1, :n])], per_sequence=True)
             for i, n in enumerate((8, 5, 2))]
    assert trimmed["sequence_nats"] == pytest.approx([a["sequence_nats"][0] for a in alone], rel=1e-6)
    assert trimmed["sequence_tokens"] == plain["sequence_tokens"] == [7.0, 4.0, 1.0]
    assert plain["sequence_nats"][0] == pytest.approx(trimmed["sequence_nats"][0], rel=1e-6)  # no tail: same
    assert abs(plain["sequence_nats"][1] - trimmed["sequence_nats"][1]) > 1e-3
    bigram = evaluate_bound(lambda x, t: table[x], ar, [(x, mask)], per_sequence=True)
    bigram_trimmed = evaluate_bound(lambda x, t: table[x], ar, [(x, mask)], per_sequence=True, trim_tail_padding=True)
    assert bigram_trimmed["sequence_nats"] == pytest.approx(bigram["sequence_nats"], rel=1e-6)
