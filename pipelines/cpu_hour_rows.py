"""The cpu-hour pipeline's rows, validation sweeps and data / dry-run settings (pipelines/cpu_hour.py).

How the settings were chosen (valid split only; `--sweep ROW` reruns a sweep):
  - Mamba AR, validation sweep of 4 minutes per candidate (results/cpu_hour_sweep_mamba_ar.md;
    `python pipelines/cpu_hour.py --sweep mamba_ar --sweep-minutes 4`, 22.5 min, load average ~6.5 on
    the 2 cores shared by 9 engineers), valid bits/base at the end: d64x2 L1024 batch 8: 1.9509 (47
    steps); d32x2 L1024: 1.9175 (122); d64x2 L128 batch 64: 1.8915 (265 steps); d128x4 L1024: 2.2236
    (13); d64x2 L1024 lr 1e-3: 1.9870 (68). Shipped: d64x2, 128-bp windows, batch 64 (8,192 tokens a
    step either way, but 5.6x the steps of L1024 here, and the lowest valid bits/base even though its
    windows give each base less context). Short runs on a loaded machine: the ranking at 60 minutes
    may differ (the lead reruns the sweep with --sweep-minutes 15 on idle cores).
  - Caduceus MDLM, the same kind of sweep (results/cpu_hour_sweep_caduceus_mdlm.md; `--sweep
    caduceus_mdlm --sweep-minutes 4`, 28.9 min, load ~7): d64x2 L1024 batch 8: 2.1822 (17 steps);
    d32x2 L1024: 2.7751 (15); d64x2 L128 batch 64: 1.9978 (26); Caduceus-PH (no RC equivariance)
    L1024: 2.1680 (28); lr 1e-3 L1024: 2.0320 (39). Shipped: Caduceus-PS d64x2, 128-bp windows,
    batch 64, lr 3e-3. These runs did 15-39 steps (a bidirectional RC-equivariant Caduceus is ~4x
    the work of the causal Mamba per token, and the machine was loaded): the differences between
    PS/PH and lr 1e-3/3e-3 are within what the step counts explain; rerun the sweep for 15 minutes
    per candidate on idle cores before trusting them (SWEEP has the L128 variants of both).
  - lr 3e-3 constant (no cosine: the step count a wall-clock budget reaches is not known in advance,
    and a cosine over max_steps would never decay), EMA 0.999 (0.99 in the 300-step runs);
  - MDLM from scratch in the shipped row; the two-stage row caduceus_mlm_mdlm (MLM a quarter of the hour,
    all windows) measured later: a tie with Markov like the rest (results/cpu_hour_mlm_nwin.md);
    no time conditioning (Caduceus has none; the MDLM paper's DNA models neither);
  - eval: K = 4 stratified t-samples per window for the MDLM bound (dnadiff/eval/perplexity.py,
    stratify_repeats: one t per quarter of [t_min, 1] in each window): the same bound, less MC noise;
    training draws t low-discrepancy over the batch (objective.stratified, MDLM app. D.3).
    An importance-weighted (IWAE-style) average over t-samples is not used: one t-sample of the MDLM
    loss is unbiased for the NELBO, not the log of an unbiased likelihood estimate, so it bounds nothing.
  Tried later on valid, beside this pipeline: MLM -> MDLM at equal steps (benchmarks/mlm_then_mdlm.py,
  results/mlm_then_mdlm_valid.json) and EMA on/off (benchmarks/ema_vs_raw.py,
  results/ema_vs_raw_valid.json); their figures are in results/cpu_hour.md's reading. Not tried: the
  time-conditioning choice (Caduceus has no time input), more than 2 layers at 128 bp.
  A candidate with another window length is scored on its own
  valid windows (the same bases, cut differently); shorter windows give a base less context, so
  its number is if anything pessimistic.
"""

ROWS = {
    "mamba_ar": {"row": "Mamba AR (cpu-hour)", "config": "experiments/cpu_hour_mamba_ar", "kind": "exact"},
    "caduceus_mdlm": {"row": "Caduceus MDLM (cpu-hour)", "config": "experiments/cpu_hour_caduceus_mdlm",
                      "kind": "bound"},
    # opt-in: the cpu-hour MDLM trained on from its weights (fresh Adam, 50 warm-up steps), the lr decayed by a
    # cosine to 0 over `continue_steps` (about the steps one budget reached the first time), within one more
    # budget: where the cpu-hour curve was heading (measured: no gain on valid, results/cpu_hour_2h.md)
    "caduceus_mdlm_2h": {"row": "Caduceus MDLM (cpu-hour + 3,600 steps cosine)",
                         "config": "experiments/cpu_hour_caduceus_mdlm",
                         "kind": "bound", "continues": "caduceus_mdlm",
                         "extra": ["train.lr_schedule=cosine", "train.warmup_steps=50"], "continue_steps": 3600},
    # opt-in: likewise for at most 35 minutes, on windows of any N fraction as the evaluation tiles them
    # (training crops are otherwise kept only at <= 10% N; about a tenth of the scored windows hold more,
    # and on them the bidirectional MDLM, which reads the N runs on both sides, lost most: benchmarks/padded_windows.py)
    "caduceus_mdlm_nwin": {"row": "Caduceus MDLM (cpu-hour + 35 min on all windows, cosine)",
                           "config": "experiments/cpu_hour_caduceus_mdlm", "kind": "bound",
                           "continues": "caduceus_mdlm",
                           "extra": ["train.lr_schedule=cosine", "train.warmup_steps=50", "data.max_n_frac=1.0"],
                           "continue_steps": 1800, "minutes": 35.0},
    # opt-in: the two changes that helped on valid, from scratch within one budget: a quarter of it Caduceus MLM
    # (15% masked, 80/10/10; benchmarks/mlm_then_mdlm.py: -0.0036 at equal steps), then MDLM from those weights
    # (fresh Adam), both on crops of any N fraction (the N-window loss of results/padded_windows_valid.json)
    "caduceus_mlm_mdlm": {"row": "Caduceus MLM 1/4 -> MDLM 3/4 of the budget (all windows)",
                          "config": "experiments/cpu_hour_caduceus_mdlm", "kind": "bound",
                          "first_stage": {"share": 0.25, "suffix": "mlm", "over": ["objective.name=mlm"]},
                          "extra": ["data.max_n_frac=1.0"]},
    # opt-in (issue 33 §3, the PH-vs-PS lever): the two-stage row with Caduceus-PH (RC augmentation, no RC
    # equivariance: half the scans of PS per token, so more steps in the same wall clock)
    "caduceus_mlm_mdlm_ph": {"row": "Caduceus-PH MLM 1/4 -> MDLM 3/4 of the budget (all windows)",
                             "config": "experiments/cpu_hour_caduceus_mdlm", "kind": "bound",
                             "first_stage": {"share": 0.25, "suffix": "mlm", "over": ["objective.name=mlm"]},
                             "extra": ["data.max_n_frac=1.0", "model.preset=tiny-ph"]},
    # opt-in (issue 33 §3, the AR-adaptation lever): half the budget the cpu-hour Mamba AR, the other half an
    # MDLM adapted from it (model.adapt_ar: Caduceus-PH of the same d64 x 2 that starts as the AR,
    # dnadiff/backbones/ar_adapt.py; fresh Adam at a tenth of the AR's lr, as adapted LMs are tuned gently)
    "caduceus_mdlm_from_ar": {"row": "Mamba AR 1/2 -> adapted Caduceus-PH MDLM 1/2 of the budget (all windows)",
                              "config": "experiments/cpu_hour_caduceus_mdlm", "kind": "bound",
                              "first_stage": {"share": 0.5, "suffix": "ar", "config": "experiments/cpu_hour_mamba_ar",
                                              "over": [], "then": ["model.adapt_ar=true", "train.lr=3e-4"]},
                              "extra": ["data.max_n_frac=1.0"]},  # both stages, as caduceus_mlm_mdlm
    # opt-in (issue 33 §3, another bidirectional network): a DiT MDLM within the same budget
    "dit_mdlm": {"row": "DiT MDLM (cpu-hour)", "config": "experiments/cpu_hour_dit_mdlm", "kind": "bound",
                 "dry_model": ["model.overrides.hidden_size=16", "model.overrides.n_heads=2"]},
    # opt-in (issue 48): the paper's continuous-diffusion row, Plaid, on the same DiT, data and budget
    "dit_plaid": {"row": "DiT Plaid (cpu-hour)", "config": "experiments/cpu_hour_dit_plaid", "kind": "bound",
                  "dry_model": ["model.overrides.hidden_size=16", "model.overrides.n_heads=2"]},
}
DEFAULT_ROWS = ("mamba_ar", "caduceus_mdlm")
MARKOV = {"row": "Markov best k on valid", "config": "experiments/tiny_dna_markov", "kind": "exact"}
SCALES = {"cpu-hour": {"minutes": 60.0, "eval_windows": 2000, "t_samples": 4}}
# --sweep ROW: candidate settings (config overrides) compared on the valid windows only
SWEEP = {
    # the sweep run for this commit (results/cpu_hour_sweep_mamba_ar.md) had L1024 batch 8 as its base; the
    # shipped config is now its winner, d64x2_L128_b64, and these names give every candidate's full settings
    "mamba_ar": {
        "d64x2_L1024": ["data.seq_len=1024", "train.batch_size=8"],
        "d32x2_L1024": ["data.seq_len=1024", "train.batch_size=8", "model.overrides.d_model=32"],
        "d64x2_L128_b64": [],
        "d128x4_L1024": ["data.seq_len=1024", "train.batch_size=8", "model.overrides.d_model=128",
                         "model.overrides.n_layer=4"],
        "d64x2_lr1e-3": ["data.seq_len=1024", "train.batch_size=8", "train.lr=1e-3"],
        "d64x2_L256_b32": ["data.seq_len=256", "train.batch_size=32"],
    },
    # likewise (results/cpu_hour_sweep_caduceus_mdlm.md ran on the L1024 batch 8 base; its winner is shipped)
    "caduceus_mdlm": {
        "d64x2_L1024": ["data.seq_len=1024", "train.batch_size=8"],
        "d32x2_L1024": ["data.seq_len=1024", "train.batch_size=8", "model.overrides.d_model=32"],
        "d64x2_L128_b64": [],
        "d64x2_ph": ["data.seq_len=1024", "train.batch_size=8", "model.preset=tiny-ph"],
        "d64x2_lr1e-3": ["data.seq_len=1024", "train.batch_size=8", "train.lr=1e-3"],
        "d64x2_L128_ph": ["model.preset=tiny-ph"],
        "d64x2_L128_lr1e-3": ["train.lr=1e-3"],
    },
    # DiT (results/cpu_hour_sweep_dit_mdlm.md ran on an h128 x 2, lr 1e-3 base; its winner h64x2_lr3e-3 is shipped)
    "dit_mdlm": {
        "h128x2_lr1e-3": ["model.overrides.hidden_size=128", "train.lr=1e-3"],
        "h64x2_lr3e-3": [],
        "h128x4_lr1e-3": ["model.overrides.hidden_size=128", "model.overrides.n_blocks=4", "train.lr=1e-3"],
    },
}
DATA = ["data.fasta={shared}/hg19_chr22_subset/chr22.fa.gz", "data.bed={shared}/hg19_chr22_subset/sequences.bed"]
DRY_RUN = {"data": ["data.fasta=null", "data.bed=null", "data.seq_len=32"],
           "train": ["train.max_steps=2", "train.batch_size=2", "train.val_every=1", "train.val_batches=2",
                     "train.warmup_steps=1", "train.threads=1"],
           # the chunked scan: no numba compile (~30 s) for two steps
           "model": ["model.overrides.d_model=16", "model.overrides.scan_impl=chunked"],
           "minutes": 0.5, "eval_windows": 4, "t_samples": 2, "markov_max_order": 3}
