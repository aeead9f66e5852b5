"""SUBS parameterisation (MDLM §3.2.3, eq. 7)."""

import torch

from dnadiff.diffusion import NEG_INF, subs_log_probs
from dnadiff.diffusion.subs import subs_masked_nll

MASK = 3


def _case(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(4, 9, 12, generator=g) * 5).to(dtype)
    x_t = torch.randint(0, 12, (4, 9), generator=g)
    x_t[:, ::2] = MASK
    return logits, x_t


def test_normalised_and_no_mass_on_mask():
    logits, x_t = _case()
    lp = subs_log_probs(logits, x_t, MASK)
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(4, 9))
    assert torch.all(lp[..., MASK] <= NEG_INF / 2)
    assert float(lp[..., MASK].exp().max()) == 0.0
    # at masked positions the rest is the plain softmax without the mask column
    keep = torch.ones(12, dtype=torch.bool)
    keep[MASK] = False
    ref = logits[..., keep].log_softmax(-1)
    m = x_t == MASK
    torch.testing.assert_close(lp[..., keep][m], ref[m])


def test_carry_over_point_mass():
    logits, x_t = _case()
    lp = subs_log_probs(logits, x_t, MASK)
    un = x_t != MASK
    assert torch.all(lp.gather(-1, x_t[..., None]).squeeze(-1)[un] == 0.0)
    onehot = torch.nn.functional.one_hot(x_t, 12).bool()
    assert torch.all(lp[un][~onehot[un]] == NEG_INF)


def test_does_not_modify_input_and_handles_bf16():
    logits, x_t = _case()
    before = logits.clone()
    subs_log_probs(logits, x_t, MASK)
    assert torch.equal(logits, before)
    lp = subs_log_probs(logits.bfloat16(), x_t, MASK)
    assert lp.dtype == torch.float32
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(4, 9))


def test_masked_nll_matches_subs_log_probs_at_masked_positions():
    logits, x_t = _case()
    x0 = torch.randint(4, 12, x_t.shape, generator=torch.Generator().manual_seed(3))
    ref = -subs_log_probs(logits, x_t, MASK).gather(-1, x0[..., None]).squeeze(-1)
    got = subs_masked_nll(logits, x0, MASK)
    m = x_t == MASK
    torch.testing.assert_close(got[m], ref[m])
    logits.requires_grad_(True)
    subs_masked_nll(logits, x0, MASK)[m].sum().backward()  # differentiable, input untouched
    assert torch.all(logits.grad[..., MASK] == 0)
