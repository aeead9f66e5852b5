"""evaluate_bound: nats/token, bits, perplexity, SE; MC, discrete-T and quadrature variants."""

import math

import pytest
import torch

from dnadiff.diffusion import build_objective, build_schedule
from dnadiff.errors import DnadiffError
from dnadiff.eval.perplexity import evaluate_bound
from helpers.exact_denoiser import ExactDenoiser, exact_discrete_bound

MASK, V = 3, 4


@pytest.fixture(scope="module")
def den():
    return ExactDenoiser.random(length=3, real_ids=(0, 1, 2), mask_id=MASK, vocab_size=V, seed=0)


def mdlm(**kw):
    return build_objective("mdlm", schedule=build_schedule("loglinear", eps=0.0), mask_id=MASK, vocab_size=V, **kw)


def test_ar_exact_figures_and_standard_error():
    g = torch.Generator().manual_seed(0)
    table = torch.randn(6, 6, generator=g)  # bigram logits: next-token logits given the current token

    def bigram(x, t):
        return table[x]  # (B, L, V)

    x1 = torch.randint(0, 6, (3, 6), generator=g)
    x2 = torch.randint(0, 6, (2, 6), generator=g)
    m2 = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    res = evaluate_bound(bigram, build_objective("ar"), [(x1, None), {"input_ids": x2, "attention_mask": m2}],
                         num_samples=5)
    lp = table.log_softmax(-1)
    per_seq, counts = [], []
    for x, m in [(x1, torch.ones_like(x1)), (x2, m2)]:
        for b in range(x.shape[0]):
            n = int(m[b].sum())
            per_seq.append(-sum(float(lp[x[b, i - 1], x[b, i]]) for i in range(1, n)))
            counts.append(n - 1)
    n, c = torch.tensor(per_seq, dtype=torch.float64), torch.tensor(counts, dtype=torch.float64)
    nats = float(n.sum() / c.sum())
    assert res["nats_per_token"] == pytest.approx(nats, rel=1e-6)
    assert res["bits_per_token"] == pytest.approx(nats / math.log(2), rel=1e-6)
    assert res["perplexity"] == pytest.approx(math.exp(nats), rel=1e-6)
    se = math.sqrt(float(((n - nats * c) ** 2).sum()) / (5 * 4)) / float(c.mean())
    assert res["std_error"] == pytest.approx(se, rel=1e-6)
    assert res["num_tokens"] == 5 * 3 + 3 + 5 and res["num_sequences"] == 5 and res["num_samples"] == 1


def test_mdlm_bound_with_exact_denoiser_is_entropy_per_token(den):
    data = den.sample(6000, torch.Generator().manual_seed(1))
    batches = [(data[i : i + 1000], None) for i in range(0, 6000, 1000)]
    obj = mdlm(t_min=1e-6)
    r1 = evaluate_bound(den, obj, batches, num_samples=1, generator=torch.Generator().manual_seed(2))
    r4 = evaluate_bound(den, obj, batches, num_samples=4, generator=torch.Generator().manual_seed(3))
    target = float((-den.log_prob(data)).sum()) / data.numel()  # the data set's exact nats/token
    for r in (r1, r4):
        assert abs(r["nats_per_token"] - target) < 3 * r["std_error"]
        assert r["num_tokens"] == 18_000 and r["perplexity"] == pytest.approx(math.exp(r["nats_per_token"]))
    assert r4["std_error"] < r1["std_error"]


def test_quadrature_continuous_and_discrete(den):
    data = den.sample(3000, torch.Generator().manual_seed(4))
    batches = [data[:1500], data[1500:]]
    target = float((-den.log_prob(data)).sum()) / data.numel()
    mc = evaluate_bound(den, mdlm(t_min=1e-6), batches, generator=torch.Generator().manual_seed(5))
    quad = evaluate_bound(den, mdlm(), batches, quadrature=12, generator=torch.Generator().manual_seed(5))
    assert quad["quadrature"] == 12
    assert abs(quad["nats_per_token"] - target) < 3 * quad["std_error"]
    assert quad["std_error"] < mc["std_error"] / 2  # t integrated out: only mask noise is left
    # discrete T: quadrature sums the T steps; compare with the exact enumeration
    obj = mdlm(T=6)
    exact = float(exact_discrete_bound(obj, den, data).sum()) / data.numel()
    disc = evaluate_bound(den, obj, batches, quadrature=True, progress=True,
                          generator=torch.Generator().manual_seed(6))
    assert disc["T"] == 6 and disc["quadrature"] == 6
    assert abs(disc["nats_per_token"] - exact) < 3 * disc["std_error"]
    assert exact > target  # the discrete bound sits above the continuous one


def test_errors():
    with pytest.raises(DnadiffError, match="empty"):
        evaluate_bound(lambda x, t: None, mdlm(), [])
    with pytest.raises(DnadiffError, match="quadrature"):
        evaluate_bound(lambda x, t: None, build_objective("ar"), [torch.zeros(1, 3, dtype=torch.long)],
                       quadrature=8)
    with pytest.raises(DnadiffError, match="num_samples"):
        evaluate_bound(lambda x, t: None, mdlm(), [torch.zeros(1, 3, dtype=torch.long)], num_samples=0)
