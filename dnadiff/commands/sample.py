"""`dnadiff sample MODEL_DIR`: generate DNA (or text) and write FASTA + a JSON of statistics."""

from __future__ import annotations

import argparse

from dnadiff.errors import DnadiffError

# sequences per call without --batch-size: calls of about this many tokens on a CPU (dnadiff/sampling.py)
CPU_TOKENS_PER_CALL = 8192

HELP = "sample sequences from a trained model (FASTA to --out or to stdout)"
DESCRIPTION = """Generate sequences with any masked-diffusion sampler.

  dnadiff sample runs/tiny_dna_mdlm/model --num 8 --length 256 --sampler ancestral --steps 128 --out samples.fa
  dnadiff sample MODEL --num 4 --length 200 --prefix ACGTACGT --suffix TTTT --out infill.fa
  dnadiff sample MODEL --num 2 --length 300 --template-fasta templates.fa --out filled.fa
  dnadiff sample MODEL -n 8 > x.fa          # FASTA on stdout, progress and statistics on stderr

Samplers: {samplers}
AR models: {ar_samplers}. Without --steps (one call per token): {stepless_samplers}.

The seed gives every sequence its own random stream, so --batch-size does not change the samples:
each FASTA header names its stream (seed=S index=I), and `--seed S --first-index I --num 1`
regenerates that record alone. --prefix/--suffix fix the ends; --template-fasta gives one template
per record with N at the positions to fill (records are cycled over --num); N in --prefix/--suffix
also marks a position to fill. Writes FASTA (one record per sample) and OUT.json with NFE, steps
(configured and actually used), wall time and tokens/s, and prints them as a table on stdout; without
--out the FASTA goes to stdout and the table to stderr. The progress bar shows the batch and the step
(`sampling batch 2/4, step 37/128`).
Text models write OUT.jsonl (one {"id", "text"} per line) or OUT.txt. An existing output is kept
unless --force."""


def default_batch_size(num: int, length: int, model) -> int:
    """Sequences per sampler call when --batch-size is not given: all of them on a GPU or for an AR
    model (its steps are one token per sequence), else calls of about CPU_TOKENS_PER_CALL tokens."""
    from dnadiff.sampling import default_batch_size as library_default

    return library_default(num, length, model, CPU_TOKENS_PER_CALL)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", help="a dnadiff model directory (or a Hub id org/name in the local Hugging Face cache)")
    p.add_argument("-n", "--num", type=int, default=4, help="number of sequences (default 4)")
    p.add_argument("--length", type=int, default=None, help="length in tokens (default: the model's sample.length)")
    p.add_argument("--sampler", default=None, help="{samplers} (default: the model config's)")
    p.add_argument("--steps", type=int, default=None, help="sampling steps (default: the model config's)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (1 = off)")
    p.add_argument("--prefix", default=None, help="fixed sequence at the start")
    p.add_argument("--suffix", default=None, help="fixed sequence at the end")
    p.add_argument("--template-fasta", default=None,
                   help="FASTA of templates (plain, gzip or - for stdin): N marks the positions to fill")
    p.add_argument("--batch-size", type=int, default=None,
                   help="sequences per sampler call (default: all on a GPU and for AR models; on a CPU, a "
                        f"diffusion sampler's calls hold about {CPU_TOKENS_PER_CALL:,} tokens)")
    p.add_argument("--class", dest="label", default=None,
                   help="class name or index for a class-conditional model (e.g. --class coding, --class K562; "
                        "the DHS hESC cell type is also accepted as hESCT0, its tag in the DHS table)")
    p.add_argument("--guidance", type=float, default=0.0,
                   help="classifier-free guidance scale w: p ∝ p(x|c)^(1+w) / p(x)^w (0 = plain conditional)")
    p.add_argument("--rc-symmetric", action="store_true", help="average strand predictions (RC-symmetric sampling)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="extra sampler option, e.g. --option eta=0.02 (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--first-index", type=int, default=0, metavar="I",
                   help="index of the first record (default 0): with --seed S --num 1, regenerates the record "
                        "whose header says seed=S index=I")
    p.add_argument("--out", default=None,
                   help="output path (a JSON of statistics is written beside it); default: FASTA on stdout")
    p.add_argument("--force", action="store_true", help="overwrite an existing output")


def run(args: argparse.Namespace) -> int:
    import sys

    from dnadiff.commands.checks import check_sampler_options
    from dnadiff.commands.request import Request, check_prefix_suffix, format_samples
    from dnadiff.config import parse_overrides
    from dnadiff.logs import log, progress_bar
    from dnadiff.samplers import SAMPLERS, build_sampler
    from dnadiff.sampling import progress_steps_of, resolve_sampler, sample, sample_records, sampler_name
    from dnadiff.utils import format_table, json_text, write_together

    # ---- everything the user typed is checked before the model is loaded
    req = Request.checked(args)
    if args.label is not None:  # one name printed for a class with two spellings (hESCT0 -> hESC)
        from dnadiff.data.class_names import canonical

        args.label = canonical(args.label)
    req.load_config()
    kind = req.kind
    objective = req.objective
    autoregressive = objective is not None and objective.autoregressive
    out, stats_path = req.resolve_outputs(kind)
    options = parse_overrides(args.option)
    if args.temperature != 1.0:
        options["temperature"] = args.temperature
    if args.top_p != 1.0:
        options["top_p"] = args.top_p
    name = sampler_name(args.sampler, objective, req.cfg)  # e.g. udlm models: the udlm sampler
    if autoregressive:  # the model's own decoding: the options it sets are not the user's
        check_sampler_options(objective.default_sampler, options, model_sets=True)
    else:
        check_sampler_options(name, options)
    # the run's sampler, resolved and built once, from the config before any weights load (its own value
    # checks, temperature > 0 ..., fail early); an official checkpoint has no config yet: a trial build of the
    # options now, the sampler after the load
    spec = req.model_spec()
    smp = resolve_sampler(spec, args.sampler, args.steps, **options) if spec is not None else None
    if spec is None:
        build_sampler(name, **options, **({"steps": args.steps} if args.steps else {}))
    if req.fixes_tokens and kind != "dna":
        raise DnadiffError("--prefix/--suffix/--template-fasta need a DNA model")
    check_prefix_suffix(args)
    req.read_templates(first_index=args.first_index)
    req.reserve_outputs()  # the inputs and options checked first, then the destination

    model = req.load_model()
    length = req.length(model)
    max_len = model.max_length
    if smp is None:  # an official checkpoint: its config came with it
        smp = resolve_sampler(model, args.sampler, args.steps, **options)
    if max_len and length > max_len and not smp.any_length:
        raise DnadiffError(f"--length {length} exceeds what this model supports ({max_len}); use --sampler "
                           f"{' or '.join(SAMPLERS.where(any_length=True))}")
    trained = getattr(getattr(model.config, "data", None), "seq_len", None)
    if not autoregressive and trained and length > trained and not smp.any_length:
        # results/mdlm_diagnosis.md: a bidirectional model's samples drift beyond the length it was trained
        # on (GC, CpG at 1,024 bp from 128-bp windows); windows of the trained length do not
        log.warning("warning: --length %d is longer than the %d-token windows this model was trained on; "
                    "its samples drift there (results/mdlm_diagnosis.md): --sampler semi_ar --option window=%d "
                    "--option stride=%d samples in windows of the trained length", length, trained, trained,
                    max(1, trained // 2))
    template = req.template(model, length)
    if args.rc_symmetric:
        if model.tokenizer.kind != "dna":
            raise DnadiffError("--rc-symmetric needs a DNA model")

    chunk = args.batch_size or default_batch_size(args.num, length, model)
    # the bar counts denoising steps (network calls of the sampler), not batches
    steps = progress_steps_of(smp, model, length)
    batches = -(-args.num // chunk)
    bar = None  # opened at the first network call: an early error stays the only line on stderr

    def where(batch: int, step: int) -> str:
        """`sampling batch 2/4, step 37/128` (one batch: `sampling step 37/128`): the bar's own count runs
        over every batch's steps (its rate and time left are the whole run's), so it is not shown."""
        return f"sampling {f'batch {batch}/{batches}, ' if batches > 1 else ''}step {step}/{steps}"

    def on_step(done: int, batch: int, step: int) -> None:
        nonlocal bar
        if bar is None:
            bar = progress_bar(total=steps * batches, desc=where(1, 0), unit="step",
                               bar_format="{desc} {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}, {rate_fmt}]")
        if done > bar.n:
            bar.set_description_str(where(batch, step), refresh=False)
            bar.update(done - bar.n)

    try:
        res = sample(model, args.num, length, sampler=smp, template=template, batch_size=chunk, seed=args.seed,
                     first_index=args.first_index, label=args.label, guidance=args.guidance,
                     rc_symmetric=args.rc_symmetric, on_step=on_step, progress_steps=steps)
    finally:
        if bar is not None:
            bar.close()
    records = sample_records(res, model.decode(res.x), args.label, args.guidance)
    body = format_samples(records, model.tokenizer.kind, out)
    stats = {"model": str(args.model_dir), **res.stats(), "class": args.label, "guidance": args.guidance,
             "out": out or "-"}
    table = format_table([{k: v for k, v in stats.items() if k not in ("model", "out")}])
    if out is None:
        sys.stdout.write(body)
        sys.stdout.flush()
        log.info("%s", table)
        return 0
    write_together([(out, body), (stats_path, json_text(stats))])
    print(table)  # the samples are in a file: the table goes to stdout, as design, eval and metrics print theirs
    log.info("\nwrote %s and %s", out, stats_path)
    return 0


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: the model's config with the sampling settings this command would use."""
    from dnadiff.checkpoint import read_config
    from dnadiff.config import parse_overrides, replace, to_dict

    cfg = read_config(args.model_dir)  # no weights read
    options = {**cfg.sample.options, **parse_overrides(args.option)}
    if args.temperature != 1.0:
        options["temperature"] = args.temperature
    if args.top_p != 1.0:
        options["top_p"] = args.top_p
    cfg = replace(cfg, **{"sample.sampler": args.sampler or cfg.sample.sampler,
                          "sample.steps": args.steps or cfg.sample.steps, "sample.num": args.num,
                          "sample.length": args.length or cfg.sample.length, "sample.options": options})
    out = to_dict(cfg)
    out["request"] = {k: getattr(args, k, None) for k in ("prefix", "suffix", "template_fasta", "batch_size", "label",
                                                            "guidance", "rc_symmetric", "seed", "first_index", "out")}
    return out
