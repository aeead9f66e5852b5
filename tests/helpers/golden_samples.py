"""Golden samples: every registered sampler's output for a fixed seed on a tiny fixed-weight model,
as sha256 of the token tensor plus the NFE counts (tests/data/golden_samples.json, tests/test_golden_samples.py).

The network is defined here, not taken from dnadiff/backbones/, so the golden values pin the sampling
path (model.generate, the samplers, the loop, the denoiser wrappers, dnadiff.sample) and nothing a backbone
change could move: an embedding, a mean over the sequence (causal for the AR model), a time and a label
term, a linear read-out; weights drawn from a fixed torch.Generator.

    python tests/helpers/golden_samples.py            # print the cases as JSON
    python tests/helpers/golden_samples.py --add      # add cases missing from tests/data/golden_samples.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import torch
from torch import nn

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden_samples.json"
NUM, LENGTH, STEPS, SEED = 5, 12, 4, 7


class GoldenNet(nn.Module):
    """logits[b, i] = W · (E[x_bi] + mean_j E[x_bj] (j <= i when causal) + t_b · u + L[label]) + bias."""

    def __init__(self, vocab_size: int, causal: bool = False, time_conditioned: bool = False,
                 num_classes: int = 0, width: int = 8):
        super().__init__()
        g = torch.Generator().manual_seed(1234)
        self.vocab_size, self.is_causal, self.time_conditioned, self.num_classes = \
            vocab_size, causal, time_conditioned, num_classes
        self.emb = nn.Parameter(torch.randn(vocab_size, width, generator=g))
        self.time = nn.Parameter(torch.randn(width, generator=g))
        self.labels = nn.Parameter(0.15 * torch.randn(num_classes + 1, width, generator=g))  # last: the null label
        self.out = nn.Parameter(0.3 * torch.randn(width, vocab_size, generator=g))  # soft: varied samples
        self.bias = nn.Parameter(0.3 * torch.randn(vocab_size, generator=g))

    def forward(self, x, t=None, labels=None, attention_mask=None):
        h = self.emb[x]  # (B, L, D)
        if self.is_causal:
            ctx = h.cumsum(1) / torch.arange(1, x.shape[1] + 1, device=x.device).view(1, -1, 1)
        else:
            ctx = h.mean(1, keepdim=True)
        h = h + ctx
        if self.time_conditioned and t is not None:
            h = h + torch.as_tensor(t, dtype=h.dtype).reshape(-1, 1, 1) * self.time
        if self.num_classes:
            idx = torch.full((x.shape[0],), self.num_classes, dtype=torch.long) if labels is None else \
                torch.as_tensor(labels, dtype=torch.long).expand(x.shape[0])
            h = h + self.labels[idx].unsqueeze(1)
        return h @ self.out + self.bias  # (B, L, V)


def golden_model(objective: str = "mdlm", time_conditioned: bool = False, num_classes: int = 0):
    from dnadiff.config import RunConfig, load_config
    from dnadiff.model import DiffusionModel
    from dnadiff.tokenizers import DNATokenizer

    extra = ["model.num_classes=2", "model.class_names=[a,b]"] if num_classes else []
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"objective.name={objective}", "sample.steps=4",
                                                             *extra])
    tok = DNATokenizer()
    if objective == "plaid":  # an embedding-space network: a seeded tiny DiT under Plaid's embeddings and schedule
        from dnadiff.backbones import build_backbone
        from dnadiff.diffusion.plaid_net import PlaidNetwork

        torch.manual_seed(1234)
        return DiffusionModel(cfg, PlaidNetwork(build_backbone("dit", "tiny", vocab_size=tok.vocab_size),
                                                embed_dim=4), tok)
    net = GoldenNet(tok.vocab_size, causal=objective in ("ar", "bd3lm"), time_conditioned=time_conditioned,
                    num_classes=num_classes)
    return DiffusionModel(cfg, net, tok)


def _sampler_case(name: str) -> dict:
    from dnadiff.diffusion import OBJECTIVES
    from dnadiff.samplers import SAMPLERS

    cls = SAMPLERS.get(name)
    # the objective whose noise the sampler samples (mask: mdlm; AR decoding: ar)
    same_noise = [n for n in OBJECTIVES.names() if OBJECTIVES.get(n).noise == cls.noise]
    objective = "ar" if cls.autoregressive else ("mdlm" if cls.noise == "mask" else same_noise[0])
    kw = {"steps": STEPS} if cls.has_steps else {}
    if name == "semi_ar":
        kw.update(window=8, stride=4)
    return {"model": {"objective": objective}, "sampler": name, **kw}


EXTRA_CASES = {  # beyond one default run per sampler: the wrappers and options the refactor moves
    "ancestral+time": {"model": {"objective": "mdlm", "time_conditioned": True}, "sampler": "ancestral",
                       "steps": STEPS},
    "ancestral+rc_symmetric": {"model": {"objective": "mdlm"}, "sampler": "ancestral", "steps": STEPS,
                               "rc_symmetric": True},
    "ancestral+template+batches": {"model": {"objective": "mdlm"}, "sampler": "ancestral", "steps": STEPS,
                                   "template": "ACNNNNNNNNGT", "batch_size": 2},
    "ancestral+cache": {"model": {"objective": "mdlm"}, "sampler": "ancestral", "steps": STEPS, "cache": True},
    "ancestral+label": {"model": {"objective": "mdlm", "num_classes": 2}, "sampler": "ancestral",
                        "steps": STEPS, "label": "b"},
    "ancestral+cfg": {"model": {"objective": "mdlm", "num_classes": 2}, "sampler": "ancestral",
                      "steps": STEPS, "label": 0, "guidance": 0.5},
    "udlm+cfg": {"model": {"objective": "udlm", "num_classes": 2}, "sampler": "udlm", "steps": STEPS,
                 "label": 1, "guidance": 1.0},
    "autoregressive+label": {"model": {"objective": "ar", "num_classes": 2}, "sampler": "autoregressive",
                             "label": 1},
    "remdm+temperature": {"model": {"objective": "mdlm"}, "sampler": "remdm", "steps": STEPS,
                          "temperature": 0.8, "top_p": 0.9},
}


def run_case(case: dict) -> dict:
    """The case through dnadiff.sample: sha256 of the samples (int64, C order) and the NFE counts."""
    import dnadiff

    case = dict(case)
    model = golden_model(**case.pop("model"))
    template = case.pop("template", None)
    if template is not None:
        row = torch.as_tensor(model.tokenizer.encode(template.replace("N", "")))
        free = [i for i, c in enumerate(template) if c == "N"]
        fixed = torch.full((len(template),), model.tokenizer.mask_id, dtype=torch.long)
        fixed[[i for i in range(len(template)) if i not in free]] = row
        template = fixed.expand(NUM, -1).clone()
    torch.manual_seed(99)  # a sampler drawing from the global generator would show up as a changed hash
    res = dnadiff.sample(model, NUM, LENGTH, seed=SEED, template=template, **case)
    x = res.x.to(torch.int64).contiguous()
    stats = res.stats()
    return {"sha256": hashlib.sha256(x.numpy().tobytes()).hexdigest(), "first_row": x[0].tolist(),
            "nfe_total": stats["nfe_total"], "denoiser_rows": stats["denoiser_rows"],
            "steps_used": stats["steps_used"], "nfe_per_row": res.nfe_per_row.tolist()}


def all_cases() -> dict[str, dict]:
    from dnadiff.samplers import SAMPLERS

    return {**{n: _sampler_case(n) for n in SAMPLERS.names()}, **EXTRA_CASES}


def main(argv: list[str]) -> int:
    torch.set_num_threads(1)
    cases = all_cases()
    if "--add" in argv:  # never rewrites a stored case: a changed output is a failing test, not new golden data
        stored = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {"cases": {}}
        for name, case in cases.items():
            if name not in stored["cases"]:
                stored["cases"][name] = {"case": case, "expect": run_case(case)}
                print("added", name)
        stored["about"] = ("tests/helpers/golden_samples.py: dnadiff.sample on a fixed-weight GoldenNet, "
                           f"num={NUM} length={LENGTH} seed={SEED}; sha256 of the int64 samples")
        GOLDEN.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        return 0
    print(json.dumps({n: run_case(c) for n, c in cases.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
