"""Activation recomputation (dnadiff/reward_tuning/trajectory.py `recompute`) changes memory, not the
gradient: the loss and the gradient w.r.t. every trainable weight equal those of the plain graph, for both
methods, on the enumerable tabulated denoiser (float64: to 1e-12) and on a real tiny Caduceus backbone
fed relaxed one-hot states through its embedding (float32: to float tolerance)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from dnadiff.reward_tuning import drakes_loss, make_grid, policy_gradient_loss, sample_groups
from helpers.tabular_policy import MASK, L, TableDenoiser, V, linear_grid, soft_reward

T = 4
GRID = linear_grid(T)  # linear schedule α = 1 − t


def hard_reward(x):
    return soft_reward(F.one_hot(x, V).double())


def grads(loss, params):
    return torch.autograd.grad(loss, params)


def tables(seed=0):
    torch.manual_seed(seed)
    pre = TableDenoiser.random(seed=0)
    pre.table.requires_grad_(False)
    ft = TableDenoiser(pre.table + 0.4 * torch.randn_like(pre.table))  # away from θ_pre: every term is live
    return pre, ft


@pytest.mark.parametrize("estimator,truncate", [("straight_through", None), ("straight_through", 2),
                                                ("relaxed", None), ("soft", 3)])
def test_drakes_gradient_is_unchanged_by_recomputation_tabular(estimator, truncate):
    pre, ft = tables()
    x0 = torch.full((32, L), MASK)
    out = {}
    for recompute in (False, True):
        o = drakes_loss(ft, pre, soft_reward, GRID, MASK, x0, V, 0.7, truncate_steps=truncate, temperature=0.8,
                        estimator=estimator, generator=torch.Generator().manual_seed(4),
                        recompute=recompute)
        out[recompute] = (o.loss.detach(), grads(o.loss, [ft.table])[0])
    assert torch.equal(out[True][0], out[False][0])
    assert float(out[False][1].abs().max()) > 1e-3  # a real gradient
    torch.testing.assert_close(out[True][1], out[False][1], rtol=1e-12, atol=1e-14)


def test_policy_gradient_gradient_is_unchanged_by_recomputation_tabular():
    pre, ft = tables(1)
    groups = sample_groups(ft, GRID, MASK, torch.full((32, L), MASK), V, hard_reward,
                           generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ft.table += 0.05 * torch.randn_like(ft.table)  # θ ≠ θ_old: ratios ≠ 1, some clipped
    out = {}
    for recompute in (False, True):
        o = policy_gradient_loss(ft, pre, GRID, MASK, groups, 0.5, group_size=8, recompute=recompute)
        out[recompute] = (o.loss.detach(), grads(o.loss, [ft.table])[0])
    assert torch.equal(out[True][0], out[False][0])
    assert float(out[False][1].abs().max()) > 1e-3
    torch.testing.assert_close(out[True][1], out[False][1], rtol=1e-12, atol=1e-14)


def tiny_caduceus():
    """A Caduceus denoiser whose token embedding the relaxed state reaches (tiny-ph: no RCPS strands)."""
    from dnadiff.backbones import build_backbone
    from dnadiff.model import Denoiser, SuppressTokens
    from dnadiff.tokenizers import DNATokenizer

    torch.manual_seed(0)
    tok = DNATokenizer()
    pre = SuppressTokens(Denoiser(build_backbone("caduceus", preset="tiny-ph", vocab_size=tok.vocab_size)),
                         [0, 1, 2, 4, 5, 6, 11])
    ft = copy.deepcopy(pre)
    pre.requires_grad_(False)
    with torch.no_grad():
        for p in ft.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return tok, pre, ft


class Linear:
    """A schedule α(t) = 1 − t for make_grid."""

    @staticmethod
    def alpha(t):
        return 1 - t


def test_gradients_are_unchanged_by_recomputation_caduceus():
    tok, pre, ft = tiny_caduceus()
    grid = make_grid(Linear(), 6)
    x0 = torch.full((4, 16), tok.mask_id)
    weights = [p for p in ft.parameters() if p.requires_grad]

    def reward_soft(onehot):  # GC content of the relaxed one-hot
        return onehot[..., [tok.c_id, tok.g_id]].sum((-1, -2)) / onehot.shape[1]

    def reward_ids(x):
        return reward_soft(F.one_hot(x, tok.vocab_size).double())

    results = {}
    for recompute in (False, True):
        d = drakes_loss(ft, pre, reward_soft, grid, tok.mask_id, x0, tok.vocab_size, 0.3, truncate_steps=3,
                        generator=torch.Generator().manual_seed(1), recompute=recompute)
        groups = sample_groups(ft, grid, tok.mask_id, x0, tok.vocab_size, reward_ids,
                               generator=torch.Generator().manual_seed(2))
        p = policy_gradient_loss(ft, pre, grid, tok.mask_id, groups, 0.3, group_size=2, recompute=recompute)
        results[recompute] = [(d.loss.detach(), grads(d.loss, weights)), (p.loss.detach(), grads(p.loss, weights))]
    for (loss_r, g_r), (loss_p, g_p) in zip(results[True], results[False]):
        torch.testing.assert_close(loss_r, loss_p, rtol=1e-6, atol=1e-9)
        assert max(float(g.abs().max()) for g in g_p) > 1e-4
        for a, b in zip(g_r, g_p):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
