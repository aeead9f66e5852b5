"""The rows and scales of pipelines/dna_perplexity.py (paper tab. 6): each scale's data, training and sizes,
each neural row's backbone, objective and initialisation, and the tiny --dry-run settings."""

from __future__ import annotations

SCALES = {
    # CPU: tiny networks (~20-30K parameters), 128-bp windows of the shared 21.6 Mb chr22 subset.
    "cpu": {
        "data": ["data.fasta={shared}/hg19_chr22_subset/chr22.fa.gz",
                 "data.bed={shared}/hg19_chr22_subset/sequences.bed", "data.seq_len=128", "data.rc_prob=0.5",
                 "data.max_n_frac=0.1"],
        "train": ["train.batch_size=16", "train.lr=3e-3", "train.warmup_steps=20", "train.ema=0.99",
                  "train.val_every=100000", "train.ckpt_every=100000", "train.val_batches=1", "train.progress=false",
                  "train.log_every=10", "train.threads=1"],
        "pretrain_steps": 300, "finetune_steps": 300, "d3pm_T": 1000,
        "presets": {"caduceus": "tiny", "mamba": "tiny", "hyena": "tiny", "plaid": "tiny"},
        "eval_windows": 256, "seeds": 3,
    },
    # Paper (app. D.7): HG38, L = 1024, batch 1024, Caduceus dna-467k; MLM pretraining then fine-tuning.
    "paper": {
        "data": ["data.fasta=data/hg38/hg38.ml.fa", "data.bed=data/hg38/sequences_human.bed", "data.seq_len=1024",
                 "data.num_workers=8"],
        "train": ["train.batch_size=128", "train.accumulate=8", "train.lr=3e-4", "train.warmup_steps=2500",
                  "train.ema=0.9999", "train.val_every=1000", "train.ckpt_every=1000"],
        "pretrain_steps": 10000, "finetune_steps": 10000, "d3pm_T": 1000,
        # tab. 6 sizes: Caduceus-PS d118 x 4 (470,702), Mamba d128 x 4 (468,608), HyenaDNA tiny-1k (436,096)
        # Plaid: tab. 6 gives 507K parameters; a DiT h96 x 3 with Plaid's embeddings and schedule has 500,720
        "presets": {"caduceus": "dna-467k", "mamba": "dna-465k", "hyena": "tiny-1k", "plaid": "dna-507k"},
        "eval_windows": 0, "seeds": 3,
    },
}


def row_specs(scale: dict) -> list[dict]:
    p, f, T = scale["pretrain_steps"], scale["finetune_steps"], scale["d3pm_T"]
    pre = scale["presets"]
    return [
        {"row": "Caduceus MLM (pretraining)", "key": "caduceus_mlm", "backbone": "caduceus", "preset": pre["caduceus"],
         "objective": "mlm", "steps": p, "kind": "masked-token CE (not a bound)"},
        {"row": "Caduceus MLM -> MDLM", "key": "caduceus_mdlm", "backbone": "caduceus", "objective": "mdlm",
         "init": "caduceus_mlm", "steps": f, "kind": "bound"},
        {"row": "Caduceus MLM -> SEDD", "key": "caduceus_sedd", "backbone": "caduceus", "objective": "sedd",
         "init": "caduceus_mlm", "steps": f, "kind": "bound"},
        {"row": f"Caduceus MLM -> D3PM (T={T})", "key": "caduceus_d3pm", "backbone": "caduceus", "objective": "d3pm",
         "T": T, "init": "caduceus_mlm", "steps": f, "kind": "bound"},
        {"row": "Mamba AR", "key": "mamba_ar", "backbone": "mamba", "preset": pre["mamba"], "objective": "ar",
         "steps": p + f, "kind": "exact"},
        {"row": "HyenaDNA AR", "key": "hyena_ar", "backbone": "hyena", "preset": pre["hyena"], "objective": "ar",
         "steps": p + f, "kind": "exact", "extra": ["model.overrides.causal=true"]},
        {"row": "HyenaDNA (bidirectional) MDLM", "key": "hyena_mdlm", "backbone": "hyena", "preset": pre["hyena"],
         "objective": "mdlm", "steps": p + f, "kind": "bound"},
        # Plaid (Gulrajani & Hashimoto 2023): its own embeddings and schedule, so from scratch with the AR rows'
        # budget; its bound (diffusion + reconstruction + prior, diffusion/plaid.py) is an upper bound like MDLM's
        {"row": "Plaid (DiT on learned embeddings)", "key": "plaid", "backbone": "dit", "preset": "tiny",
         "objective": "plaid", "steps": p + f, "kind": "bound", "extra": PLAID_SIZES[pre.get("plaid", "tiny")]},
        # the same objective around the Caduceus of the MLM/MDLM rows, post-hoc RC (Plaid feeds it embeddings, not
        # tokens, so no RC-equivariant PS): the model tab. 7's Plaid column fine-tunes (a Caduceus in every column)
        {"row": "Plaid (Caduceus-PH on learned embeddings)", "key": "plaid_caduceus", "backbone": "caduceus",
         "preset": pre["caduceus"], "objective": "plaid", "steps": p + f, "kind": "bound",
         "extra": ["model.overrides.rcps=false"]},
    ]


PLAID_SIZES = {
    "tiny": ["model.overrides.hidden_size=32", "model.overrides.n_heads=4", "model.overrides.n_blocks=2",
             "model.overrides.adaln_dim=16", "model.overrides.time_conditioning=true"],  # 42,416 parameters
    "dna-507k": ["model.overrides.hidden_size=96", "model.overrides.n_heads=4", "model.overrides.n_blocks=3",
                 "model.overrides.adaln_dim=64", "model.overrides.time_conditioning=true"],  # 500,720
}


DRY_RUN = {
    "data": ["data.fasta=null", "data.bed=null", "data.seq_len=32", "data.num_workers=0"],
    "train": ["train.max_steps=1", "train.batch_size=2", "train.accumulate=1", "train.val_every=100000",
              "train.ckpt_every=100000", "train.val_batches=1", "train.progress=false", "train.threads=1"],
    "eval_windows": 2,
    "markov_orders": (0, 3), "markov_max_order": 3,  # counts of the sample: a fraction of a second
}


CPU_PAPER_SIZES = {"caduceus": "dna-467k", "mamba": "gb-d128", "hyena": "tiny-1k", "plaid": "dna-507k"}
