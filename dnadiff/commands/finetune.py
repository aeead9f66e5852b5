"""`dnadiff finetune CONFIG [key=value ...]`: Genomic Benchmarks fine-tuning with seeds/folds (tab. 7)."""

from __future__ import annotations

import argparse

USAGE = "dnadiff finetune [options] CONFIG [key=value ...]   (CONFIG required, overrides optional)"
HELP = "fine-tune a backbone on a DNA classification benchmark (seeds or k folds) -> JSON + table"
DESCRIPTION = """Fine-tune a backbone on a labelled DNA benchmark and report accuracy, MCC, macro-F1 and
AUROC per run and as mean ± range over runs, the range being max − min (the "±" of the MDLM
paper's tab. 7 protocol).

CONFIG is a YAML file or a name under the shipped configs/, e.g. experiments/tiny_finetune
(a couple of minutes on a laptop CPU) or finetune/finetune_human_enhancers_cohn. The data set
is a folder in the genomic-benchmarks layout NAME/{train,test}/CLASS/*.txt, or the name of a
Genomic Benchmarks set in ~/.genomic_benchmarks (add --download to fetch it).

The backbone is `model.init_from` (a dnadiff model directory or an official Caduceus/HyenaDNA
Hugging Face directory) or, when that is empty, a fresh `model.backbone` at `model.preset`.

Protocols: `paper` (one random 90/10 train/valid split per seed, best validation accuracy epoch
scored on the test set) and `kfold` (stratified k-fold CV). The learning rate is train.lr when
set (the key `dnadiff train` uses), else chosen from train.lr_grid on validation accuracy only;
warmup is train.warmup_steps when set, else train.warmup_frac of the steps.

Examples:
  dnadiff finetune experiments/tiny_finetune
  dnadiff finetune finetune/finetune_human_nontata_promoters model.init_from=runs/x/model
  dnadiff finetune my.yaml data.dataset=human_enhancers_cohn protocol.name=kfold train.epochs=3

Writes OUT/config.yaml, OUT/results.json, OUT/results.md and per-run CSV logs under
OUT/logs/lr*/RUN/metrics.csv, where OUT is --out or out_dir/name from the config. An OUT that holds
an earlier job's results (results.json, or the finished runs of an interrupted job) is refused unless
--resume (reuse the finished runs of the same config) or --overwrite (replace the results)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", default=None,
                   help="required: YAML config file, or a name under the shipped configs/ folder")
    p.add_argument("overrides", nargs="*", default=[], metavar="key=value",
                   help="optional config overrides, e.g. train.epochs=3")
    p.add_argument("--out", default=None, help="output folder (default: out_dir/name from the config)")
    p.add_argument("--dataset", default=None, help="benchmark folder or Genomic Benchmarks name (sets data.dataset)")
    p.add_argument("--init-from", default=None, help="model directory to start from (sets model.init_from)")
    p.add_argument("--download", action="store_true", help="allow downloading a named Genomic Benchmarks set")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--resume", action="store_true",
                   help="reuse the finished runs recorded in OUT/runs/ by an interrupted job of the same config")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the results of an earlier job in OUT (without it or --resume, such an OUT is refused)")


def preflight(args: argparse.Namespace) -> None:
    """Before torch is imported (commands/preflight.py): an OUT holding earlier results (unless --resume
    or --overwrite), and a data set folder that is not one (one level too high lists the sets in it)."""
    import os

    from dnadiff.classifier_tuning.config import load_finetune_config
    from dnadiff.commands.preflight import check_benchmark_folder, check_model_input, check_results_dir

    cfg = load_finetune_config(args.config, finetune_overrides(args))
    check_benchmark_folder(cfg.data.dataset, "data.dataset", cfg.data.root,  # the input first
                           set_with="--dataset " if args.dataset else None)
    check_model_input(cfg.model.init_from, "model.init_from: ")
    check_results_dir(args.out or os.path.join(cfg.out_dir, cfg.name), args.resume, args.overwrite)


def run(args: argparse.Namespace) -> int:
    from dnadiff.classifier_tuning.config import load_finetune_config
    from dnadiff.classifier_tuning.protocol import run_rows
    from dnadiff.classifier_tuning.runs import run_finetune
    from dnadiff.logs import log
    from dnadiff.utils import format_table

    cfg = load_finetune_config(args.config, finetune_overrides(args))
    result = run_finetune(cfg, args.out, resume=args.resume)
    from dnadiff.training.rundir import launch_rank

    if launch_rank() > 0:  # the other processes of a multi-process job: rank 0 prints the table
        return 0
    print(format_table(run_rows(result)))
    out = args.out or f"{cfg.out_dir}/{cfg.name}"
    log.info("\nmajority-class baseline %.4f; wall %.0f s", result["majority_baseline"], result["wall_s"])
    log.info("wrote %s/results.json and %s/results.md", out, out)
    return 0


def finetune_overrides(args: argparse.Namespace) -> list[str]:
    """key=value overrides with the options that set config keys (--dataset, --init-from, ...)."""
    import json

    overrides = list(args.overrides)
    if args.dataset:
        overrides.append(f"data.dataset={json.dumps(args.dataset)}")
    if args.init_from:
        overrides.append(f"model.init_from={json.dumps(args.init_from)}")
    if args.download:
        overrides.append("data.download=true")
    if args.no_progress:
        overrides.append("train.progress=false")
    return overrides


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: the fine-tuning config after defaults, overrides, options and the data root."""
    from dnadiff.classifier_tuning.config import load_finetune_config
    from dnadiff.config import to_dict

    return to_dict(load_finetune_config(args.config, finetune_overrides(args)))
