"""`dnadiff data dhs`: the DNA-Diffusion DHS table into dnadiff's cache folder (offline with --from)."""

from __future__ import annotations

import argparse

HELP = "get a labelled data set into dnadiff's cache folder (dhs: cell-type-specific DHS sequences)"
DESCRIPTION = """Get a data set into dnadiff's cache folder ($DNADIFF_CACHE, else ~/.cache/dnadiff), checked
and stored in the form the loaders read.

  dhs   47,872 ENCODE DHS sequences of 200 bp, each specific to one of four cell types (GM12878, HepG2,
        K562, hESC), split by chromosome (training / validation chr2 / test chr1), from the
        `dnadiffusion` 0.0.0.dev0 wheel (MIT). Trains with `data=dhs`.

  dnadiff data dhs                                   # pip download the wheel (no install), read the table
  dnadiff data dhs --from dnadiffusion-0.0.0.dev0-py3-none-any.whl   # offline: a wheel (or the .txt)
  dnadiff data dhs --export-benchmark dhs_bench      # + a genomic-benchmarks folder for `dnadiff finetune`"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    sets = p.add_subparsers(dest="dataset", metavar="DATASET", required=True)
    dhs = sets.add_parser("dhs", help="the DNA-Diffusion DHS table (4 cell types, 200 bp)",
                          description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    dhs.add_argument("--from", dest="source", default=None, metavar="PATH",
                     help="the dnadiffusion wheel (or any zip holding the table), the table's .txt, or a folder "
                          "holding either; default: `python -m pip download dnadiffusion==0.0.0.dev0 --no-deps`")
    dhs.add_argument("--force", action="store_true",
                     help="fetch and store the table again when it is already in the cache; "
                          "with --export-benchmark: replace that folder")
    dhs.add_argument("--export-benchmark", default=None, metavar="DIR",
                     help="also write DIR/{train,test}/CLASS/N.txt (genomic-benchmarks layout, one sequence a "
                          "file) for `dnadiff finetune --dataset DIR`: train = the training split")
    dhs.add_argument("--benchmark-test", choices=("test", "valid"), default="test",
                     help="the split written as DIR/test (valid: choose settings on validation first; "
                          "default: test)")
    dhs.add_argument("--print-config", action="store_true", default=argparse.SUPPRESS,  # keeps `data --print-config`
                     help="print the options, the cache folder and the pinned sha256 (YAML) and exit")
    # the `data` parser's options also after `dhs` (SUPPRESS: not given here keeps the value given before `dhs`)
    dhs.add_argument("-q", "--quiet", action="count", default=argparse.SUPPRESS, help="only warnings and errors")
    dhs.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more detail on stderr")


def run(args: argparse.Namespace) -> int:
    from dnadiff.data import dhs, dhs_fetch
    from dnadiff.utils import format_table

    folder = dhs.store_dir()
    meta = dhs.stored_meta(folder)
    if meta is not None and not args.force:
        note = " (--from not read)" if args.source else ""
        print(f"DHS table already in {folder} (sha256 {meta['sha256']}); --force fetches it again{note}")
        counts, chroms = meta["counts"], meta["chromosomes"]
    else:
        if args.source is None:
            print(f"downloading {dhs_fetch.WHEEL_SPEC} with pip (no dependencies, nothing installed) ...", flush=True)
        table, where = dhs_fetch.fetch_dhs(args.source, folder, expected_sha256=dhs_fetch.DHS_SHA256)
        counts, chroms = table.counts(), table.chromosomes()
        print(f"read {where}\nsha256 {table.sha256} (checked)\nstored {len(table)} rows in {folder}")
    print(f"validation: {', '.join(chroms['valid'])}; test: {', '.join(chroms['test'])}\n")
    print(format_table(dhs.summary_rows(counts)))
    if args.export_benchmark:
        from dnadiff.data.dhs_export import export_benchmark

        n = export_benchmark(dhs.load_dhs(folder), args.export_benchmark, test_split=args.benchmark_test,
                             force=args.force)
        print(f"\nwrote {n} sequences to {args.export_benchmark}/{{train,test}}/CLASS/N.txt "
              f"(train = training split, test = {args.benchmark_test} split)")
    return 0


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: the options with their values, where the table goes and the sha256 it must have."""
    from dnadiff.data import dhs, dhs_fetch

    options = {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in ("command", "print_config")}
    return {**options, "store": str(dhs.store_dir()), "sha256": dhs_fetch.DHS_SHA256, "member": dhs.DHS_MEMBER}
