"""Diffusion math: schedules, SUBS, objectives (MDLM, D3PM, SEDD, AR, MLM; UDLM: uniform noise; continuous
noise: Plaid on learned embeddings, SSD-LM on the vocabulary simplex).

    sched = build_schedule("loglinear", eps=1e-3)
    obj = build_objective("mdlm", schedule=sched, mask_id=3, vocab_size=12)      # T=... for discrete
    out = obj.loss(denoiser, x0, attention_mask)   # LossOutput(loss, nll[B] nats, num_tokens[B])
"""

# registration by import: each module below registers its objective in OBJECTIVES
from dnadiff.diffusion import ar, bd3lm, d3pm, mdlm, mlm, plaid, sedd, ssdlm, udlm  # noqa: F401
from dnadiff.diffusion.base import OBJECTIVES, DiffusionObjective, LossOutput, Objective, q_sample
from dnadiff.diffusion.bd3lm import check_clip
from dnadiff.diffusion.schedules import SCHEDULES, Schedule, build_schedule
from dnadiff.diffusion.sedd import sedd_log_score
from dnadiff.diffusion.subs import NEG_INF, subs_log_probs


def build_objective(name: str = "mdlm", **kwargs) -> Objective:
    """`build_objective("mdlm", schedule=sched, mask_id=3, vocab_size=12, T=None)`;
    names: OBJECTIVES.names() (ar, bd3lm, d3pm, mdlm, mlm, sedd, udlm). Unknown names/keywords raise DnadiffError."""
    return OBJECTIVES.build(name, **kwargs)


__all__ = [
    "NEG_INF",
    "OBJECTIVES",
    "SCHEDULES",
    "DiffusionObjective",
    "LossOutput",
    "Objective",
    "Schedule",
    "build_objective",
    "build_schedule",
    "check_clip",
    "q_sample",
    "sedd_log_score",
    "subs_log_probs",
]
