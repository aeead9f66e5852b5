"""Left-to-right sampling for AR models (causal backbones trained with the `ar` objective).

Same call as the diffusion samplers; `schedule` and `mask_id` are unused except that template
positions holding a token other than `mask_id` are kept (prefix conditioning). Position i's
logits predict token i+1. With `bos_id` (models trained with the `ar` objective's [BOS] context)
the model reads [BOS] + the sequence, so the first token is drawn from p(x_0 | [BOS]). Without it
the `ar` objective never modelled position 0 (it is context), so a free first token is drawn
uniformly from `first_token_ids` (e.g. the four bases); give a prefix to condition it instead.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.samplers.base import draw_categorical, shape_probs


class AutoregressiveSampler:
    def __init__(self, temperature: float = 1.0, top_p: float = 1.0, float32_draws: bool = False,
                 first_token_ids: list[int] | None = None, bos_id: int | None = None):
        self.temperature, self.top_p, self.float32_draws = temperature, top_p, float32_draws
        self.first_token_ids = first_token_ids
        self.bos_id = bos_id
        self.last_nfe = 0

    @torch.no_grad()
    def generate(self, denoiser, schedule, mask_id: int, shape, template: Tensor | None = None, generator=None) -> Tensor:
        batch, length = shape
        device = next(denoiser.parameters()).device if hasattr(denoiser, "parameters") else "cpu"
        x = torch.full((batch, length), mask_id, dtype=torch.long, device=device)
        fixed = torch.zeros_like(x, dtype=torch.bool)
        if template is not None:
            template = template.expand(batch, length).to(device)
            fixed = template != mask_id
            x = torch.where(fixed, template, x)
        if self.bos_id is not None:  # a fixed [BOS] in front; the model reads length tokens (as in training)
            x = torch.cat([torch.full_like(x[:, :1], self.bos_id), x], dim=1)  # (B, L+1)
            fixed = torch.cat([torch.ones_like(fixed[:, :1]), fixed], dim=1)
            return self._loop(denoiser, x, fixed, mask_id, generator, device)[:, 1:]
        return self._loop(denoiser, x, fixed, mask_id, generator, device)

    def _loop(self, denoiser, x: Tensor, fixed: Tensor, mask_id: int, generator, device) -> Tensor:
        batch, length = x.shape
        window = length - 1 if self.bos_id is not None else length  # inputs the model reads
        t = torch.zeros(batch, device=device)
        self.last_nfe = 0
        for i in range(length):
            if bool(fixed[:, i].all()):
                continue
            if i == 0:
                if not self.first_token_ids:
                    raise ValueError("AutoregressiveSampler: a free first token needs first_token_ids or a prefix")
                ids = torch.tensor(self.first_token_ids, device=device)
                pick = torch.randint(len(ids), (batch,), generator=generator, device=device if generator is None else generator.device)
                x[:, 0] = torch.where(fixed[:, 0], x[:, 0], ids[pick.to(device)])
                continue
            logits = denoiser(x[:, :window], t)  # (B, window, V) causal: position i-1 predicts token i
            self.last_nfe += 1
            src = logits[:, i - 1].float().log_softmax(-1)
            src[..., mask_id] = -float("inf")
            probs = shape_probs(src, self.temperature, self.top_p)
            tok = draw_categorical(probs, generator=generator, float32=self.float32_draws)
            x[:, i] = torch.where(fixed[:, i], x[:, i], tok)
        return x
