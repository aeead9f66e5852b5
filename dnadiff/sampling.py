"""Sampling as a library call: `dnadiff.sample(model, num, length, ...)` -> sequences and statistics.

    import dnadiff
    model = dnadiff.load("runs/tiny_dna_mdlm/model")
    res = dnadiff.sample(model, 8, 256, sampler="ancestral", steps=64, seed=0, batch_size=4)
    res.x                   # Long[8, 256] token ids (CPU); model.decode(res.x) -> strings
    res.stats()             # NFE (total, per batch, per sequence), steps used, wall time, tokens/s

It owns what a sampling run is beyond one sampler call: the batches (`batch_size` sequences per call;
None: every sequence at once on a GPU or for an AR model, else calls of about CPU_TOKENS_PER_CALL
tokens), one random stream per sequence (`seed`, `first_index`: the samples do not depend on the
batch size, and `seed=S, first_index=I, num=1` regenerates record I), the statistics, and progress:
`on_step(done, batch, step)` after every network call, with `done` the steps finished over the whole
run (at most `steps_per_batch` a batch), `batch` the batch under way (1-based) and `step` its step.
`dnadiff sample` is this call plus argument checks and output files.

The one owner of a sampling run: `sampler_name` chooses the name, `resolve_sampler` builds the sampler
from a name (or takes one already built) once per run, with the model's defaults and checks; `sample`
runs it batch by batch, counting the network calls in one place (a CountingDenoiser around the model,
whose `on_call` drives `on_step`: progress bars, timing and statistics hang on that callback).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.samplers import SAMPLERS, SeedStream, build_sampler

# CPU denoiser calls of ~8K tokens keep the activations in cache: 8 x 1,024 tokens a call ran at 1.75x the
# tokens/s of 64 x 1,024 on one thread (benchmarks/sample_batch.py, results/sample_batch_cpu*.json)
CPU_TOKENS_PER_CALL = 8192


def default_batch_size(num: int, length: int, model, tokens_per_call: int = CPU_TOKENS_PER_CALL) -> int:
    """Sequences per sampler call: all of them on a GPU or for an AR model (its steps are one token per
    sequence), else calls of about `tokens_per_call` tokens."""
    if model.is_autoregressive or model.device.type != "cpu":
        return num
    return max(1, min(num, tokens_per_call // max(1, length)))


@dataclass
class SampleResult:
    """What `sample` returns: the samples and what they cost."""

    x: Tensor  # Long[num, length], CPU
    sampler: Any  # the sampler of the last batch (its name, steps, eps)
    batch_size: int
    num_batches: int
    nfe_total: int  # network passes over every batch (a CFG or strand-averaged step: two)
    nfe_per_row: Tensor | None  # Long[num]: the passes each sequence took part in (None: a guidance method)
    steps_used: int  # loop steps taken (max over batches; a sampler stops early when all is unmasked)
    wall_seconds: float
    seed: int = 0
    first_index: int = 0
    extra: dict = field(default_factory=dict)

    def stats(self) -> dict[str, Any]:
        """The statistics `dnadiff sample` writes (OUT.json) and prints, in its order."""
        num, length = self.x.shape
        smp, wall, rows = self.sampler, self.wall_seconds, self.nfe_per_row
        return {
            "sampler": smp.name, "num": int(num), "length": int(length), "batch_size": self.batch_size,
            "nfe_total": self.nfe_total, "nfe_per_batch": self.nfe_total / max(1, self.num_batches),
            # per sequence (the cached sampler skips sequences that did not change): rows pushed through
            # the network, their mean per sequence and the range over sequences
            "denoiser_rows": int(rows.sum()), "nfe_per_sequence": float(rows.double().mean()),
            "nfe_per_sequence_min": int(rows.min()), "nfe_per_sequence_max": int(rows.max()),
            "wall_seconds": round(wall, 3), "seconds_per_sample": wall / num,
            "tokens_per_second": num * length / wall,
            # steps: the sampler's step count (None where it has none: first_hitting, autoregressive);
            # steps_used: loop steps actually taken (max over batches; early stop when all is unmasked)
            "steps": smp.steps if smp.has_steps else None,
            "steps_used": self.steps_used, "eps": smp.eps if smp.has_time else None,
            "seed": self.seed, "first_index": self.first_index,
            "seed_stream": "per-sequence counter-based (independent of --batch-size); "
                           "record I: --seed S --first-index I",
        }


def sample_records(res: SampleResult, texts: list[str], label: int | str | None = None,
                   guidance: float = 0.0) -> list[tuple[str, str]]:
    """(header, text) of each sample as `dnadiff sample` writes them: each header names its random stream,
    so `seed=S, first_index=I, num=1` regenerates that record alone."""
    from dnadiff.data.class_names import canonical

    tag = f" class={canonical(label)} guidance={guidance}" if label is not None else ""  # hESCT0 -> hESC
    name, length, first = res.sampler.name, int(res.x.shape[1]), res.first_index
    return [(f"sample_{first + i} sampler={name} length={length} seed={res.seed} index={first + i}{tag}", s)
            for i, s in enumerate(texts)]


def sampler_name(requested: str | None, objective=None, config=None) -> str:
    """The sampler a run uses: the one asked for, else the objective's own (`autoregressive` for AR models,
    `udlm` for uniform noise), else the config's `sample.sampler` (ancestral without a config). The one
    place the name is chosen: `resolve_sampler`, and `dnadiff sample` before the weights load, call it."""
    own = None if objective is None else objective.default_sampler  # declared by every Objective (None: none)
    return requested or own or (config.sample.sampler if config is not None else "ancestral")


def resolve_sampler(model, sampler: Any = None, steps: int | None = None, **options: Any):
    """The sampler of a run on `model` (a DiffusionModel, or the config-only model.ModelSpec), built once:
    `sampler` a registered name (None: `sampler_name`'s choice) built with the config's options (when it is
    the config's sampler), then
    `options`, then the model's defaults (the sampler's `defaults_from`; an explicit `steps` beats the
    config's), after checking that it fits the model (AR or not, its noise, eps >= the training t_min).
    A sampler or guidance method already built is returned as it is (it holds its steps and options)."""
    if sampler is not None and not isinstance(sampler, str):
        if steps is not None or options:
            raise DnadiffError("a built sampler takes no steps or sampler options: give them when building it")
        return sampler
    objective, cfg = model.objective, model.config
    if not objective.generator:
        raise DnadiffError(f"an {objective.name.upper()}-trained model is not a generator: fine-tune it with "
                           "the mdlm objective first")
    name = sampler_name(sampler, objective, cfg)
    cls = SAMPLERS.get(name) if name in SAMPLERS else None  # an unknown name: the registry's error below
    if (cls is not None and cls.autoregressive) != model.is_autoregressive:
        kind = "an AR model samples only" if model.is_autoregressive else "only AR models sample"
        ar_name = objective.default_sampler or SAMPLERS.where(autoregressive=True)[0]
        raise DnadiffError(f"sampler {name!r}: {kind} with {ar_name!r}")
    noise = objective.noise
    if cls is not None and not cls.autoregressive and cls.noise != noise:
        fits = " or ".join(n for n in SAMPLERS.where(noise=noise) if not SAMPLERS.get(n).autoregressive)
        raise DnadiffError(f"sampler {name!r} samples {cls.noise} noise; this {objective.name} model "
                           f"({noise} noise) samples with {fits}")
    opts = dict(cfg.sample.options) if name == cfg.sample.sampler else {}
    opts.update(options)
    if cls is not None and not cls.has_steps:
        if steps and not cls.autoregressive:
            raise DnadiffError(f"sampler {name!r} has no steps (one call per generated token): drop --steps")
        opts.pop("steps", None)  # AR: one step per position, a diffusion step count does not apply
    else:
        if steps:
            opts["steps"] = steps  # an explicit argument beats the config's options
        opts.setdefault("steps", cfg.sample.steps)
    for key, value in model.sampler_defaults(name).items():
        opts.setdefault(key, value)
    if "eps" in opts and (cls is None or cls.has_time) and float(opts["eps"]) < model.sampling_eps:
        raise DnadiffError(f"sampler option eps={opts['eps']} is below the model's training t_min "
                           f"{model.sampling_eps} (objective.t_min): it would query times the model never saw")
    return build_sampler(name, **opts)  # an unknown name: the registry's one-line error


def progress_steps_of(smp, model, length: int) -> int:
    """The steps a batch of `length` tokens shows on a progress bar for the built sampler `smp`: one per
    token for AR models, else what the sampler declares (`Sampler.progress_steps`: its step count, one per
    token for step-less samplers, semi_ar's windows' steps summed ...)."""
    return length if model.is_autoregressive else smp.progress_steps(length)


def steps_per_batch(model, length: int, sampler: str | None = None, steps: int | None = None,
                    options: dict | None = None) -> int:
    """`progress_steps_of` the sampler `resolve_sampler` builds from these arguments."""
    return progress_steps_of(resolve_sampler(model, sampler, steps, **(options or {})), model, length)


def sample(model, num: int, length: int, *, sampler: Any = None, steps: int | None = None,
           template: Tensor | None = None, batch_size: int | None = None, seed: int = 0, first_index: int = 0,
           label: int | str | None = None, guidance: float = 0.0, rc_symmetric: bool = False,
           on_step: Callable[[int, int, int], None] | None = None, progress_steps: int | None = None,
           on_batch: Callable[[Any, Tensor], None] | None = None, **options: Any) -> SampleResult:
    """`num` sequences of `length` tokens from `model` (a DiffusionModel), in batches of `batch_size`,
    sequence r (global index first_index + r) drawn from its own stream of `seed`. `template`
    (Long[num, length], mask id at free positions) fixes tokens; `label` / `guidance` / `rc_symmetric`
    and `options` (sampler options) as in `DiffusionModel.generate`. `on_step(done, batch, step)`:
    progress after each network call (see the module docstring); `progress_steps` the steps a batch
    counts (default `steps_per_batch`). `sampler` may be a built sampler or guidance method (`dnadiff
    design`: then no `steps` or options); `on_batch(sampler, x)` runs after each batch (x: its samples,
    on the model's device), where a guidance method's rewards and costs of that batch are read."""
    chunk = batch_size or default_batch_size(num, length, model)
    smp = resolve_sampler(model, sampler, steps, **options)  # once for the whole run
    per_batch = 0 if on_step is None else progress_steps or progress_steps_of(smp, model, length)
    # backbone passes per counted call: 2 under classifier-free guidance (conditional + unconditional, or the
    # unconditional model a udlm sampler calls itself) or --rc-symmetric, 4 with both
    per_step = (2 if rc_symmetric else 1) * (2 if label is not None and guidance else 1)
    calls = [0, 0, False]  # calls in this batch, batches finished, any call made

    def on_call(*_):
        # a batch counts at most `per_batch` steps: the noise-removal pass after the last step never pushes
        # it past its total
        calls[0] += 1
        calls[2] = True
        if on_step is not None:
            step = min(per_batch, calls[0])
            on_step(calls[1] * per_batch + step, calls[1] + 1, step)

    samples, row_nfe, nfe, steps_used = [], [], 0, 0
    start = time.time()
    for i in range(0, num, chunk):
        n = min(chunk, num - i)
        tmpl = template[i : i + n] if template is not None else None
        x = model.generate(n, length, sampler=smp, template=tmpl, generator=SeedStream(seed, first_row=first_index + i),
                           label=label, guidance=guidance, rc_symmetric=rc_symmetric, on_call=on_call)
        if on_batch is not None:
            on_batch(smp, x)
        samples.append(x.cpu())
        # a guidance method (dnadiff design) counts its own denoiser rows (last_nfe_per_row None): 1 pass a call
        per_call = per_step if smp.last_nfe_per_row is not None else 1
        nfe += smp.last_nfe * per_call
        row_nfe.append(None if smp.last_nfe_per_row is None else smp.last_nfe_per_row * per_call)
        steps_used = max(steps_used, smp.last_steps)
        calls[0], calls[1] = 0, calls[1] + 1  # a sampler that stopped early (all unmasked) finished its batch
        if on_step is not None and calls[2]:
            on_step(calls[1] * per_batch, calls[1], per_batch)
    wall = time.time() - start
    return SampleResult(x=torch.cat(samples), sampler=smp, batch_size=chunk, num_batches=len(samples),
                        nfe_total=nfe, nfe_per_row=None if any(r is None for r in row_nfe) else torch.cat(row_nfe),
                        steps_used=steps_used, wall_seconds=wall,
                        seed=seed, first_index=first_index)


DNA_SUFFIXES = (".fa", ".fasta", ".fna", ".fas")


def output_paths(out: str | None, kind: str) -> tuple[str | None, str | None]:
    """(samples path, statistics JSON path) for --out; (None, None) when the samples go to stdout."""
    import os

    from dnadiff.errors import DnadiffError

    if out is None or out == "-":
        return None, None
    if os.path.isdir(out):
        raise DnadiffError(f"{out}: is a directory, expected a file name (e.g. {os.path.join(out, 'samples.fa')})")
    root, ext = os.path.splitext(out)
    if kind == "text" and ext.lower() in DNA_SUFFIXES:
        raise DnadiffError(f"--out {out}: a text model writes .jsonl or .txt samples, not FASTA")
    stats = root + ".json"
    if os.path.abspath(stats) == os.path.abspath(out):
        raise DnadiffError(f"--out {out}: the samples and their statistics ({stats}) would be the same file")
    return out, stats


__all__ = ["CPU_TOKENS_PER_CALL", "DNA_SUFFIXES", "SampleResult", "default_batch_size", "output_paths",
           "progress_steps_of", "resolve_sampler", "sample", "sample_records", "sampler_name", "steps_per_batch"]
