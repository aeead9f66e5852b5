"""`dnadiff design MODEL --reward SPEC --method NAME`: guided DNA design (FASTA + JSON of rewards)."""

from __future__ import annotations

import argparse

from dnadiff.errors import DnadiffError

HELP = "design sequences that score high on a reward (classifier, GC, motif, user function)"
DESCRIPTION = """Steer a masked-diffusion DNA model toward a reward while sampling.

  dnadiff design MODEL --reward gc:0.42 --method smc --num 16 --length 200 --out designed.fa
  dnadiff design MODEL --reward classifier:runs/ft/classifier --target coding --method svdd --num 64 \
--length 500 --out d.fa
  dnadiff design MODEL --reward motif:TATAAA --method best_of_n --option n=16 --prefix ACGT --out d.fa
  dnadiff design MODEL --reward mypkg.rewards:score --method cg --option scale=2 --out d.fa

Rewards: {rewards}
gc: GC fraction; gc:T: -|GC - T|; motif:SEQ: count on both strands; classifier:DIR: log p(target | x)
of a `dnadiff finetune` OUT/classifier directory (--target names the class, default the last);
module:function: Long[B, L] token ids -> B floats.

Methods: {methods}
--option KEY=VALUE sets their options: none (the sampler alone), best_of_n (n=8), svdd
(candidates=8, alpha=0), smc (particles=16, ess_threshold=0.5, output=sample, alpha), cg (exact
classifier guidance, scale), cg_grad (first-order: gc, gc:T, motif, classifier without RCPS
conjoining; scale). Unset strengths come from the reward's range (one base substitution's effect u:
1/L for gc, 1 for motif and classifier): smc alpha = u, cg/cg_grad scale = 1/u; a module:function
reward needs them given. Exact cg states its cost (reward rows per design, estimated time) and
refuses a run over an hour unless --allow-slow.

--rc-symmetric averages the model's predictions and the reward over both strands. Writes OUT
(FASTA, one record per design with its reward) and OUT.json (per-sequence rewards, summary, NFE:
denoiser rows and reward evaluations per sequence, counted separately); an existing output is kept
unless --force."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", help="a dnadiff DNA model directory (masked diffusion)")
    p.add_argument("--reward", required=True, help="{rewards}")
    p.add_argument("--target", default=None, help="class name or index for --reward classifier:DIR")
    p.add_argument("--method", default="svdd", help="{methods} (default svdd)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="method option, e.g. --option particles=32 --option alpha=0.1 (repeatable)")
    p.add_argument("-n", "--num", type=int, default=4, help="number of designs (default 4)")
    p.add_argument("--length", type=int, default=None, help="length in bases (default: the model's sample.length)")
    p.add_argument("--sampler", default=None,
                   help="the diffusion sampler wrapped: {guidable_samplers} (default: the model's, e.g. "
                        "ancestral; udlm for udlm models)")
    p.add_argument("--steps", type=int, default=None, help="sampling steps (default: the model config's)")
    p.add_argument("--prefix", default=None, help="fixed sequence at the start")
    p.add_argument("--suffix", default=None, help="fixed sequence at the end")
    p.add_argument("--template-fasta", default=None, help="FASTA of templates: N marks the positions to fill")
    p.add_argument("--rc-symmetric", action="store_true", help="strand-averaged model predictions and reward")
    p.add_argument("--batch-size", type=int, default=None, help="designs per method call (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output FASTA (OUT.json is written beside it)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output")
    p.add_argument("--allow-slow", action="store_true",
                   help="run exact classifier guidance (cg) even when its estimated time exceeds an hour")


def parse_options(items: list[str]) -> dict:
    """`--option KEY=VALUE` items -> {key: value}, values parsed as `dnadiff sample --option` does."""
    from dnadiff.config import parse_overrides

    for item in items:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise DnadiffError(f"--option {item!r}: expected KEY=VALUE")
    return parse_overrides(items)


def check_args(args: argparse.Namespace):
    """Everything the user typed, checked before any model is loaded -> (the request, the method options)."""
    from dnadiff.commands.request import Request, check_prefix_suffix
    from dnadiff.guidance.methods import check_method_options
    from dnadiff.samplers import SAMPLERS

    req = Request.checked(args)
    check_prefix_suffix(args)
    if args.sampler in SAMPLERS and not SAMPLERS.get(args.sampler).guidable:
        raise DnadiffError(f"--sampler {args.sampler}: guidance wraps a single-window masked-diffusion sampler")
    return req, check_method_options(args.method, parse_options(args.option))


class DesignProgress:
    """The design bar: sampler steps over all batches, with designs done and their mean reward so far.

    Every method advances the wrapped sampler with `sampler.step` (candidates and particles in one
    call per step), so counting those calls through the state's step index gives the step whatever
    the method; the bar never passes steps x batches."""

    def __init__(self, sampler, steps: int, batches: int, num: int):
        from dnadiff.logs import progress_bar

        self.steps, self.num, self.batch, self.done, self.reward_sum = int(steps), num, 0, 0, 0.0
        self.bar = progress_bar(total=self.steps * batches, desc="design", unit="step")
        inner = sampler.step

        def step(state, logits, rng):
            new = inner(state, logits, rng)
            self._advance(self.batch * self.steps + min(self.steps, int(new.step)))
            return new

        sampler.step = step  # this instance only: the class's step is untouched

    def _advance(self, position: int) -> None:
        if position > self.bar.n:
            self.bar.update(position - self.bar.n)

    def batch_done(self, rewards) -> None:
        self.batch += 1
        self.done += int(rewards.shape[0])
        self.reward_sum += float(rewards.double().sum())
        self._advance(self.batch * self.steps)  # early stop (all unmasked): the batch is complete
        self.bar.set_postfix_str(f"designs {self.done}/{self.num}  reward mean {self.reward_sum / self.done:.4g}")

    def close(self) -> None:
        self.bar.close()


def summarize(values) -> dict:
    import numpy as np

    v = np.asarray(values, dtype=float)
    return {"mean": float(v.mean()), "std": float(v.std()), "min": float(v.min()), "median": float(np.median(v)),
            "max": float(v.max())}


def check_cg_cost(reward, model, sampler, token_ids, free: int, length: int, num: int, allow_slow: bool) -> None:
    """Say exact CG's cost up front (rows per design, a timed reward call) and refuse a run that
    would take more than an hour unless --allow-slow."""
    import time

    import torch

    from dnadiff.guidance import cg_rows_per_design, reward_capabilities
    from dnadiff.logs import log
    from dnadiff.utils import format_duration

    rows = cg_rows_per_design(model.schedule, sampler, len(token_ids), free)
    picks = torch.randint(len(token_ids), (32, length), generator=torch.Generator().manual_seed(0))
    probe = torch.as_tensor(token_ids)[picks]  # (32, L) random sequences, timed once
    counted = reward_capabilities(reward).counts_calls
    calls_before = reward.calls if counted else None
    start = time.perf_counter()
    reward(probe.to(model.device))
    per_row = (time.perf_counter() - start) / probe.shape[0]
    if counted:
        reward.calls = calls_before  # the probe is not part of the run's counts
    total = rows * per_row * num
    log.info("exact classifier guidance (cg): about %s reward rows per design (%d steps × masked positions × %d "
             "tokens), estimated %s for %d designs", f"{rows:,.0f}", sampler.steps, len(token_ids),
             format_duration(total), num)
    if total > 3600 and not allow_slow:
        raise DnadiffError(f"--method cg: about {rows:,.0f} reward rows per design, "
                           f"estimated {format_duration(total)} for "
                           f"{num} designs; use --method cg_grad (one reward gradient per step), fewer --steps or "
                           "--num, or --allow-slow")


def run(args: argparse.Namespace) -> int:
    import torch

    from dnadiff.commands.request import diffusion_dna, format_samples
    from dnadiff.guidance import METHODS, build_method, build_reward, default_strength, rc_averaged, reward_capabilities
    from dnadiff.logs import log
    from dnadiff.sampling import sample
    from dnadiff.utils import format_table, json_text, write_together

    req, options = check_args(args)
    declared = METHODS.get(args.method)  # what the method needs (checked by name in check_args)
    cfg = req.load_config()
    if cfg is not None and not diffusion_dna(cfg):
        raise DnadiffError(f"{args.model_dir}: design needs a diffusion DNA model "
                           f"(this one is {cfg.tokenizer.kind}, objective {cfg.objective.name})")
    out, stats_path = req.resolve_outputs("dna")
    if out is None:
        raise DnadiffError("--out: give a FASTA file name (the JSON of rewards goes beside it)")
    req.read_templates()  # the inputs first, then the destination
    req.reserve_outputs()  # before the model is loaded, not after minutes of design

    model = req.load_model()
    device = model.device
    reward = build_reward(args.reward, target=args.target, device=device)
    if args.rc_symmetric:
        reward = rc_averaged(reward, model.tokenizer.complement_map())
    tok = model.tokenizer
    if declared.needs_token_ids:
        options.setdefault("token_ids", list(tok.nucleotide_ids))
    sampler = model.build_sampler(args.sampler or model.objective.default_sampler or "ancestral", args.steps)
    length = req.length(model)
    chosen = default_strength(args.method, reward, length, options, args.reward)  # from the reward's range
    method = build_method(args.method, sampler, reward, **options)  # unknown options: checked by name there
    if declared.needs_soft_reward and not reward_capabilities(reward).soft:
        raise DnadiffError(f"--method {args.method} needs a differentiable reward (gc, gc:T, motif, classifier), "
                           f"not {args.reward}")
    template = req.template(model, length)
    if declared.states_cost:
        free = length if template is None else int((template == tok.mask_id).sum(1).max())
        check_cg_cost(reward, model, sampler, options["token_ids"], free, length, args.num, args.allow_slow)
    chunk = args.batch_size or args.num
    rewards, totals = [], {}
    log.info("designing %d sequence(s) of %d bp: --method %s over %s, %d step(s) per batch of %d", args.num, length,
             args.method, sampler.name, sampler.steps or length, chunk)
    bar = DesignProgress(sampler, sampler.steps or length, -(-args.num // chunk), args.num)

    def on_batch(method, x):  # the batch's rewards and costs (the method's, not the sampler's)
        rewards.append(method.last_rewards.cpu())
        for key in ("denoiser_calls", "denoiser_rows", "reward_calls"):
            totals[key] = totals.get(key, 0) + method.last_stats[key]
        bar.batch_done(method.last_rewards)

    try:  # the library call: batches, one stream per sequence, the template, --rc-symmetric, banned tokens
        res = sample(model, args.num, length, sampler=method, template=template, batch_size=chunk, seed=args.seed,
                     rc_symmetric=args.rc_symmetric, on_batch=on_batch)
    finally:
        bar.close()
    wall, steps = res.wall_seconds, res.steps_used
    x, r = res.x, torch.cat(rewards).double()
    texts = model.decode(x)
    name = reward_capabilities(reward).name or args.reward
    records = [(f"design_{i} method={args.method} reward={name} value={float(r[i]):.6g} seed={args.seed}", s)
               for i, s in enumerate(texts)]
    summary = {"method": args.method, "reward": name, "num": args.num, "length": length,
               **{f"reward_{k}": v for k, v in summarize(r.tolist()).items()},
               "nfe_per_sequence": totals["denoiser_rows"] / args.num,
               "reward_evals_per_sequence": totals["reward_calls"] / args.num, "wall_seconds": round(wall, 3)}
    stats = {
        "model": str(args.model_dir), "reward": name, "reward_spec": args.reward, "target": args.target,
        "method": args.method, "options": options, "sampler": sampler.name, "steps": sampler.steps, "steps_used": steps,
        "rc_symmetric": args.rc_symmetric, "seed": args.seed, "default_options": chosen, **totals, "summary": summary,
        "rewards": [{"id": f"design_{i}", "reward": float(v)} for i, v in enumerate(r.tolist())],
        "out": out,
    }
    write_together([(out, format_samples(records, "dna", out)),
                    (stats_path, json_text(stats))])
    print(format_table([summary]))  # the result on stdout (progress and logs on stderr), as sample and eval
    log.info("\nwrote %s and %s", out, stats_path)
    return 0


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: every option of this command with its value (defaults filled in)."""
    opts = {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in ("command", "print_config")}
    opts["option"] = parse_options(args.option)
    return opts
