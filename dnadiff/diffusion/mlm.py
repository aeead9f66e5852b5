"""BERT / Caduceus masked language modelling, for the MLM-pretrained baseline.

Each real position is selected independently with probability `mask_rate` (0.15); a selected
position is replaced by the mask token with probability 0.8, by a token drawn uniformly from
`random_token_ids` (real tokens only, e.g. DNA A C G T = [7, 8, 9, 10]; never specials) with
probability 0.1, and kept with probability 0.1 (Devlin et al. 2019, §3.1; Caduceus app.).
The loss is the plain softmax cross-entropy at the selected positions.

`nll[b]` is the summed masked-token CE in nats of sequence b and `num_tokens[b]` the number of
selected positions, so `loss` is the mean CE per selected token. It is a training criterion,
not a likelihood bound. The denoiser is called with t = 0 (MLM models ignore time).
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from dnadiff.diffusion.base import OBJECTIVES, LossOutput, Objective, gather_token, rand_like_on, real_mask, reduce_loss
from dnadiff.errors import DnadiffError


@OBJECTIVES.register("mlm")
class MLMObjective(Objective):
    """`build_objective("mlm", mask_id=3, random_token_ids=[7, 8, 9, 10])`."""

    name = "mlm"
    needs_time = False
    generator = False

    @classmethod
    def config_kwargs(cls, cfg, tokenizer) -> dict:
        return {"random_token_ids": list(tokenizer.content_ids)}

    def __init__(
        self,
        schedule=None,
        mask_id: int | None = None,
        vocab_size: int | None = None,
        T=None,
        random_token_ids: Sequence[int] | None = None,
        mask_rate: float = 0.15,
        mask_frac: float = 0.8,
        random_frac: float = 0.1,
        never_mask_ids: Sequence[int] = (),
    ):
        if T is not None:
            raise DnadiffError("objective 'mlm' has no diffusion time: leave T unset")
        if mask_id is None:
            raise DnadiffError("objective 'mlm': mask_id is required")
        if not random_token_ids:
            raise DnadiffError("objective 'mlm': random_token_ids is required (the real token ids, e.g. [7, 8, 9, 10])")
        if int(mask_id) in [int(i) for i in random_token_ids]:
            raise DnadiffError("objective 'mlm': random_token_ids must not contain mask_id")
        if not (0.0 < mask_rate <= 1.0 and 0.0 <= mask_frac and 0.0 <= random_frac and mask_frac + random_frac <= 1.0):
            raise DnadiffError("objective 'mlm': need 0 < mask_rate <= 1 and mask_frac + random_frac <= 1")
        self.schedule, self.vocab_size, self.T = schedule, vocab_size, None
        self.mask_id = int(mask_id)
        self.random_token_ids = torch.tensor([int(i) for i in random_token_ids], dtype=torch.long)
        self.mask_rate, self.mask_frac, self.random_frac = float(mask_rate), float(mask_frac), float(random_frac)
        self.never_mask_ids = torch.tensor([int(i) for i in never_mask_ids], dtype=torch.long)

    def corrupt(self, x0: Tensor, attention_mask: Tensor | None = None, generator=None) -> tuple[Tensor, Tensor]:
        """(inputs Long[B, L], selected Bool[B, L]): the 15% / 80-10-10 corruption."""
        real = real_mask(x0, attention_mask)
        if self.never_mask_ids.numel():
            real = real & ~torch.isin(x0, self.never_mask_ids.to(x0.device))
        shape = tuple(x0.shape)
        selected = (rand_like_on(shape, generator, x0.device) < self.mask_rate) & real
        action = rand_like_on(shape, generator, x0.device)  # < 0.8 mask, < 0.9 random, else keep
        ids = self.random_token_ids.to(x0.device)
        pick = (rand_like_on(shape, generator, x0.device) * len(ids)).long().clamp_max(len(ids) - 1)
        random_tok = ids[pick]  # (B, L)
        inputs = torch.where(selected & (action < self.mask_frac), torch.full_like(x0, self.mask_id), x0)
        use_random = selected & (action >= self.mask_frac) & (action < self.mask_frac + self.random_frac)
        inputs = torch.where(use_random, random_tok, inputs)
        return inputs, selected

    def loss(self, denoiser, x0, attention_mask=None, t=None, generator=None) -> LossOutput:
        inputs, selected = self.corrupt(x0, attention_mask, generator)
        logits = denoiser(inputs, torch.zeros(x0.shape[0], device=x0.device))  # (B, L, V)
        logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
        nll_tok = -gather_token(logits.log_softmax(dim=-1), x0)  # (B, L)
        return reduce_loss(nll_tok, selected, selected)

    def __repr__(self) -> str:
        return f"MLMObjective(mask_id={self.mask_id}, random_token_ids={self.random_token_ids.tolist()})"
