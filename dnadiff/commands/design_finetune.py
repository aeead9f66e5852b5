"""`dnadiff design-finetune MODEL --reward SPEC --method drakes|policy_gradient|dpo --kl-weight β --out DIR`."""

from __future__ import annotations

import argparse
import math

from dnadiff.errors import DnadiffError

HELP = ("fine-tune a DNA generator toward a reward (DRAKES, policy gradient or offline DPO), kept close to the "
        "pretrained model")
DESCRIPTION = """Fine-tune a masked-diffusion DNA model so that its samples score high on a reward while
staying close to the pretrained model: maximise E[r(x)] − β·KL(fine-tuned ‖ pretrained), the KL over
the sampling trajectories. The optimum samples p*(x) ∝ p_pre(x)·exp(r(x)/β): a small β follows the
reward, a large one stays natural.

  dnadiff design-finetune runs/x/model --reward gc:0.5 --method drakes --kl-weight 0.1 --out runs/gc_drakes
  dnadiff design-finetune runs/x/model --reward classifier:runs/ft/classifier --target coding \\
      --method policy_gradient --kl-weight 0.05 --group-size 8 --out runs/coding_pg
  dnadiff design-finetune runs/x/model ... --out runs/gc_drakes --resume   # continue a stopped run
  dnadiff sample runs/gc_drakes --num 16 --out designs.fa                 # OUT is a model directory

Methods:
  drakes           direct reward backpropagation (Wang et al. 2025, arXiv 2410.13643): trajectories of
                   the model's own ancestral sampler with Gumbel-softmax draws (--gumbel-temperature τ,
                   default 0.1),
                   gradients through the last --truncate-steps steps, the exact per-step KL to the
                   pretrained transitions. Needs a reward that takes soft one-hot input: gc, gc:T,
                   motif:SEQ, classifier:DIR (not RCPS). Its options (--option KEY=VALUE):
                     estimator=soft              soft states through the live steps, straight-through once at
                                                 the reward's input (the official code; default): unbiased
                                                 as τ → 0
                     estimator=straight_through  a straight-through draw at every live step (the paper's
                                                 Algorithm 1; biased at every τ)
                     kl=all | live               the KL of every step (the paper's objective; default) or of
                                                 the last --truncate-steps only (the official truncate_kl)
                     final_temperature=τ1        anneal τ exponentially from --gumbel-temperature to τ1
                   On an enumerable chain, per-step straight-through at τ = 1 delivers 0.38-0.81 of the
                   true gradient per step, soft states at τ = 0.1 0.84-0.89 and at τ = 0.05 0.92-0.95; 300
                   updates there end 0.025 nats from p* (soft, τ = 0.1) against 0.113 (straight-through,
                   τ = 1) and 0.026 (policy gradient) (docs/references.md).
  policy_gradient  GRPO-style (SEPO, Zekri & Boullé 2025, arXiv 2502.01384): groups of --group-size
                   samples, group-centred advantages, the trajectory's step log-probabilities as the
                   likelihood, clipped ratio (--clip, reused for --ppo-epochs updates), KL to the
                   pretrained model. Any reward, including module:function.
  dpo              offline (no rollouts of the model being trained): DPO (Rafailov et al. 2023, eq. 7) on
                   the likelihoods of whole sampling trajectories (as Diffusion-DPO, Wallace et al. 2024):
                   --pool-size trajectories of the pretrained model sampled once, all pairs within groups of
                   --group-size ranked by Bradley–Terry probabilities σ(r_a − r_b); same optimum p*. Any
                   reward. (Its logged kl is −mean log-ratio on pretrained trajectories: KL(pre ‖ fine-tuned).)

Defaults sized to the model: --sample-steps T = the model's own sampling steps (so the model is trained
with the step count it samples with; another T is allowed, and the reach is then measured at both),
--truncate-steps K = ⌈T/4⌉, --batch-size B = 65536 // (length·T) within 2-16 (whole groups for
policy_gradient, dpo). What an update costs: a drakes update is about T forward passes and T + K
forward+backward passes of the network at batch B (kl=live: K + K), a policy_gradient update T
forward+backward and 2T forward passes. On the tiny bundled model (caduceus:tiny, length 128, T = 64:
K = 16, B = 8) a drakes update costs about 17 s of CPU time on one thread, longer on a busy machine (75 s
wall at load 13 on 2 cores); the former defaults (T = 128, K = 50, B = 16) took 65-126 s wall at load 2-6
(results/reward_update_cost.md).
After the first update the command prints its time and the ETA of the run.

Know the target: before training, --target-samples pretrained samples give the self-normalised
importance-sampling estimate of what p* scores and its KL from the pretrained model (with the effective
sample size: an ESS near 1 means p* is too far from the pretrained model for the estimate); after
training, --eval-samples samples of the fine-tuned model give what it reached (mean reward, trajectory
KL to the pretrained model). Both are printed and written to OUT/metrics.json.

OUT is the run directory (finetune_config.yaml, checkpoints/, logs/metrics.csv) and, at the end, a model
directory (config.json, model.safetensors, metrics.json) that dnadiff.load, `dnadiff sample` and
`dnadiff design` read; its config records the method, reward, β and the pretrained model. An existing
OUT is refused unless --resume (continue; the settings must match, --train-steps may grow) or
--overwrite."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", help="the pretrained dnadiff DNA model directory (masked diffusion)")
    p.add_argument("--reward", required=True, help="gc | gc:T | motif:SEQ | classifier:DIR | module:function")
    p.add_argument("--target", default=None, help="class name or index for --reward classifier:DIR")
    p.add_argument("--method", required=True, help="drakes | policy_gradient | dpo")
    p.add_argument("--kl-weight", type=float, required=True, help="β of the KL penalty (> 0; larger stays closer)")
    p.add_argument("--out", required=True, help="output folder: run directory, then the fine-tuned model directory")
    p.add_argument("--length", type=int, default=None, help="sequence length (default: the model's sample.length)")
    p.add_argument("--train-steps", type=int, default=100, help="optimizer updates (default 100)")
    p.add_argument("--sample-steps", type=int, default=None,
                   help="sampler steps T of each trajectory (default: the model's sampling steps)")
    p.add_argument("--truncate-steps", type=int, default=None,
                   help="drakes: gradient through the last K steps (default ⌈T/4⌉)")
    p.add_argument("--gumbel-temperature", type=float, default=0.1,
                   help="drakes: τ of the Gumbel-softmax (default 0.1)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="drakes: estimator=straight_through|soft, kl=all|live, final_temperature=τ1 (repeatable)")
    p.add_argument("--group-size", type=int, default=8,
                   help="policy_gradient, dpo: samples per group G (default 8)")
    p.add_argument("--ppo-epochs", type=int, default=1, help="policy_gradient: updates per sampled batch (default 1)")
    p.add_argument("--clip", type=float, default=0.2, help="policy_gradient: ratio clip ε (default 0.2)")
    p.add_argument("--advantage", default="center", help="policy_gradient: center (default; exact target) | std (GRPO)")
    p.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate (default 1e-4)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="trajectories per update (default: 65536 // (length·T) within 2-16)")
    p.add_argument("--grad-clip", type=float, default=0.0, help="gradient norm clip (default 0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pool-size", type=int, default=256,
                   help="dpo: pretrained trajectories sampled once and ranked by the reward (default 256)")
    p.add_argument("--target-samples", type=int, default=256,
                   help="pretrained samples for the SNIS estimate of the target's reward and KL (default 256; 0: none)")
    p.add_argument("--eval-samples", type=int, default=64,
                   help="fine-tuned samples for its final mean reward and KL to the pretrained (default 64; 0: none)")
    p.add_argument("--resume", action="store_true", help="continue the run in OUT from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUT")


def preflight(args: argparse.Namespace) -> None:
    """Before torch is imported (commands/preflight.py): an existing OUT unless --resume or --overwrite."""
    from pathlib import Path

    from dnadiff.commands.preflight import check_model_input, check_run_dir

    check_model_input(args.model_dir)  # the input first, then the destination
    if Path(args.out).resolve() == Path(args.model_dir).resolve():
        raise DnadiffError(f"--out {args.out}: is the pretrained model itself; choose another folder")
    check_run_dir(args.out, args.resume, args.overwrite)


def check_args(args: argparse.Namespace) -> None:
    """Everything typed, checked before any model is loaded (one line naming the option)."""
    from dnadiff.reward_tuning import METHODS
    from dnadiff.reward_tuning.policy_gradient import ADVANTAGES

    if args.method not in METHODS:
        raise DnadiffError(f"--method {args.method!r}: choose {' or '.join(METHODS)}")
    if args.resume and args.overwrite:
        raise DnadiffError("--resume and --overwrite exclude each other")
    if not (args.kl_weight > 0) or math.isinf(args.kl_weight):
        raise DnadiffError(f"--kl-weight must be a positive number, got {args.kl_weight}")
    for flag in ("length", "train_steps", "sample_steps", "truncate_steps", "group_size", "ppo_epochs", "batch_size"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            raise DnadiffError(f"--{flag.replace('_', '-')} must be positive, got {value}")
    for flag in ("gumbel_temperature", "lr", "clip"):
        value = getattr(args, flag)
        if not (value > 0) or math.isinf(value):
            raise DnadiffError(f"--{flag.replace('_', '-')} must be a positive number, got {value}")
    args.drakes_options = drakes_options(args)
    if args.method == "dpo" and args.pool_size < args.group_size:
        raise DnadiffError(f"--pool-size must be >= --group-size ({args.group_size}), got {args.pool_size}")
    for flag in ("target_samples", "eval_samples"):
        if getattr(args, flag) < 0:
            raise DnadiffError(f"--{flag.replace('_', '-')} must be >= 0, got {getattr(args, flag)}")
    if args.grad_clip < 0:
        raise DnadiffError(f"--grad-clip must be >= 0, got {args.grad_clip}")
    if args.advantage not in ADVANTAGES:
        raise DnadiffError(f"--advantage {args.advantage!r}: choose {' or '.join(ADVANTAGES)}")
    if args.method in ("policy_gradient", "dpo") and (args.group_size < 2 or (args.batch_size or 0) % args.group_size):
        raise DnadiffError(f"--batch-size {args.batch_size} must be a multiple of "
                           f"--group-size {args.group_size} (>= 2)")


DRAKES_OPTIONS = {"estimator": ("straight_through", "soft"), "kl": ("all", "live"), "final_temperature": None}


def drakes_options(args: argparse.Namespace) -> dict:
    """--option KEY=VALUE -> {estimator, kl, final_temperature} (drakes only), checked; unset: the defaults."""
    from dnadiff.commands.design import parse_options

    opts = parse_options(list(getattr(args, "option", None) or []))
    if opts and args.method != "drakes":
        raise DnadiffError(f"--option {next(iter(opts))}: an option of --method drakes (this run: {args.method})")
    for key, value in opts.items():
        if key not in DRAKES_OPTIONS:
            raise DnadiffError(f"--option {key}: unknown drakes option (known: {', '.join(DRAKES_OPTIONS)})")
        allowed = DRAKES_OPTIONS[key]
        if allowed is not None and value not in allowed:
            raise DnadiffError(f"--option {key}={value}: choose {' or '.join(allowed)}")
        if allowed is None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
                                or math.isinf(value)):
            raise DnadiffError(f"--option {key}={value}: must be a positive number")
    return {"estimator": opts.get("estimator", "soft"), "kl": opts.get("kl", "all"),
            "final_temperature": float(opts["final_temperature"]) if "final_temperature" in opts else None}


def settings_of(args: argparse.Namespace) -> dict:
    return {"method": args.method, "reward": args.reward, "target": args.target, "kl_weight": args.kl_weight,
            "length": args.length, "train_steps": args.train_steps, "sample_steps": args.sample_steps,
            "truncate_steps": args.truncate_steps, "gumbel_temperature": args.gumbel_temperature,
            **(getattr(args, "drakes_options", None) or drakes_options(args)),
            "group_size": args.group_size, "ppo_epochs": args.ppo_epochs, "clip": args.clip,
            "advantage": args.advantage, "lr": args.lr, "batch_size": args.batch_size, "grad_clip": args.grad_clip,
            "seed": args.seed, "target_samples": args.target_samples, "eval_samples": args.eval_samples,
            "pool_size": args.pool_size}


def run(args: argparse.Namespace) -> int:
    import torch

    from dnadiff.guidance.rewards import build_reward, soft_support
    from dnadiff.logs import log
    from dnadiff.modelio import resolve
    from dnadiff.training.reward_loop import complete_settings, reward_finetune
    from dnadiff.utils import format_table

    check_args(args)
    from pathlib import Path

    from dnadiff.commands.request import masked_diffusion_dna

    if Path(args.out).resolve() == Path(args.model_dir).resolve():
        raise DnadiffError(f"--out {args.out}: is the pretrained model itself; choose another folder")
    source = resolve(args.model_dir)
    if source.official is not None:
        raise DnadiffError(f"{args.model_dir}: design-finetune needs a dnadiff masked-diffusion DNA model directory")
    cfg = source.config
    if not masked_diffusion_dna(cfg):
        raise DnadiffError(f"{args.model_dir}: design-finetune needs a masked-diffusion DNA model "
                           f"(this one is {cfg.tokenizer.kind}, objective {cfg.objective.name})")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    reward = build_reward(args.reward, target=args.target, device=device)
    if args.method == "drakes":
        why = soft_support(reward)
        if why is not None:
            raise DnadiffError(f"--method drakes needs a reward that takes soft one-hot input: {why}; "
                               "use --method policy_gradient")
    settings = complete_settings(args.model_dir, settings_of(args), cfg.sample.length, cfg.sample.steps)
    metrics = reward_finetune(args.model_dir, settings, args.out, resume=args.resume, overwrite=args.overwrite,
                              reward=reward, threads=args.threads)
    print(format_table([metrics]))
    log.info("\nfine-tuned model directory: %s", args.out)
    return 0


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: the fine-tuning settings (defaults filled in)."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in ("command", "print_config")}
