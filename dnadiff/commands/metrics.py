"""`dnadiff metrics SAMPLES.fa --reference REF.fa`: is generated DNA like real DNA?"""

from __future__ import annotations

import argparse
import os

from dnadiff.errors import DnadiffError

HELP = "DNA sample quality: k-mer JS/Pearson, GC, Markov oracle, memorisation, JASPAR motifs, Fréchet, plots"
DESCRIPTION = """Compare generated DNA (a FASTA, one record per sample) with real DNA.

Reports, against the reference FASTA:
  k-mer spectrum Jensen-Shannon divergence (bits) for k = 1..--kmax, and the 3-mer frequency
  Pearson correlation (the DRAKES convention),
  GC-content distribution distance (Wasserstein-1 and KS), per-sample k-mer entropy,
  perplexity under an order-k Markov model fitted on the reference (add-one smoothing),
  memorisation: longest exact match to the reference (both strands) and the share of samples
  with a match of at least --match-bp bases,
  transcription-factor motifs: the JASPAR 2024 CORE vertebrate matrices (bundled with pyjaspar, offline)
  scanned on both strands at p < --motif-pvalue (exact per-motif thresholds, background = the reference's
  base composition): hit rates per kb for every motif, their Spearman correlation samples vs reference,
  and the motif-spectrum JS divergence (--no-motifs skips it),
  and the same figures for held-out real sequences ("real vs real" floor) when the reference
  holds at least twice as many sequences (or windows of the samples' length) as the samples.
Writes metrics.json, kmer_scatter.png, gc_histogram.png and motif_scatter.png to --out (default
SAMPLES_metrics/) and prints a table. Every figure uses A/C/G/T only: how many bases of the samples and
of the reference were something else (N, IUPAC codes) is one line on stderr and `non_acgt` in metrics.json.

The reference is a FASTA, or a genome with --bed/--split (windows of the samples' length cut
from that split), or `bundled`: the human chr22 sample shipped with the package, with its BED
(the test split unless --split says otherwise). --oracle MODEL_DIR adds the perplexity of the samples \
(and of the floor's real
sequences) under a trained dnadiff model: exact for AR models, the bound for diffusion models.
--embedder DIR adds a Fréchet distance between the pooled features of samples and reference under a
fine-tuned classifier (`dnadiff finetune` OUT/classifier: the vector its head sees) or a dnadiff model
directory (its backbone's features on the clean sequence, mean-pooled): an in-house number, comparable
between runs with the same DIR, not with published SFID/FBD values. The reference windows' vectors are
kept in dnadiff's cache folder under DIR's content hash, so a second call on the same reference embeds
only the samples (--no-embedding-cache: neither read nor written).
--discriminator (on by default when samples and held-out reference reach 200 sequences each, the floor's
real half included; --no-discriminator skips it): a classifier two-sample test (Lopez-Paz & Oquab, ICLR 2017):
a small CNN (one-hot, both strands' logits averaged) and a k-mer (3-6) logistic regression each try to tell the
samples from as many held-out reference sequences, --discriminator-folds-fold cross-fitted (default 5);
metrics.json "discriminator" holds per classifier the AUROC ± SE (0.5 = indistinguishable), the accuracy, its
exact binomial p-value and the same for two disjoint halves of the reference (floor_*). Sequences are cut to
the shortest sample's length (their central bases); a shorter reference sequence is an error.
--disjoint-from TRAIN.fa: an error when a reference sequence shares a --match-bp exact match with the
generator's training sequences (the real side must be held out).
--classifier CLASSIFIER_DIR scores class-conditional samples (the UDLM protocol): the share of samples
the held-out classifier assigns to the class they were generated for, taken from --label or from the
class=NAME of each FASTA header (as `dnadiff sample --class NAME` writes).

examples:
  dnadiff metrics samples.fa --reference real.fa --out results/metrics
  dnadiff metrics samples.fa --reference bundled          # the bundled chr22 sample's test split
  dnadiff metrics samples.fa --reference chr22.fa.gz --bed sequences.bed --split test --oracle runs/ar/model
  dnadiff metrics promoters.fa --reference real.fa --embedder runs/ft/classifier --classifier held/classifier"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("samples", help="FASTA of generated sequences (plain or gzip; - for stdin)")
    p.add_argument("--reference", required=True,
                   help="FASTA of real sequences, or a genome (cut into windows of the samples' length); gzip or - "
                        "too; `bundled`: the chr22 sample shipped with the package, with its BED")
    p.add_argument("--bed", default=None, help="with a genome --reference: BED with a split column")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"], help="BED split (default test)")
    p.add_argument("--max-reference-windows", type=int, default=2000,
                   help="genome reference: at most this many windows, evenly spaced (default 2000)")
    p.add_argument("--oracle", default=None, help="a dnadiff model directory scoring the samples (AR: exact NLL)")
    p.add_argument("--out", default=None, help="output folder (default: <samples without extension>_metrics)")
    p.add_argument("--kmax", type=int, default=6, help="largest k for the k-mer JS divergence (default 6)")
    p.add_argument("--markov-order", type=int, default=5, help="order of the Markov oracle (default 5)")
    p.add_argument("--entropy-k", type=int, default=3, help="k of the per-sample k-mer entropy (default 3)")
    p.add_argument("--match-bp", type=int, default=50, help="memorisation threshold in bases (default 50)")
    p.add_argument("--one-strand", action="store_true", help="match against the reference's forward strand only")
    p.add_argument("--no-floor", action="store_true", help="skip the real-vs-real floor")
    p.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    p.add_argument("--seed", type=int, default=0, help="seed of the floor's held-out draw (default 0)")
    p.add_argument("--force", action="store_true", help="overwrite an existing OUT/metrics.json")
    g = p.add_argument_group("motifs, embeddings and classifiers")
    g.add_argument("--no-motifs", action="store_true", help="skip the JASPAR motif scan")
    g.add_argument("--motif-pvalue", type=float, default=1e-4, help="p-value threshold of a motif hit (default 1e-4)")
    g.add_argument("--jaspar-release", default="JASPAR2024",
                   help="JASPAR release bundled with pyjaspar (default JASPAR2024)")
    g.add_argument("--motif-ids", default=None,
                   help="comma-separated JASPAR matrix ids (e.g. MA0139.2,MA0079.5) instead of all CORE vertebrates")
    g.add_argument("--embedder", default=None,
                   help="a dnadiff classifier or model directory: Fréchet distance of its pooled features (in-house)")
    g.add_argument("--no-embedding-cache", action="store_true",
                   help="with --embedder: do not keep the reference windows' vectors in dnadiff's cache folder "
                        "($DNADIFF_CACHE/embeddings, keyed by the embedder's content hash) nor read them from it")
    g.add_argument("--classifier", default=None,
                   help="a held-out classifier directory: its accuracy on class-conditional samples")
    g.add_argument("--label", default=None,
                   help="with --classifier: the class every sample was generated for (default: class= in the headers)")
    d = p.add_argument_group("discriminator (a classifier two-sample test: can a CNN or a k-mer LR tell samples "
                             "from real?)")
    d.add_argument("--discriminator", action=argparse.BooleanOptionalAction, default=None,
                   help="run it (default: when samples and held-out reference both reach 200 sequences; the floor "
                        "needs twice that reference); --no-discriminator skips it")
    d.add_argument("--discriminator-folds", type=int, default=5, help="cross-fitting folds (default 5)")
    d.add_argument("--disjoint-from", default=None, metavar="FASTA",
                   help="the generator's training sequences: an error when a reference sequence shares a --match-bp "
                        "exact match with them (the real side must be held out)")


def preflight(args: argparse.Namespace) -> None:
    """Before torch is imported (commands/preflight.py): the inputs first (SAMPLES, --reference, --bed,
    the model folders), then an existing OUT/metrics.json (unless --force), and a --bed naming a
    chromosome the --reference genome lacks (its .fai or header lines)."""
    from dnadiff.commands.preflight import check_bed_chromosomes, check_input_files, check_model_input
    from dnadiff.utils import refuse_existing

    own = args.reference == BUNDLED  # the bundled sample brings its own BED (a --bed beside it: its own error)
    check_input_files((args.samples, "FASTA file"), (None if own else args.reference, "FASTA file"),
                      (None if own else args.bed, "BED file"))
    for flag in ("oracle", "embedder", "classifier"):
        check_model_input(getattr(args, flag), f"--{flag} ")
    if args.out or args.samples != "-":
        refuse_existing([os.path.join(args.out or os.path.splitext(args.samples)[0] + "_metrics", "metrics.json")],
                        args.force)
    if args.bed and args.reference not in ("-", BUNDLED):
        check_bed_chromosomes(args.reference, args.bed)


def run(args: argparse.Namespace) -> int:
    from dnadiff.data.records import read_fasta
    from dnadiff.eval.dna_metrics import dna_metrics, summary_rows
    from dnadiff.logs import log
    from dnadiff.utils import format_table, refuse_existing, staged_dir, write_json

    if args.kmax < 1 or args.kmax > 12:
        raise DnadiffError(f"--kmax must be in 1..12, got {args.kmax}")
    if args.markov_order < 0 or args.markov_order > 12:
        raise DnadiffError(f"--markov-order must be in 0..12, got {args.markov_order}")
    if args.match_bp < 1:
        raise DnadiffError(f"--match-bp must be positive, got {args.match_bp}")
    if args.max_reference_windows < 1:
        raise DnadiffError(f"--max-reference-windows must be positive, got {args.max_reference_windows}")
    if args.samples == "-" and args.reference == "-":
        raise DnadiffError("only one of SAMPLES and --reference can be read from stdin (-)")
    if args.samples == "-" and not args.out:
        raise DnadiffError("--out is required when the samples come from stdin (-)")
    if not 0 < args.motif_pvalue < 1:
        raise DnadiffError(f"--motif-pvalue must be in (0, 1), got {args.motif_pvalue}")
    if args.label is not None and not args.classifier:
        raise DnadiffError("--label needs --classifier")
    out_dir = args.out or os.path.splitext(args.samples)[0] + "_metrics"
    path = os.path.join(out_dir, "metrics.json")
    reference_path, bed = args.reference, args.bed
    if args.reference == BUNDLED:  # the package's own chr22 sample and its BED (test split by default)
        from dnadiff.data.fasta import bundled_genome

        if args.bed:
            raise DnadiffError("--reference bundled comes with its own BED: drop --bed (or give the genome FASTA)")
        reference_path, bed = bundled_genome()
    sample_records = read_fasta(args.samples, full_headers=True)
    samples = [seq for _, seq in sample_records]
    length = max(len(s) for s in samples)
    if bed:
        from dnadiff.data import genome_reference

        reference = genome_reference(reference_path, bed, args.split, length, args.max_reference_windows)
        log.info("reference: %d windows of %d bp from split %r of %s", len(reference), length, args.split,
                 "the bundled chr22 sample" if reference_path != args.reference else args.reference)
    else:
        reference, note = fasta_reference(read_fasta(reference_path), length, args.max_reference_windows)
        if note:
            log.info("reference: %s", note)
    census = non_acgt_census(args, samples, reference, reference_path)
    notes: list[str] = []  # said once every input has passed its checks
    discriminator = discriminator_checks(args, samples, reference, notes)
    labels = sample_labels(sample_records, args.label, args.samples) if args.classifier else None
    extras, models = {}, {}
    if args.classifier:
        from dnadiff.eval.encoders import class_index

        models["classifier"] = load_classifier(args.classifier, "--classifier")
        for label in dict.fromkeys(labels):  # an unknown class fails before the work
            class_index(label, models["classifier"][1]["classes"],
                        "--label" if args.label is not None else f"{args.samples}: class")
    if args.embedder:
        models["embedder"] = load_embedder(args.embedder, samples[:1], store=not args.no_embedding_cache)
    if not args.no_motifs:
        extras["motifs"], motif_settings = motif_extra(args, reference)
    if args.embedder:
        extras["frechet"] = frechet_extra(models["embedder"])
    refuse_existing([path], args.force)  # after the inputs are known to be good, before the work
    for note in notes:
        log.info("%s", note)
    res = dna_metrics(
        samples,
        reference,
        kmax=args.kmax,
        markov_order=args.markov_order,
        entropy_k=args.entropy_k,
        match_threshold=args.match_bp,
        both_strands=not args.one_strand,
        floor=not args.no_floor,
        seed=args.seed,
        extras=extras,
        discriminator=discriminator,
    )
    if not args.no_motifs:
        res["settings"]["motifs"] = motif_settings
    if args.classifier:
        from dnadiff.eval.encoders import classifier_accuracy

        model, meta = models["classifier"]
        res["classifier"] = {"directory": os.path.abspath(args.classifier),
                             **classifier_accuracy(model, meta["classes"], samples, labels)}
    res["files"] = {"samples": "stdin" if args.samples == "-" else os.path.abspath(args.samples),
                    "reference": "stdin" if reference_path == "-" else os.path.abspath(reference_path)}
    res["non_acgt"] = census  # how many bases were not A/C/G/T, which letters, what was done with them
    if args.oracle:
        res["oracle"] = oracle_perplexity(args.oracle, samples, reference[: len(samples)], args.seed)
    with staged_dir(out_dir) as stage:  # a failure (full disk) leaves no empty or half-written folder
        if not args.no_plots:
            from dnadiff.eval.plots import write_plots

            plots = write_plots(samples, reference, stage)
            if "motifs" in res["samples"]:
                from dnadiff.eval.plots import motif_scatter

                plots.append(motif_scatter(res["samples"]["motifs"], os.path.join(stage, "motif_scatter.png")))
            res["plots"] = [os.path.join(out_dir, os.path.basename(p)) for p in plots]
        write_json(os.path.join(stage, "metrics.json"), res)
    log.info("%d samples vs %d reference sequences", len(samples), len(reference))
    print(format_table(summary_rows(res)))
    if args.oracle:
        print(format_table([{"oracle": args.oracle, **{k: v for k, v in res["oracle"].items() if k != "model"}}]))
    if res["floor"] is None and not args.no_floor:
        log.info("(no real-vs-real floor: the reference has fewer than 2x the samples' count of sequences/windows)")
    log.info("\nwrote %s", path)
    return 0


def non_acgt_census(args: argparse.Namespace, samples: list[str], reference: list[str], reference_path: str) -> dict:
    """Bases of the samples and of the reference sequences used that are not A/C/G/T: one stderr line per
    side that has any (a warning when IUPAC codes other than N are among them), the counts for the JSON."""
    from dnadiff.data.base_census import BaseCensus
    from dnadiff.logs import log

    treatment = "left out of the k-mer, GC, entropy, Markov, memorisation and motif figures (A/C/G/T only)"
    if args.embedder or args.classifier or args.oracle:
        treatment += "; read as N by " + ", ".join(f"--{k}" for k in ("embedder", "classifier", "oracle")
                                                  if getattr(args, k))
    out = {}
    for side, seqs, path in (("samples", samples, args.samples), ("reference", reference, reference_path)):
        census = BaseCensus.of(seqs)
        label = "stdin" if path == "-" else path
        if side == "reference" and args.reference == BUNDLED:
            label = "the bundled chr22 sample"
        line = census.line(f"{side} {label}" if side == "reference" else label, treatment)
        if line:
            (log.info if census.only_n() else log.warning)("%s", line)
        out[side] = census.as_dict(treatment)
    return out


def discriminator_checks(args: argparse.Namespace, samples: list[str], reference: list[str], notes: list[str]):
    """The discriminator for dna_metrics, fn(samples, reference) -> dict (None: skipped), after its input checks:
    enough sequences for the folds, lengths it can cut to one, a reference disjoint from --disjoint-from (the
    generator's training data)."""
    from dnadiff.data.records import read_fasta
    from dnadiff.eval.discriminator import check_disjoint, common_length, discriminator_test, settings_for

    if args.disjoint_from:
        check_disjoint(reference, [s for _, s in read_fasta(args.disjoint_from)], args.match_bp,
                       f"--disjoint-from {args.disjoint_from}")
    settings = settings_for(args.discriminator, len(samples), len(reference), args.discriminator_folds, args.seed,
                            floor=not args.no_floor, notes=notes)
    if settings is None:
        return None
    common_length(samples, reference)
    return lambda s, r: discriminator_test(s, r, settings, progress=True)


def sample_labels(records: list[tuple[str, str]], label: str | None, source: str) -> list[str]:
    """The class each sample was generated for: --label, or `class=NAME` in every FASTA header."""
    if label is not None:
        return [label] * len(records)
    out = []
    for name, _ in records:
        found = [w[6:] for w in name.split() if w.startswith("class=")]
        if not found or found[0] in ("", "None"):
            raise DnadiffError(f"{source}: record {name.split()[0] if name else '?'!r} "
                               "has no class=NAME in its header; "
                               "give --label NAME (the class the samples were generated for)")
        out.append(found[0])
    return out


def load_classifier(path: str, option: str):
    """(SequenceClassifier or k-mer LR, metadata) of a classifier directory, on the GPU when there is one."""
    import torch

    from dnadiff.eval.oracle import load_oracle

    try:  # scoring samples: an evaluation oracle's job (load_oracle allows role: evaluation)
        return load_oracle(path, device="cuda" if torch.cuda.is_available() else "cpu")
    except DnadiffError as exc:
        raise DnadiffError(f"{option} {exc}") from None


def motif_extra(args: argparse.Namespace, reference: list[str]):
    """(fn(samples, reference, is_floor) for dna_metrics' extras, the scanner settings for the JSON)."""
    from dnadiff.eval.motifs import MotifScanner, background_of, load_jaspar, motif_metrics, scanner_settings
    from dnadiff.logs import log

    ids = [m.strip() for m in args.motif_ids.split(",") if m.strip()] if args.motif_ids else None
    try:
        motifs = load_jaspar(release=args.jaspar_release, ids=ids)
    except DnadiffError as exc:
        raise DnadiffError(f"{'--motif-ids' if ids else '--jaspar-release'}: {exc}") from None
    scanner = MotifScanner(motifs, background_of(reference), pvalue=args.motif_pvalue)
    source = f"{args.jaspar_release} " + (f"ids {','.join(ids)}" if ids else "CORE vertebrates")
    if scanner.dropped:
        log.info("motifs: %d of %d can never reach p < %g (too short) and are left out", len(scanner.dropped),
                 len(motifs), args.motif_pvalue)

    def fn(samples, ref, is_floor):
        return motif_metrics(scanner, samples, ref, per_motif=not is_floor, progress=True)

    return fn, scanner_settings(scanner, source)


def load_embedder(path: str, probe: list[str], store: bool = True):
    """An Embedder over a classifier directory (its pooled head input) or a dnadiff model directory (its
    backbone's mean-pooled clean features), tried on one sample so a bad directory fails before the work.
    store: the reference windows' vectors are kept in dnadiff's cache folder under the directory's content
    hash (embeddings/HASH.npz), so the next call on the same reference embeds only the samples."""
    from dnadiff.checkpoint import load_for_inference
    from dnadiff.eval.encoders import BackboneEncoder, Embedder, fingerprint
    from dnadiff.modelio.model_dir import is_model_dir
    from dnadiff.utils import cache_dir

    name = os.path.abspath(path)
    is_model = os.path.isdir(path) and not os.path.isfile(os.path.join(path, "classifier.json")) and is_model_dir(path)
    stored = cache_dir("embeddings", f"{fingerprint(path)}.npz") if store and os.path.isdir(path) else None
    if is_model:
        model = load_for_inference(path)
        if model.tokenizer.kind != "dna":
            raise DnadiffError(f"--embedder {path}: a {model.tokenizer.kind} model, not a DNA one")
        embedder = Embedder(BackboneEncoder(model.backbone), name=name, store=stored)
    else:
        embedder = Embedder(load_classifier(path, "--embedder")[0], name=name, store=stored)
    try:
        embedder(probe)
    except DnadiffError as exc:
        raise DnadiffError(f"--embedder {path}: {exc}") from None
    return embedder


def frechet_extra(embedder):
    from dnadiff.eval.encoders import frechet_metric

    return lambda samples, ref, is_floor: frechet_metric(embedder, samples, ref, progress=True)


BUNDLED = "bundled"  # --reference bundled: the chr22 sample inside the package
GENOME_MAX_N_FRAC = 0.1  # reference windows of a genome: at most 10% N (not mostly unsequenced gaps)


def fasta_reference(records: list[tuple[str, str]], length: int, max_windows: int) -> tuple[list[str], str]:
    """Reference sequences from a FASTA: records as they are, but a genome (records of at least twice the
    samples' length) cut into windows of `length` with at most 10% N, evenly spaced, at most `max_windows`.

    Comparing 256-bp samples with whole chromosomes (mostly N at the ends) measured the gaps, not the DNA.
    """
    import numpy as np

    long = [(name, seq) for name, seq in records if len(seq) >= 2 * length]
    if not long:
        return [seq for _, seq in records], ""
    short = [seq for _, seq in records if len(seq) < 2 * length]
    windows = []  # (record index, start)
    for r, (_, seq) in enumerate(long):
        arr = np.frombuffer(seq.encode("ascii", errors="replace"), dtype=np.uint8)
        n_count = np.concatenate([[0], np.cumsum(arr == ord("N"))])
        starts = np.arange(0, len(seq) - length + 1, length)
        frac = (n_count[starts + length] - n_count[starts]) / length
        windows += [(r, int(s)) for s in starts[frac <= GENOME_MAX_N_FRAC]]
    total = sum((len(seq) - length) // length + 1 for _, seq in long)
    if not windows:
        raise DnadiffError(f"reference: no {length}-bp window with at most {GENOME_MAX_N_FRAC:.0%} N")
    idx = sorted(set(np.linspace(0, len(windows) - 1, min(len(windows), max_windows)).round().astype(int).tolist()))
    seqs = [long[windows[i][0]][1][windows[i][1]: windows[i][1] + length] for i in idx]
    note = (f"{len(seqs):,} windows of {length} bp used (at most --max-reference-windows {max_windows:,}), evenly "
            f"spaced among the {len(windows):,} windows with at most {GENOME_MAX_N_FRAC:.0%} N, out of all "
            f"{total:,} non-overlapping {length}-bp windows of the {len(long)} record(s) at least {2 * length} bp long")
    if short:
        note += f", plus {len(short)} short record(s) as they are"
    return seqs + short, note


def oracle_perplexity(model_dir: str, samples: list[str], real: list[str], seed: int = 0) -> dict:
    """Perplexity (per base) of the samples, and of as many real sequences, under a dnadiff model."""
    import math

    import torch

    from dnadiff.checkpoint import load_for_inference
    from dnadiff.data.records import tile_records
    from dnadiff.eval.perplexity import evaluate_bound

    model = load_for_inference(model_dir)
    out = {"model": model_dir, "kind": "exact" if model.is_autoregressive else "bound"}
    for name, seqs in (("samples", samples), ("real", real)):
        if not seqs:
            continue
        length = max(len(s) for s in seqs)
        items = tile_records([(str(i), s) for i, s in enumerate(seqs)], length, model.tokenizer)
        loader = torch.utils.data.DataLoader(items, batch_size=32)
        res = evaluate_bound(model.denoiser, model.objective, loader, generator=torch.Generator().manual_seed(seed),
                             device=model.device)
        out[f"{name}_perplexity"] = res["perplexity"]
        out[f"{name}_bits_per_base"] = res["bits_per_token"]
    if "real_perplexity" in out and math.isfinite(out["real_perplexity"]):
        out["ratio_samples_to_real"] = out["samples_perplexity"] / out["real_perplexity"]
    return out


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: every option of this command with its value (defaults filled in)."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in ("command", "print_config")}
