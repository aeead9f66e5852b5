"""Fixed-order decoding of a masked diffusion model: the `ordered` sampler and its exact NLL (eval/ordered_nll.py).

For a consistent joint p (the exact denoiser) every order's p_σ is p itself: the NLL of each order equals
-log p(x) and the sampler reproduces p. For an inconsistent denoiser (a fixed random table of conditionals,
as a trained network is) the orders differ; the sampler draws exactly p_σ (its law computed by hand);
the random-order average equals the MDLM NELBO (enumerated over masked sets with its Beta weights).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from dnadiff.diffusion import build_schedule
from dnadiff.errors import DnadiffError
from dnadiff.eval.ordered_nll import order_ranks, ordered_nll
from dnadiff.samplers import build_sampler
from helpers.exact_sampling_target import ExactDenoiser, all_sequences, chi_square_pvalue, random_joint, seq_index

SCHED = build_schedule("loglinear", eps=1e-3)
V, L = 3, 3  # real tokens 0..2, mask 3


class TableDenoiser:
    """Inconsistent conditionals: logits at position i are a fixed random function of (x_t, i)."""

    time_conditioned = False

    def __init__(self, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.table = torch.randn((V + 1) ** L, L, V, generator=g, dtype=torch.float64) * 1.5
        self.mask_id = V

    def __call__(self, x_t, t):
        powers = (V + 1) ** torch.arange(L - 1, -1, -1)
        key = (x_t * powers).sum(dim=1)
        logits = torch.full((x_t.shape[0], L, V + 1), -1e6, dtype=torch.float64)
        logits[..., :V] = self.table[key]
        return logits

    def log_cond(self, x_t, i, v) -> float:
        return float(self.__call__(x_t[None], None)[0, i, :V].log_softmax(-1)[v])


def _order_law(den: TableDenoiser, order: list[int]) -> torch.Tensor:
    """p_σ over all V^L sequences, by the chain rule in `order`."""
    seqs = all_sequences(V, L)
    p = torch.ones(len(seqs), dtype=torch.float64)
    for n, x in enumerate(seqs):
        for k, i in enumerate(order):
            x_t = x.clone()
            x_t[order[k:]] = V
            p[n] *= math.exp(den.log_cond(x_t, i, int(x[i])))
    return p


def test_order_ranks_follow_the_order_and_skip_unscored_positions():
    scored = torch.tensor([[True, True, True, True], [True, False, True, True]])
    assert order_ranks(scored, "left_to_right").tolist() == [[0, 1, 2, 3], [0, 4, 1, 2]]
    assert order_ranks(scored, "right_to_left").tolist() == [[3, 2, 1, 0], [2, 4, 1, 0]]
    r = order_ranks(scored, "random", torch.Generator().manual_seed(0))
    assert sorted(r[0].tolist()) == [0, 1, 2, 3] and r[1, 1] == 4 and sorted(r[1, [0, 2, 3]].tolist()) == [0, 1, 2]
    with pytest.raises(DnadiffError, match="order must be one of"):
        order_ranks(scored, "middle_out")


@pytest.mark.parametrize("order", ["left_to_right", "right_to_left", "random"])
def test_every_order_of_a_consistent_joint_is_its_exact_nll(order):
    p = random_joint(V, L, seed=3)
    den = ExactDenoiser(p, V, L)
    x = all_sequences(V, L)
    nll, count = ordered_nll(den, x, den.mask_id, order=order, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(nll, -p[seq_index(x, V)].log(), atol=1e-9) and bool((count == L).all())


def test_orders_of_an_inconsistent_denoiser_are_their_chain_rule_laws():
    den = TableDenoiser()
    x = all_sequences(V, L)
    l2r, _ = ordered_nll(den, x, V, order="left_to_right")
    r2l, _ = ordered_nll(den, x, V, order="right_to_left")
    assert torch.allclose(l2r, -_order_law(den, [0, 1, 2]).log(), atol=1e-9)
    assert torch.allclose(r2l, -_order_law(den, [2, 1, 0]).log(), atol=1e-9)
    assert (l2r - r2l).abs().max() > 0.1  # the denoiser is inconsistent: the orders disagree


def test_random_order_average_is_the_mdlm_nelbo():
    """E_σ[-log p_σ(x)] = Σ_S B(|S|, L - |S| + 1) Σ_{l in S} -log p(x_l | S masked) (MDLM eq. 11, α = 1 - t)."""
    den = TableDenoiser(seed=4)
    x = torch.tensor([2, 0, 1])
    nelbo = 0.0
    for k in range(1, L + 1):
        for S in itertools.combinations(range(L), k):
            x_t = x.clone()
            x_t[list(S)] = V
            w = math.factorial(k - 1) * math.factorial(L - k) / math.factorial(L)
            nelbo += w * sum(-den.log_cond(x_t, i, int(x[i])) for i in S)
    exact = sum(-_order_law(den, list(s))[seq_index(x[None], V)].log().item()
                for s in itertools.permutations(range(L))) / math.factorial(L)
    assert exact == pytest.approx(nelbo, abs=1e-9)
    many = x.expand(20_000, L).clone()
    mc, _ = ordered_nll(den, many, V, order="random", generator=torch.Generator().manual_seed(2))
    assert float(mc.mean()) == pytest.approx(nelbo, abs=4 * float(mc.std()) / math.sqrt(len(mc)))


def test_unscored_positions_stay_visible_and_are_not_counted():
    den = ExactDenoiser(random_joint(V, L, seed=5), V, L)
    x = torch.tensor([[1, 2, 0]])
    nll, count = ordered_nll(den, x, V, attention_mask=torch.tensor([[1, 0, 1]]))
    p = den.probs.view(V, V, V)
    cond = p[:, 2, :] / p[:, 2, :].sum()  # the middle token seen throughout
    want = -math.log(float(cond[1].sum())) - math.log(float(cond[1, 0] / cond[1].sum()))
    assert count.tolist() == [2.0] and float(nll) == pytest.approx(want, abs=1e-6)  # float32 logits


@pytest.mark.parametrize("order,perm", [("left_to_right", [0, 1, 2]), ("right_to_left", [2, 1, 0])])
def test_ordered_sampler_draws_its_orders_law(order, perm):
    den = TableDenoiser(seed=6)
    law = _order_law(den, perm)
    s = build_sampler("ordered", order=order)
    x = s.generate(den, SCHED, V, (20_000, L), generator=torch.Generator().manual_seed(0))
    assert chi_square_pvalue(x, law, V) > 0.01 and s.last_nfe == L
    other = _order_law(den, perm[::-1])
    assert chi_square_pvalue(x, other, V) < 1e-6  # the test can tell the two orders apart


def test_ordered_sampler_reproduces_a_consistent_joint_and_rejects_unknown_orders():
    p = random_joint(V, L, seed=1)
    x = build_sampler("ordered").generate(ExactDenoiser(p, V, L), SCHED, V, (20_000, L),
                                          generator=torch.Generator().manual_seed(3))
    assert chi_square_pvalue(x, p, V) > 0.01
    with pytest.raises(DnadiffError, match="order must be one of"):
        build_sampler("ordered", order="zigzag")


def test_semi_ar_with_an_ordered_inner_sampler_counts_one_call_per_token():
    den = ExactDenoiser(random_joint(V, L, seed=2), V, L)
    s = build_sampler("semi_ar", inner="ordered", window=3, stride=1)
    x = s.generate(den, SCHED, V, (4, 7), generator=torch.Generator().manual_seed(0))
    assert x.shape == (4, 7) and int(x.max()) < V and s.last_nfe == 7


def test_evaluate_ordered_scores_a_model_window_by_window(tmp_path):
    """A loaded model: per-window nats as ordered_nll gives them, N positions unscored, the bound's keys; a model
    that is not a masked diffusion model is refused."""
    import dnadiff
    from dnadiff.eval import paired_difference
    from dnadiff.eval.ordered_nll import evaluate_ordered
    from helpers.cli_model import tiny_model_dir

    model = dnadiff.load(tiny_model_dir(tmp_path / "m", seq_len=12))
    ids = torch.randint(7, 11, (5, 12), generator=torch.Generator().manual_seed(0))
    am = torch.ones_like(ids)
    ids[1, 3:6], am[1, 3:6] = 11, 0  # an N run: visible, not scored
    items = [{"input_ids": ids[i], "attention_mask": am[i]} for i in range(5)]
    res = evaluate_ordered(model, items, batch_size=2, progress=False)
    direct, count = ordered_nll(model.denoiser, ids, model.tokenizer.mask_id, am)
    assert torch.allclose(torch.tensor(res["sequence_nats"], dtype=torch.float64), direct, atol=1e-9)
    assert res["sequence_tokens"] == count.tolist() == [12, 9, 12, 12, 12] and res["num_tokens"] == 57
    assert res["bits_per_token"] == pytest.approx(float(direct.sum()) / 57 / math.log(2))
    back = evaluate_ordered(model, items, order="right_to_left", progress=False)
    assert paired_difference(res, back)["n_windows"] == 5  # pairs with another row on the same windows
    ar = dnadiff.load(tiny_model_dir(tmp_path / "ar", seq_len=12, overrides=["objective.name=ar"]))
    with pytest.raises(DnadiffError, match="masked diffusion model"):
        evaluate_ordered(ar, items, progress=False)


def test_evaluate_ordered_strand_averaged_is_the_wrapped_denoisers_nll(tmp_path):
    import dnadiff
    from dnadiff.eval.ordered_nll import evaluate_ordered
    from dnadiff.samplers import rc_symmetric
    from helpers.cli_model import tiny_model_dir

    model = dnadiff.load(tiny_model_dir(tmp_path / "ph", seq_len=10, overrides=["model.preset=tiny-ph"]))
    ids = torch.randint(7, 11, (3, 10), generator=torch.Generator().manual_seed(1))
    items = [{"input_ids": ids[i], "attention_mask": torch.ones(10, dtype=torch.long)} for i in range(3)]
    plain = evaluate_ordered(model, items, progress=False)
    both = evaluate_ordered(model, items, progress=False, rc_symmetric=True)
    wrapped = rc_symmetric(model.denoiser, model.tokenizer.complement_map(), mask_id=model.tokenizer.mask_id)
    direct, _ = ordered_nll(wrapped, ids, model.tokenizer.mask_id)
    assert torch.allclose(torch.tensor(both["sequence_nats"], dtype=torch.float64), direct, atol=1e-6)
    assert abs(both["bits_per_token"] - plain["bits_per_token"]) > 1e-4  # PH: not RC-equivariant, so it differs


def _orders_benchmark(monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "mdlm_orders.py"
    monkeypatch.syspath_prepend(str(path.parent))  # as when run as a script: it imports padded_windows beside it
    spec = importlib.util.spec_from_file_location("mdlm_orders", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_orders_benchmark_refuses_bad_input(capsys, monkeypatch):
    bench = _orders_benchmark(monkeypatch)
    assert bench.main(["--mdlm", "x=/nonexistent", "--orders", "zigzag"]) == 2
    assert "--orders: unknown ['zigzag']" in capsys.readouterr().err
    assert bench.main(["--mdlm", "no-equals-sign"]) == 2
    assert "want NAME=MODEL_DIR" in capsys.readouterr().err
    assert bench.main(["--mdlm", "x=/nonexistent"]) == 2
    assert "not a model directory" in capsys.readouterr().err


@pytest.mark.training
def test_orders_benchmark_dry_run_scores_every_row(capsys, monkeypatch):
    """A tiny MDLM (2 steps) and a Markov chain on the bundled sample: bound, both denoisers' left-to-right rows."""
    assert _orders_benchmark(monkeypatch).main(["--dry-run", "--denoisers", "plain,rc_symmetric"]) == 0
    out = capsys.readouterr().out
    assert "bound (2 t-samples)" in out and "left-to-right order, RC-symmetric" in out and "Markov chain" in out
