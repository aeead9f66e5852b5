"""Can a classifier tell the Markov chains' samples from real DNA? The classifier two-sample test of
`dnadiff metrics --discriminator` (issue 46) on the two Markov baselines that fit by counting (seconds).

    DNADIFF_DATA=/work/shared/data python pipelines/discriminator_cpu.py --threads 1     # ~25 CPU-min
    python pipelines/discriminator_cpu.py --rows dhs                                     # the DHS row only

Rows (each: `dnadiff metrics SAMPLES --reference REAL --discriminator --no-motifs`, the CNN and the k-mer LR,
5 folds, seed 0, with the real-vs-real floor: two disjoint halves of the real set):
  chr22   `dnadiff train configs/experiments/cpu_dna_markov.yaml` (interpolated KN chain, order chosen on valid),
          1,000 samples of 200 bp, against 200-bp windows of the chr22 subset's test split (the chain fitted
          the train split; --max-reference-windows 4000, evenly spaced)
  dhs     `dnadiff train configs/experiments/dhs_markov.yaml` (one chain per cell type), 4 x 256 samples of 200
          bp (--class per cell type), against DHS test sequences (chr1; the chains fitted the training split),
          512 per cell type drawn with the seed, so both sides hold the four cell types alike
Writes results/discriminator_cpu.{md,json}; the samples, models and metrics stay in --work
(default runs/discriminator_cpu). --resume keeps a row's metrics.json when its samples are unchanged.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import common
import numpy as np

REPO = Path(__file__).resolve().parent.parent
ROWS = ("chr22", "dhs")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows among {', '.join(ROWS)}")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--work", default="runs/discriminator_cpu", help="models, samples and metrics")
    p.add_argument("--results", default="results/discriminator_cpu", help="results path without extension")
    p.add_argument("--resume", action="store_true", help="reuse models, samples and metrics already in --work")
    p.add_argument("--oracles", default=None, metavar="DIR",
                   help="pipelines/dhs_oracles.py's OUT (e.g. runs/dhs_oracles): the DHS row's target-cell-type rate "
                        "under each evaluation oracle there (eval_oracle, neural_oracle), beside the real sequences'")
    return p.parse_args(argv)


def cli(argv: list[str]) -> None:
    from dnadiff.cli import main as dnadiff_main

    code = dnadiff_main(argv)
    if code != 0:
        raise SystemExit(f"error: `dnadiff {' '.join(argv)}` exited with {code}")


def train(config: str, name: str, work: Path, threads: int, resume: bool) -> Path:
    model = work / name / "model"
    if not (resume and model.is_dir()):
        cli(["train", config, f"name={name}", f"out_dir={work}", "--threads", str(threads), "-q", "--overwrite"])
    return model


def chr22_row(work: Path, threads: int, resume: bool) -> dict:
    from dnadiff.data_root import data_root

    model = train("configs/experiments/cpu_dna_markov.yaml", "chr22_markov", work, threads, resume)
    samples = work / "chr22_markov_1000x200.fa"
    if not (resume and samples.is_file()):
        cli(["sample", str(model), "--num", "1000", "--length", "200", "--seed", "0", "--threads", str(threads),
             "-q", "--out", str(samples)])
    root = Path(data_root()) / "hg19_chr22_subset"
    reference = ["--reference", str(root / "chr22.fa.gz"), "--bed", str(root / "sequences.bed"), "--split", "test",
                 "--max-reference-windows", "4000"]
    return judge("chr22 Markov chain (KN, order chosen on valid), 1,000 x 200 bp",
                 "chr22 subset test split, 200-bp windows", samples, reference, work / "chr22_metrics", threads,
                 resume)


def dhs_row(work: Path, threads: int, resume: bool, oracles: str | None = None) -> dict:
    from dnadiff.data import CELL_TYPES, load_dhs
    from dnadiff.utils import atomic_write

    model = train("configs/experiments/dhs_markov.yaml", "dhs_markov", work, threads, resume)
    samples = work / "dhs_markov_4x256.fa"
    if not (resume and samples.is_file()):
        parts = []
        for k, cell in enumerate(CELL_TYPES):
            part = work / f"dhs_markov_{cell}.fa"
            cli(["sample", str(model), "--num", "256", "--length", "200", "--class", cell, "--seed", str(k),
                 "--threads", str(threads), "-q", "--out", str(part)])
            parts.append(part.read_text())
        atomic_write(samples, "".join(parts))
    table = load_dhs()
    rows = table.indices("test")
    rng = np.random.default_rng(0)
    real = []  # 512 test sequences per cell type: the floor's two halves and the samples' side alike
    for k, cell in enumerate(CELL_TYPES):
        mine = rows[table.labels[rows] == k]
        real += [(cell, int(i)) for i in sorted(rng.choice(mine, 512, replace=False))]
    seqs = table.sequences(None)
    reference = work / "dhs_test_4x512.fa"
    atomic_write(reference, "".join(f">test_{i} class={c}\n{seqs[i]}\n" for c, i in real))
    row = judge("DHS per-cell-type Markov chains (`experiments/dhs_markov`), 4 x 256 x 200 bp",
                "DHS test split (chr1), 512 per cell type", samples, ["--reference", str(reference)],
                work / "dhs_metrics", threads, resume)
    if oracles:
        row["target_rates"] = target_rates(Path(oracles), samples, reference)
    return row


def target_rates(folder: Path, samples: Path, reference: Path) -> dict:
    """{oracle folder name: {"samples": rate, "real": rate}}: the share each evaluation oracle assigns to the cell
    type in each FASTA header (class=NAME) for the samples and for the real test sequences (its ceiling)."""
    from dnadiff.eval import load_oracle, score_fasta

    out = {}
    for name in ("eval_oracle", "neural_oracle"):
        if (folder / name / "classifier.json").is_file():
            loaded = load_oracle(folder / name)
            out[name] = {"backbone": loaded[1].get("backbone"), "oracle": str(folder / name),
                         **{side: score_fasta(fa, folder / name, model_and_meta=loaded)["rate"]
                            for side, fa in (("samples", samples), ("real", reference))}}
    return out


def judge(name: str, real: str, samples: Path, reference: list[str], out: Path, threads: int, resume: bool) -> dict:
    argv = ["metrics", str(samples), *reference, "--discriminator", "--no-motifs", "--no-plots", "--kmax", "6",
            "--out", str(out), "--force", "--threads", str(threads)]
    w0 = time.time()
    if not (resume and (out / "metrics.json").is_file()
            and (out / "metrics.json").stat().st_mtime > samples.stat().st_mtime):
        cli(argv)
    res = json.loads((out / "metrics.json").read_text())
    return {"row": name, "real": real, "command": "dnadiff " + " ".join(argv), "wall_s": round(time.time() - w0, 1),
            "discriminator": res["discriminator"],
            "kmer_js_6": res["samples"]["kmer_js"]["6"], "floor_kmer_js_6": (res.get("floor") or {}).get(
                "kmer_js", {}).get("6")}


def markdown(r: dict) -> str:
    from dnadiff.utils import markdown_table

    labels = {"cnn": "CNN (one-hot, both strands)", "kmer_lr": "k-mer LR (k 3-6, both strands)"}
    rows = []
    for row in r["rows"]:
        d = row["discriminator"]
        for c in ("cnn", "kmer_lr"):
            x = d[c]
            rows.append({"samples": row["row"], "real": row["real"], "judge": labels[c],
                         "AUROC ± SE": f"{x['auroc']:.3f} ± {x['std_error']:.3f}", "accuracy": f"{x['accuracy']:.3f}",
                         "p-value": f"{x['p_value']:.2g}", "n per side": x["n_per_side"],
                         "floor AUROC ± SE (real vs real)": f"{x['floor_auroc']:.3f} ± {x['floor_std_error']:.3f}",
                         "floor p": f"{x['floor_p_value']:.2g}", "CPU s (samples test)": x["cpu_s"]})
    lines = [
        "# Can a classifier tell the Markov chains' samples from real DNA? (issue 46)",
        "",
        f"`{r['command']}`  ",
        f"{r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU ({r['threads']} thread); {r['machine']}; "
        f"before: {r['load_before']}; after: {r['load_after']}.",
        "",
        "Classifier two-sample test (Lopez-Paz & Oquab, ICLR 2017; dnadiff/eval/discriminator.py): 5-fold "
        "cross-fitted scores of a small CNN and of a k-mer logistic regression telling the samples from as many "
        "held-out real sequences; AUROC ± Hanley-McNeil SE (0.5 = indistinguishable), accuracy and its exact "
        "binomial p-value; the floor is the same test on two disjoint halves of the real set.",
        "",
        markdown_table(rows),
        "",
        *target_rate_lines(r),
        "Commands (each row's metrics):",
        "",
        *[f"- `{row['command']}`" for row in r["rows"]],
        "",
    ]
    return "\n".join(lines)


def target_rate_lines(r: dict) -> list[str]:
    from dnadiff.utils import markdown_table

    rows = [{"samples": row["row"], "oracle": f"{name} ({t['backbone']})",
             "target-cell-type rate": f"{t['samples']:.3f}", "real test sequences (ceiling)": f"{t['real']:.3f}"}
            for row in r["rows"] for name, t in (row.get("target_rates") or {}).items()]
    if not rows:
        return []
    return ["Target-cell-type rate under the DHS evaluation oracles (pipelines/dhs_oracles.py; argmax = the cell "
            "type the samples were generated for; the real row: the same oracle on the 4 x 512 test sequences):",
            "", markdown_table(rows), ""]


def run(args: argparse.Namespace, command: str) -> dict:
    from dnadiff.errors import DnadiffError
    from dnadiff.machine import describe_machine, load_average
    from dnadiff.threads import apply_threads
    from dnadiff.utils import atomic_write, portable_paths, write_json

    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    if not rows or any(r not in ROWS for r in rows):
        raise DnadiffError(f"--rows {args.rows!r}: give a comma-separated subset of {', '.join(ROWS)}")
    apply_threads(args.threads)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    load_before, w0, c0 = load_average(), time.time(), time.process_time()
    out = [chr22_row(work, args.threads, args.resume) if r == "chr22" else
           dhs_row(work, args.threads, args.resume, args.oracles) for r in rows]
    result = portable_paths({"command": command, "threads": args.threads, "rows": out,
                             "wall_s": round(time.time() - w0, 1), "cpu_s": round(time.process_time() - c0, 1),
                             "load_before": load_before, "load_after": load_average(),
                             "machine": describe_machine()})
    results = Path(args.results)
    results.parent.mkdir(parents=True, exist_ok=True)
    write_json(results.with_suffix(".json"), result)
    atomic_write(results.with_suffix(".md"), markdown(result))
    print(markdown(result))
    return result


def main(argv: list[str] | None = None) -> int:
    return common.main_plain(run, parse_args(argv), __file__, argv)


if __name__ == "__main__":
    sys.exit(main())
