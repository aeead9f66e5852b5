"""`dnadiff train CONFIG [key=value ...]`."""

from __future__ import annotations

import argparse

from dnadiff.errors import DnadiffError

USAGE = "dnadiff train [options] CONFIG [key=value ...]   (CONFIG required, overrides optional)"
HELP = "train a model from a YAML config (writes runs/NAME/ with a model directory inside)"
DESCRIPTION = """Train a model from a YAML config; any key can be overridden as key=value.

  dnadiff train configs/experiments/tiny_dna_mdlm.yaml train.max_steps=50
  dnadiff train experiments/tiny_dna_mdlm --resume        # continue from its newest complete checkpoint

CONFIG is a file path or a name under the shipped configs/ folder. Writes runs/NAME/ (out_dir/name):
config.yaml, checkpoints/, logs/ (CSV, TensorBoard), loss_curve.png and model/ (the model directory
that `dnadiff eval`, `dnadiff sample` and dnadiff.load() read). Start from a pretrained network with
model.init_from=DIR (a dnadiff model directory or an official Caduceus/HyenaDNA HF directory)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", default=None,
                   help="required: YAML config file (or a name under configs/, e.g. experiments/tiny_dna_mdlm)")
    p.add_argument("overrides", nargs="*", default=[],
                   help="optional key=value overrides, e.g. train.lr=1e-3 model.preset=dna-467k")
    p.add_argument("--resume", action="store_true",
                   help="continue the run from its newest complete checkpoint (none yet: start it afresh, so a "
                        "requeued job can always pass --resume)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    p.add_argument("--run-dir", default=None, help="run directory (default: OUT_DIR/NAME from the config)")


def preflight(args: argparse.Namespace) -> None:
    """Before torch is imported (commands/preflight.py): the data files and the chromosomes the BED
    names, then an existing run directory (unless --resume or --overwrite)."""
    import os

    from dnadiff.commands.preflight import check_data_files, check_model_input, check_run_dir
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config

    cfg = load_config(RunConfig, args.config, args.overrides)
    check_data_files(cfg)  # the inputs first, then the destination
    check_model_input(cfg.model.init_from, "model.init_from: ")
    check_run_dir(args.run_dir or os.path.join(cfg.out_dir, cfg.name), args.resume, args.overwrite)


def run(args: argparse.Namespace) -> int:
    import os

    from dnadiff.commands.checks import check_train_inputs
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.logs import log
    from dnadiff.training import train
    from dnadiff.utils import summary_table, summary_values

    if args.resume and args.overwrite:
        raise DnadiffError("--resume and --overwrite exclude each other")
    cfg = load_config(RunConfig, args.config, args.overrides)
    check_train_inputs(cfg)  # data, tokenizer, sampler: refused before Lightning starts
    from dnadiff.training.interrupt import TrainingInterrupted

    try:
        result = train(cfg, resume=args.resume, overwrite=args.overwrite, run_dir=args.run_dir,
                       on_interrupt=lambda stop: log.warning("%s\ncontinue it with: %s", stop.describe(),
                                                             resume_command(args)))
    except TrainingInterrupted:  # Ctrl-C: said where it stopped and how to go on (on_interrupt)
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            # the command ends: a further Ctrl-C changes nothing. Python's shutdown resets its own handler to
            # the default one (not an ignored signal), which would end the process by the signal, not with 130
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            end_within(SHUTDOWN_SECONDS, 130)
        return 130
    from dnadiff.training.rundir import launch_rank

    if launch_rank() > 0:  # the other processes of a multi-process run: rank 0 prints the table
        return 0
    print(summary_table(result.metrics))  # fits a terminal; per-class values and the rest: metrics.json
    log.info("\nmodel directory: %s\nrun directory:   %s", result.model_dir, result.run_dir)
    nested = [k for k in result.metrics if k not in summary_values(result.metrics)]
    if nested and os.path.isfile(os.path.join(result.run_dir, "metrics.json")):
        log.info("all metrics (%s too): %s", ", ".join(nested), os.path.join(result.run_dir, "metrics.json"))
    return 0


SHUTDOWN_SECONDS = 15.0  # after a Ctrl-C, the longest the interpreter's own shutdown may take


def end_within(seconds: float, code: int) -> None:
    """End the process with `code` if the interpreter's shutdown after a Ctrl-C (joining threads, atexit hooks
    of the loggers and loaders a fit leaves behind) has not ended it within `seconds`: the user asked to stop.
    Checkpoints are complete by then (renamed into place) and the message is out; once seen in CI at load 6,
    such a shutdown waited for minutes after the message. A daemon timer: it dies with a normal exit."""
    import os
    import sys
    import threading

    def force() -> None:
        sys.stderr.flush()
        os._exit(code)

    timer = threading.Timer(seconds, force)
    timer.daemon = True
    timer.start()


def resume_command(args: argparse.Namespace) -> str:
    """The command that continues this run: the same config, overrides and run directory, with --resume
    (the overrides include train.threads when --threads was given: cli.start_threads)."""
    import shlex

    words = ["dnadiff", "train", str(args.config), *args.overrides]
    if args.run_dir:
        words += ["--run-dir", str(args.run_dir)]
    return shlex.join([*words, "--resume"])


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: the run config after defaults, overrides and the data root."""
    from dnadiff.config import RunConfig, to_dict
    from dnadiff.config_options import load_config

    return to_dict(load_config(RunConfig, args.config, args.overrides))
