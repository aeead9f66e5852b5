"""`dnadiff eval MODEL_DIR`: likelihood bound on a genome split or a FASTA file."""

from __future__ import annotations

import argparse

from dnadiff.errors import DnadiffError

HELP = "likelihood bound of a model: nats/base, bits/base, perplexity (table; JSON with --out)"
DESCRIPTION = """Evaluate the likelihood bound of a model (exact NLL for AR models) on held-out DNA.

  dnadiff eval runs/tiny_dna_mdlm/model --split test
  dnadiff eval MODEL --fasta genome.fa --bed regions.bed --split valid --T 100
  dnadiff eval MODEL --records sequences.fa

Data: by default the genome + BED of the model's training config (the bundled sample if none);
--fasta/--bed for another genome, or --records for a plain FASTA file cut into windows (its bases other
than A/C/G/T are counted: one line on stderr, `non_acgt` in the JSON; IUPAC codes are read as N).
Reports nats/base, bits/base, the perplexity bound, its standard error and the number of bases.
N bases and padding are scored as the model's objective.pad_policy says (reported as pad_policy;
DNA configs use `visible`: never masked, never scored). One Monte-Carlo time sample per sequence (paper), or
--num-samples K; --T gives the discrete-time bound; --quadrature K a deterministic t-grid.

Prints a table on stdout; --out FILE also writes the result as JSON. It says at the start how many
windows it scores and, for more than a few batches, about how long that takes on this machine (one
batch timed); --max-windows N scores N evenly spaced windows for a quicker estimate."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", help="a dnadiff model directory (or a Hub id org/name in the local Hugging Face cache)")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"], help="BED split (default test)")
    p.add_argument("--fasta", help="genome FASTA (plain, gzip or - for stdin) to evaluate on; needs --bed")
    p.add_argument("--bed", help="BED with a split column (chrom, start, end, split)")
    p.add_argument("--records", help="a FASTA file (plain, gzip or - for stdin) whose records are cut into windows")
    p.add_argument("--seq-len", type=int, help="window length (default: the model's training length)")
    p.add_argument("--T", type=int, help="discrete-time bound with T steps (diffusion objectives)")
    p.add_argument("--num-samples", type=int, default=1, help="Monte-Carlo time samples per sequence (default 1)")
    p.add_argument("--stratified", action="store_true",
                   help="with --num-samples K > 1: one time in each 1/K stratum of [t_min, 1] per window (low-"
                        "discrepancy; the same bound, less Monte-Carlo variance), as pipelines/cpu_hour.py scores")
    p.add_argument("--quadrature", type=int, help="deterministic Gauss-Legendre t-grid with this many nodes")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-windows", type=int, help="evaluate at most this many windows (evenly spaced)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the JSON result here (default: print only)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out file")


def preflight(args: argparse.Namespace) -> None:
    """Before torch is imported (commands/preflight.py): the inputs first (MODEL_DIR, --fasta, --bed,
    --records), then an existing --out (unless --force), and a --bed naming a chromosome the --fasta
    genome lacks (its .fai or header lines)."""
    from dnadiff.commands.preflight import check_bed_chromosomes, check_input_files, check_model_input
    from dnadiff.utils import refuse_existing

    check_model_input(args.model_dir)
    check_input_files((args.fasta, "genome FASTA"), (args.bed, "BED file"), (args.records, "FASTA file"))
    if args.out:
        refuse_existing([args.out], args.force)
    if args.fasta and args.bed and args.fasta != "-":
        check_bed_chromosomes(args.fasta, args.bed)


def run(args: argparse.Namespace) -> int:
    import math

    import numpy as np
    import torch

    from dnadiff.checkpoint import load_for_inference
    from dnadiff.config import replace
    from dnadiff.data.datasets import build_split_dataset
    from dnadiff.data.fasta import read_bed
    from dnadiff.data.streamed_records import record_windows
    from dnadiff.eval.perplexity import evaluate_model
    from dnadiff.logs import log, progress_enabled
    from dnadiff.utils import format_table, refuse_existing, write_json

    if args.batch_size <= 0 or args.num_samples <= 0:
        raise DnadiffError("--batch-size and --num-samples must be positive")
    for flag in ("seq_len", "T", "quadrature", "max_windows"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            raise DnadiffError(f"--{flag.replace('_', '-')} must be positive, got {value}")
    if args.stratified and (args.num_samples < 2 or args.T or args.quadrature):
        raise DnadiffError("--stratified needs --num-samples K > 1 and a continuous-time bound (no --T, no "
                           f"--quadrature); got --num-samples {args.num_samples}"
                           + (f" --T {args.T}" if args.T else "") + (f" --quadrature {args.quadrature}"
                                                                      if args.quadrature else ""))
    if args.fasta == "-" and args.records == "-":
        raise DnadiffError("only one input can be read from stdin (-)")
    if args.out:
        from dnadiff.commands.checks import check_writable

        refuse_existing([args.out], args.force)
        check_writable(args.out)  # before the model is loaded, not after minutes of scoring
    if args.bed:
        read_bed(args.bed)  # a malformed BED fails before any model or genome is touched
    model = load_for_inference(args.model_dir)
    census = treatment = None  # --records: the letters of the file
    seq_len = args.seq_len or model.config.data.seq_len
    if seq_len <= 0:
        raise DnadiffError(f"--seq-len must be positive, got {seq_len}")
    if args.records:
        # windows read on demand (memory: one window, not the file; --max-windows reads only those)
        items = record_windows(args.records, seq_len, model.tokenizer, model.config.data.mask_n)
        source = args.records
        census, treatment = items.index.census, non_acgt_treatment(model)
        line = census.line(items.index.label, treatment)
        if line:  # IUPAC codes are changed (into N), not only skipped: a warning, shown under --quiet too
            (log.info if census.only_n() else log.warning)("%s", line)
    else:
        if bool(args.fasta) != bool(args.bed):
            raise DnadiffError("--fasta and --bed go together")
        cfg = replace(model.config, **{"data.seq_len": seq_len})
        if args.fasta:
            cfg = replace(cfg, **{"data.fasta": args.fasta, "data.bed": args.bed, "data.kind": "genome"})
        items = build_split_dataset(cfg, model.tokenizer, args.split)
        source = split_label(cfg, args.split)
    if args.max_windows and args.max_windows < len(items):
        idx = np.linspace(0, len(items) - 1, args.max_windows).round().astype(int)
        items = torch.utils.data.Subset(items, sorted(set(int(i) for i in idx)))
    announce(model, items, seq_len, args, source)
    if args.stratified and not model.objective.needs_time:
        raise DnadiffError(f"--stratified applies to diffusion models, not {model.config.objective.name!r} "
                           "(its score has no time to stratify)")
    res = evaluate_model(model, items, T=args.T, num_samples=args.num_samples, quadrature=args.quadrature,
                         batch_size=args.batch_size, seed=args.seed, progress=progress_enabled(),
                         stratify_repeats=args.stratified, per_sequence=True)
    unit = "base" if model.tokenizer.kind == "dna" else "token"
    out = {
        "model": str(args.model_dir), "data": source, "seq_len": seq_len,
        "kind": "exact" if model.objective.deterministic else "bound",
        f"nats_per_{unit}": res["nats_per_token"], f"bits_per_{unit}": res["bits_per_token"],
        "perplexity": res["perplexity"], "std_error_nats": res["std_error"],
        "perplexity_std_error": res["perplexity_std_error"],
        f"num_{unit}s": res["num_tokens"], "num_windows": res["num_sequences"], "objective": res["objective"],
        "pad_policy": res["pad_policy"], "T": res["T"],
        "num_samples": res["num_samples"], "quadrature": res["quadrature"],
        "stratified": res["stratified_repeats"] or None,
        # per window, in the data's order: what `dnadiff compare A.json B.json` pairs (eval/paired.py)
        "sequence_nats": res["sequence_nats"], "sequence_tokens": res["sequence_tokens"],
    }
    if unit == "base":
        out["uniform_baseline_bits_per_base"] = 2.0
    if model.objective.autoregressive:  # which positions the AR number covers (diffusion: every real one)
        out["ar_scored"] = ("every real position, like the diffusion bounds ([BOS] context)"
                            if getattr(model.objective, "bos_id", None) is not None
                            else "real positions after each window's first (the first is context)")
    # the table shows what was measured: settings left empty (no --T, no --quadrature) are not columns
    print(format_table([{k: v for k, v in out.items() if k not in ("model", "data", "ar_scored", *PER_WINDOW)
                         and v is not None}]))
    if "ar_scored" in out:
        print(f"AR scored: {out['ar_scored']}")
    if census is not None:  # --records: the bases that were not A/C/G/T (JSON only)
        out["non_acgt"] = census.as_dict(treatment)
    if args.out:
        write_json(args.out, out)
        log.info("\nwrote %s", args.out)
    if not math.isfinite(out[f"nats_per_{unit}"]):
        raise DnadiffError("the bound is not finite")
    return 0


def non_acgt_treatment(model) -> str:
    """What this evaluation does with a base that is not A/C/G/T: the tokenizer reads every IUPAC code
    as N; data.mask_n makes N an input that is not scored (unless objective.pad_policy scores padding)."""
    if not model.config.data.mask_n:
        return "IUPAC codes read as N; N scored as a token (data.mask_n false)"
    if getattr(model.objective, "pad_policy", None) == "score" and not model.objective.autoregressive:
        return "IUPAC codes read as N; N scored as padding (data.mask_n, objective.pad_policy score)"
    return "IUPAC codes read as N; N not scored (data.mask_n)"


def split_label(cfg, split: str) -> str:
    """The data a split of the model's config is: `FASTA [test]` (the bundled chr22 sample when the config
    names none), a benchmark folder, or the text files (or Hub split) of data.text."""
    kind = cfg.data.kind
    if kind == "text":
        from dnadiff.data.text_sources import TextOptions, split_sources

        where = split_sources(TextOptions.from_mapping(cfg.data.text))[split].label()
    elif kind == "benchmark":
        where = f"benchmark {cfg.data.benchmark}"
    elif kind == "genome":
        where = cfg.data.fasta or "bundled sample"
    else:
        where = f"the {kind} data of the model's config"
    return f"{where} [{split}]"


PER_WINDOW = ("sequence_nats", "sequence_tokens")  # JSON only: one value per window
PROBE_MIN_BATCHES = 4  # fewer batches: no time estimate (a one-window probe only checks the inputs)


def announce(model, items, seq_len: int, args: argparse.Namespace, source: str) -> None:
    """One line before the scoring: how many windows, about how long (one batch timed here, so the
    machine's load counts), and the --max-windows hint when that is more than a minute."""
    import logging
    import time

    import torch

    from dnadiff.eval.perplexity import evaluate_model
    from dnadiff.logs import log
    from dnadiff.utils import format_duration

    n = len(items)
    batches = -(-n // args.batch_size)
    what = f"scoring {n:,} windows of {seq_len:,} {'bp' if model.tokenizer.kind == 'dna' else 'tokens'} from {source}"
    if not log.isEnabledFor(logging.INFO):  # --quiet: nothing to say, nothing to time
        return
    # the probe is the evaluation's own code on its first windows, so an input the model cannot take
    # (a window over its l_max, ...) fails here and its error stays the only line on stderr
    probe = 1 if batches < PROBE_MIN_BATCHES else args.batch_size  # few batches: no estimate, one window
    start = time.perf_counter()
    evaluate_model(model, torch.utils.data.Subset(items, range(min(probe, n))), T=args.T,
                   num_samples=args.num_samples, quadrature=args.quadrature, batch_size=args.batch_size,
                   seed=args.seed, progress=False, stratify_repeats=args.stratified)
    per_batch = time.perf_counter() - start
    if batches < PROBE_MIN_BATCHES:
        log.info("%s", what)
        return
    total = per_batch * batches
    line = (f"{what}: about {format_duration(total)} ({batches:,} batches of {args.batch_size}, "
            f"one took {per_batch:.2g} s)")
    if total > 60:
        quick = max(args.batch_size, int(n * 60 / total) // args.batch_size * args.batch_size)
        line += (f"; --max-windows {quick:,} gives an estimate in about "
                 f"{format_duration(per_batch * quick / args.batch_size)}")
    log.info("%s", line)


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: the model's config as this evaluation uses it, and the evaluation's settings."""
    from dnadiff.checkpoint import read_config
    from dnadiff.config import replace, to_dict

    cfg = read_config(args.model_dir)  # no weights read
    changes = {"data.seq_len": args.seq_len or cfg.data.seq_len}
    if args.fasta:
        changes.update({"data.fasta": args.fasta, "data.bed": args.bed, "data.kind": "genome"})
    out = to_dict(replace(cfg, **changes))
    out["eval"] = {k: getattr(args, k, None) for k in ("split", "records", "T", "num_samples", "stratified",
                                                         "quadrature", "batch_size", "max_windows", "seed", "out")}
    return out
