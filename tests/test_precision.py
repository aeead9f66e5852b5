"""bf16 autocast: the losses' SUBS / log-softmax run in float32.

The backbone's logits come out of autocast in bf16 (as in the reference MDLM, whose DiT runs under
bf16 autocast); everything the objective does with them must then be float32: the printed bound is
compared here with a float64 computation from the very same bf16 logits.
"""

import pytest
import torch

from dnadiff.diffusion import build_objective, build_schedule

MASK, V = 3, 12


class _BF16Denoiser(torch.nn.Module):
    """Embedding + Linear: under autocast its logits are bf16; `as64` replays them in float64."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.emb = torch.nn.Embedding(V, 16)
        self.lin = torch.nn.Linear(16, V)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 2.0)
        self.as64 = False

    def forward(self, x_t, t):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = self.lin(self.emb(x_t))  # (B, L, V) bf16
        assert logits.dtype == torch.bfloat16
        return logits.double() if self.as64 else logits


@pytest.mark.parametrize("name,kw", [("mdlm", {}), ("mdlm", {"T": 10}), ("sedd", {}),
                                     ("d3pm", {"T": 10}), ("ar", {}),
                                     ("mlm", {"random_token_ids": [7, 8, 9, 10]})])
def test_losses_under_bf16_autocast_match_float64(name, kw):
    obj = build_objective(name, schedule=build_schedule("loglinear", eps=1e-3), mask_id=MASK, vocab_size=V, **kw)
    den = _BF16Denoiser()
    x0 = torch.randint(7, 11, (4, 32), generator=torch.Generator().manual_seed(1))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = obj.loss(den, x0, generator=torch.Generator().manual_seed(2))
    den.as64 = True
    ref = obj.loss(den, x0, generator=torch.Generator().manual_seed(2))
    assert out.nll.dtype == torch.float32 and ref.nll.dtype == torch.float64
    assert ((out.nll.double() - ref.nll).abs().max() / ref.nll.abs().max()).item() < 1e-5
    assert abs(out.loss.item() - ref.loss.item()) / abs(ref.loss.item()) < 1e-5
