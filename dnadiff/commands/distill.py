"""`dnadiff distill MODEL --steps K --out DIR`: a few-step student of a masked-diffusion model (SDTT)."""

from __future__ import annotations

import argparse

from dnadiff.errors import DnadiffError

HELP = "distil a diffusion model into a student that samples in a few steps (SDTT; DUO's DCD for udlm)"
DESCRIPTION = """Distil a trained masked-diffusion model (the teacher) into a student that samples in --steps
ancestral steps about as the teacher does in many: self-distillation through time (SDTT, Deschenaux &
Gulcehre 2024, arXiv 2410.21035). The student starts from the teacher's weights; each round halves the
steps, the student learning to do in one step what the round's teacher does in two, and then becomes the
next round's teacher. The training inputs are the partly masked sequences of the teacher's own sampler
(no data is read).

  dnadiff distill runs/x/model --steps 8 --out runs/x8              # teacher steps: its sample.steps
  dnadiff distill runs/x/model --steps 8 --teacher-steps 64 --round-updates 500 --out runs/x8
  dnadiff distill runs/x/model --steps 8 --out runs/x8 --resume     # continue a stopped run
  dnadiff sample runs/x8 --num 100 --out s.fa                        # samples with 8 steps by default

--steps must be the teacher's steps divided by a power of 2 (rounds = log2(teacher/student)). Targets
(--target): sdtt (the paper's: a position's prediction at the teacher step that revealed it, else the
last one) or marginal (the teacher's two-step distribution of the revealed token, the best a one-step
student can match). Losses (--loss): kl-bwd KL(student ‖ target, the paper's code's default), kl-fwd,
tvd, mse (on log-probabilities).

OUT is the run directory (distill_config.yaml, checkpoints/, logs/metrics.csv) and, at the end, a model
directory (config.json, model.safetensors, metrics.json) that dnadiff.load and `dnadiff sample` read; its
config.json's `distill` names the teacher and the settings. An existing OUT is refused unless --resume
(continue; the settings must match) or --overwrite.

Uniform-noise (udlm) models are distilled with DUO's discrete consistency distillation (Sahoo et al.
2025, arXiv 2506.10892, Alg. 1): the student at (z_t, t) learns the teacher's prediction at (z_s, s),
s = t - one teacher step, z_t and z_s the argmax of one Gaussian trajectory (the Gaussian-uniform
duality); the clean sequences are --pool-size samples of the teacher; --loss kl-bwd | kl-fwd."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", help="the teacher: a dnadiff masked-diffusion or udlm model directory")
    p.add_argument("--steps", type=int, required=True, help="the student's sampling steps K")
    p.add_argument("--out", required=True, help="output folder: run directory, then the student's model directory")
    p.add_argument("--teacher-steps", type=int, default=None,
                   help="the teacher's sampling steps (default: its sample.steps); K times a power of 2")
    p.add_argument("--round-updates", type=int, default=100, help="optimizer updates per halving round (default 100)")
    p.add_argument("--batch-size", type=int, default=16, help="teacher rollouts per update (default 16)")
    p.add_argument("--max-pairs", type=int, default=None,
                   help="student inputs per update, drawn from the rollouts' states (default: all of them)")
    p.add_argument("--length", type=int, default=None, help="sequence length (default: the model's sample.length)")
    p.add_argument("--loss", default="kl-bwd", help="kl-bwd (default) | kl-fwd | tvd | mse (tvd, mse: masked models)")
    p.add_argument("--target", default=None, help="masked models: sdtt (default) | marginal")
    p.add_argument("--pool-size", type=int, default=256,
                   help="udlm models: teacher samples used as the clean sequences (default 256)")
    p.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate (default 1e-4)")
    p.add_argument("--grad-clip", type=float, default=0.0, help="gradient norm clip (default 0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue the run in OUT from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUT")


def preflight(args: argparse.Namespace) -> None:
    """Before torch is imported (commands/preflight.py): OUT is not the teacher; an existing OUT unless
    --resume or --overwrite."""
    from pathlib import Path

    from dnadiff.commands.preflight import check_model_input, check_run_dir

    check_model_input(args.model_dir)  # the input first, then the destination
    if Path(args.out).resolve() == Path(args.model_dir).resolve():
        raise DnadiffError(f"--out {args.out}: is the teacher itself; choose another folder")
    check_run_dir(args.out, args.resume, args.overwrite)


def settings_of(args: argparse.Namespace) -> dict:
    return {"teacher_steps": args.teacher_steps, "steps": args.steps, "pool_size": args.pool_size,
            "round_updates": args.round_updates, "batch_size": args.batch_size, "length": args.length,
            "lr": args.lr, "loss": args.loss, "target": args.target, "max_pairs": args.max_pairs,
            "grad_clip": args.grad_clip, "seed": args.seed}


def teacher_config(model_dir: str):
    """The teacher's RunConfig, refused in one line when it cannot be distilled here."""
    from dnadiff.diffusion import OBJECTIVES
    from dnadiff.modelio import resolve
    from dnadiff.modelio.model_dir import is_model_dir

    source = resolve(model_dir)
    if source.official is not None:
        raise DnadiffError(f"{model_dir}: distill needs a dnadiff model directory (convert an official checkpoint "
                           "with dnadiff.load(...).save_pretrained(DIR) first)")
    if not is_model_dir(source.path):
        raise DnadiffError(f"{model_dir}: not a dnadiff model directory (no config.json)")
    cfg = source.config
    obj = OBJECTIVES.get(cfg.objective.name)
    if obj.autoregressive:
        raise DnadiffError(f"{model_dir}: an autoregressive model (objective {cfg.objective.name}) samples one token "
                           "a step; distill needs a masked-diffusion model")
    if not obj.generator:
        raise DnadiffError(f"{model_dir}: an {cfg.objective.name.upper()}-trained model is not a generator; "
                           "distill needs a masked-diffusion model")
    return cfg


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dnadiff.logs import log
    from dnadiff.training.distill_loop import complete_settings, distill
    from dnadiff.utils import format_table

    if args.resume and args.overwrite:
        raise DnadiffError("--resume and --overwrite exclude each other")
    if Path(args.out).resolve() == Path(args.model_dir).resolve():
        raise DnadiffError(f"--out {args.out}: is the teacher itself; choose another folder")
    cfg = teacher_config(args.model_dir)
    settings = complete_settings(args.model_dir, settings_of(args), cfg)
    metrics = distill(args.model_dir, settings, args.out, resume=args.resume, overwrite=args.overwrite,
                      threads=args.threads)
    print(format_table([metrics]))
    log.info("\nstudent model directory: %s (samples with --steps %d)", args.out, settings["steps"])
    return 0


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: the distillation settings as given (defaults filled in)."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in ("command", "print_config")}
