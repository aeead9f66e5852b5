"""The DHS generation table (issue 34 §4): which generator makes cell-type-specific *and* natural DNA?

    python pipelines/dhs_benchmark.py --scale cpu --threads 1            # results/dhs_cpu.{md,json} + PNGs
    python pipelines/dhs_benchmark.py --scale cpu --rows real,markov     # the classical rows first (minutes)
    python pipelines/dhs_benchmark.py --scale cpu --dry-run              # every row built, one step, a sample
    python pipelines/dhs_benchmark.py --scale tiny                       # the 300-row fixture (tests)
    python pipelines/dhs_benchmark.py --from-json results/dhs_cpu.json   # the page and PNGs again, no scoring

Needs the DHS table (`dnadiff data dhs`) and the two oracles of pipelines/dhs_oracles.py (--oracles,
default runs/dhs_oracles: reward_classifier/ and eval_oracle/); --scale tiny and --dry-run build their own
from the fixture / with one step. Rows (--rows, in this order):
- real: real test sequences (the floor a perfect generator reaches);
- markov: per-cell-type Markov chains (configs/experiments/dhs_markov.yaml, each order chosen on chr2);
- ar: the cell-type-conditional Mamba AR (dhs_cond_ar.yaml), sampled with the label; bd3: its network and budget
  trained with block diffusion (dhs_cond_bd3lm.yaml, B = 4), sampled block by block with the label (issue 52);
- cfg: the cell-type-conditional MDLM (dhs_cond_mdlm.yaml) with classifier-free guidance, one weight per
  cell type chosen on the validation split (below);
- cfg_chr22: the cfg row (same config, budget and protocol) started from the genome-pretrained chr22 MDLM
  (--chr22-model, default runs/cpu_hour/caduceus_mdlm/model; skipped when absent): does pretraining help at equal
  budget (issue 47 §4)? Its valid bits/base is in the models table (the chr22 run's own hour is not counted);
- cg: the unconditional MDLM (dhs_mdlm.yaml) steered by the *reward* classifier (`dnadiff design --reward
  classifier:DIR --target CELL --method cg_grad`).
Each model is trained once (`dnadiff train CONFIG --run-dir OUT/models/ROW`, kept across reruns), each sample
file kept while its command and model fingerprint are unchanged (FASTA.done.json): rows sampled by separate runs
(one per core: --rows cfg, --rows cg) are scored together by a last run with every row, or --carry-from JSON adds
an earlier run's rows (same data and protocol; the real row, made by both, must score alike: same judges).

Protocol. For each seed s, each cell type's test sequences (chr1) are split at random into halves A and B: B is
the reference of every row; the real row is `num` sequences of A; each generator makes `num` per cell type with
seed s. The evaluation oracle only scores. CFG weight (chr2, never test): per grid weight, `valid_num` samples
per cell type (seed 1000) scored by the *reward* classifier; kept: the highest reward target rate among weights
whose 4-mer JS to the cell type's validation sequences is <= 1.5 x that of w = 0 (a naturalness guard).

Metrics (per cell type: its samples vs half B of its own test sequences; overall: all pooled), mean ±
range (max - min) over seeds:
- target: target-cell-type rate under the evaluation oracle (dnadiff.eval.oracle: argmax = the cell type
  generated for; target_neural: under ORACLES/neural_oracle); the real row's value is its accuracy (the ceiling);
- motif_spearman: Spearman of JASPAR 2024 CORE vertebrate hit rates vs the reference (dnadiff.eval.motifs);
  and per cell type, the hits/kb of its marker motifs (MARKERS) and their enrichment over the row's other
  cell types (does a K562 sample carry GATA as real K562 DHSs do?);
- kmer3_pearson, js_k1..js_k6 (dnadiff.eval.dna_metrics), gc_mean and gc_w1 (Wasserstein-1 of per-sequence GC);
- memorisation: share of sequences whose nearest training sequence (same offset, both strands, Hamming) is
  >= 90% identical or that share >= 50 bp exactly with a training sequence (either strand; 50-mer hashes);
- diversity: distinct 6-mers / 4,096 and mean pairwise identity (same offset) among the set;
- frechet: the in-house Fréchet distance (dnadiff.eval.encoders) in the evaluation oracle's feature space.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

import common
import judging
import numpy as np
from dhs_benchmark_report import ROW_LABELS, describe, fmt, markdown, plots  # noqa: F401  (dhs_design reads bench.describe)
from dhs_benchmark_steps import (  # noqa: F401  (read here by siblings)
    CFG_ROWS,
    CONFIGS,
    SHORT_STEP,
    carry_rows,
    chr22_start,
    dnadiff,
    fingerprint_of,
    generate,
    read_samples,
    train_row,
)
from dhs_seqstats import (  # noqa: F401  (kmer_hashes, MATCH: re-exported, dhs_design and the tests read them here)
    MATCH,
    codes_matrix,
    distinct_kmers,
    kmer_hashes,
    max_identity,
    mean_pairwise_identity,
    onehot_rows,
    shares_kmer,
    training_kmer_index,
)

REPO = Path(__file__).resolve().parent.parent
ROWS = ("real", "markov", "ar", "bd3", "cfg", "cfg_chr22", "cg")
# JASPAR 2024 names of each cell type's marker motifs (issue 34 §4)
MARKERS = {"GM12878": ("Spi1", "IRF4", "IRF8", "EBF1"), "HepG2": ("HNF4A", "HNF4G", "FOXA1", "FOXA2"),
           "K562": ("GATA1", "GATA1::TAL1", "GATA2"), "hESC": ("Pou5f1::Sox2", "POU5F1", "SOX2")}
SCALES = {
    "cpu": {"out": "runs/dhs_benchmark", "results": "results/dhs_cpu", "oracles": "runs/dhs_oracles",
            "seeds": [0, 1, 2], "num": 256, "valid_num": 32, "cfg_weights": [0.0, 1.0, 2.0, 4.0],
            # 50 denoising steps for 200 bp (4 positions a step): 256 x 200 x 50 = 2.6M token evaluations a cell type
            # (x2 with CFG), ~2 min at the 17-30K tokens/s of results/sample_batch_cpu.json on one core
            "steps": 50, "train": {"markov": []}},
    "tiny": {"out": "runs/dhs_benchmark_tiny", "results": None, "oracles": None, "seeds": [0, 1], "num": 4,
             "valid_num": 4, "cfg_weights": [0.0, 1.0], "steps": 4,
             "train": {"markov": ["model.overrides.max_order=3"], "*": SHORT_STEP}},
}
CFG_GUARD = 1.5  # naturalness guard of the CFG weight choice (4-mer JS relative to w = 0)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    common.add_common_options(p, scales=SCALES, results_help="results path without extension (default "
                              "results/dhs_cpu; tiny: OUT/dhs_tiny)", dry_run_help="build every row, train one "
                              "step, sample one sequence per cell type; write no table",
                              from_json="re-render the page and PNGs of a finished run from its JSON (no sampling, "
                              "no scoring; at --results, default beside the JSON)")
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of {','.join(ROWS)} (default all)")
    p.add_argument("--out", default=None, help="work folder (default runs/dhs_benchmark[_tiny])")
    p.add_argument("--oracles", default=None, help="folder with reward_classifier/ and eval_oracle/ "
                   "(default runs/dhs_oracles; tiny: trained into OUT/oracles)")
    p.add_argument("--chr22-model", default=None, metavar="DIR", help="the chr22 MDLM the cfg_chr22 row starts "
                   "from (default runs/cpu_hour/caduceus_mdlm/model; the row is skipped when that is absent)")
    p.add_argument("--carry-from", default=None, metavar="JSON", help="add an earlier run's rows (see above)")
    p.add_argument("--seeds", default=None, help="comma-separated subset of the scale's seeds (e.g. to sample a row's "
                   "seeds in separate processes; a last run with every seed reuses their sample files)")
    args = p.parse_args(argv)
    args.row_list = [r.strip() for r in args.rows.split(",") if r.strip()]
    try:
        args.seed_list = [int(x) for x in args.seeds.split(",") if x.strip()] if args.seeds else None
    except ValueError:
        p.error(f"--seeds: expected comma-separated integers, got {args.seeds!r}")
    if args.seed_list is not None and not set(args.seed_list) <= set(SCALES[args.scale]["seeds"]):
        p.error(f"--seeds: scale {args.scale} has seeds {SCALES[args.scale]['seeds']}")
    bad = [r for r in args.row_list if r not in ROWS]
    if bad or not args.row_list:
        p.error(f"--rows: unknown row(s) {', '.join(bad) or '(none)'}; choose from {', '.join(ROWS)}")
    return args


# ----------------------------------------------------------------------------- metrics


def score_set(samples: list[str], reference: list[str], target: int | None, ctx: dict, hits=None,
              ref_hits=None) -> dict:
    """Every metric of one set of sequences against its reference (`target`: the class index they were made
    for; None: the pooled set, whose targets are ctx['pooled_targets']); hits, ref_hits: their motif scans."""
    from dnadiff.eval import (
        frechet_metric,
        gc_content,
        js_divergence,
        kmer_counts,
        kmer_pearson,
        spearman,
        wasserstein1,
    )

    res: dict = {"n": len(samples)}
    if ctx.get("oracle") is not None:
        targets = ctx["pooled_targets"] if target is None else [target] * len(samples)
        res["target"] = judging.target_rate_of(ctx["oracle"], samples, targets, ctx["classes"])
        if ctx.get("neural") is not None:  # the neural evaluation oracle beside the k-mer LR (issue 46)
            res["target_neural"] = judging.target_rate_of(ctx["neural"], samples, targets, ctx["classes"])
        res["frechet"] = frechet_metric(ctx["embedder"], samples, reference)["distance"] if len(samples) > 1 else None
    rs = hits[0].sum(axis=0) / max(hits[1].sum(), 1) * 1000.0
    rr = ref_hits[0].sum(axis=0) / max(ref_hits[1].sum(), 1) * 1000.0
    res["motif_spearman"] = spearman(rs, rr)
    res["kmer3_pearson"] = kmer_pearson(samples, reference, k=3)
    for k in range(1, 7):
        res[f"js_k{k}"] = js_divergence(kmer_counts(samples, k), kmer_counts(reference, k))
    gs, gr = gc_content(samples), gc_content(reference)
    res["gc_mean"], res["gc_reference"], res["gc_w1"] = float(gs.mean()), float(gr.mean()), wasserstein1(gs, gr)
    memo = ctx.setdefault("memo", {})  # sequence -> (identity, shares 50 bp): the pooled set is the classes' sets
    todo = list(dict.fromkeys(s for s in samples if s not in memo))
    if todo:
        ident = max_identity(todo, ctx["train_codes"], ctx["train_rc"])
        shared = shares_kmer(todo, ctx["train_index"])
        memo.update((s, (float(i), bool(m))) for s, i, m in zip(todo, ident, shared))
    ident = np.array([memo[s][0] for s in samples])
    shared = np.array([memo[s][1] for s in samples])
    res["memorised"] = float(((ident >= 0.9) | shared).mean())
    res["max_identity_mean"], res["shares_50bp"] = float(ident.mean()), float(shared.mean())
    res["distinct_6mers"] = distinct_kmers(samples)
    res["pairwise_identity"] = mean_pairwise_identity(samples)
    if target is None:  # the pooled set: can a CNN / a k-mer LR tell it from the pooled reference? (issue 46)
        res.update(judging.disc_columns(samples, reference))
    return res


def marker_rates(scanner, hits: np.ndarray, bases: np.ndarray, rows: np.ndarray) -> dict:
    """{cell type: marker hits per kb in `rows`} (hits of the motifs named in MARKERS, summed)."""
    names = [m.name for m in scanner.motifs]
    out = {}
    for cell, markers in MARKERS.items():
        cols = [j for j, n in enumerate(names) if n in markers]
        out[cell] = float(hits[rows][:, cols].sum() / max(bases[rows].sum(), 1) * 1000.0) if cols else float("nan")
    return out


# ----------------------------------------------------------------------------- the run


def load_oracles(args, out: Path, dry: bool, log) -> tuple[str | None, str | None, dict]:
    """(reward classifier dir, evaluation oracle dir, what was trained): the given folder's, or tiny ones."""
    import dhs_oracles

    scale = SCALES[args.scale]
    folder = args.oracles or scale["oracles"]
    if folder and not dry:
        reward, evaluation = Path(folder) / "reward_classifier", Path(folder) / "eval_oracle"
        return (str(reward) if reward.is_dir() else None), (str(evaluation) if evaluation.is_dir() else None), {}
    trained = {}
    overrides = [*dhs_oracles.SCALES["tiny"]["overrides"], "train.lr_grid=[0.005]"]
    for role, config, half, name in dhs_oracles.ORACLES:
        trained[role] = dhs_oracles.train_oracle(role, config, half, name, out / "oracles", overrides, args.threads,
                                                 log)
    return str(out / "oracles" / "reward_classifier"), str(out / "oracles" / "eval_oracle"), trained


def oracle_meta(folder: str | None) -> dict | None:
    """What a classifier directory is (its classifier.json's backbone, preset, role) and its content fingerprint,
    so a table says which oracle scored it."""
    from dnadiff.eval import fingerprint

    if folder is None or not (Path(folder) / "classifier.json").is_file():
        return None
    meta = json.loads((Path(folder) / "classifier.json").read_text())
    return {**{k: meta.get(k) for k in ("backbone", "preset", "conjoin", "role")}, "fingerprint": fingerprint(folder)}


def choose_cfg_weights(model: str, valid: dict, reward_dir: str, out: Path, scale: dict, threads: int, log,
                       row: str = "cfg") -> dict:
    """One CFG weight per cell type, on the validation split with the reward classifier (module docstring)."""
    from dnadiff.data import CELL_TYPES
    from dnadiff.eval import js_divergence, kmer_counts, predict_proba, target_rate
    from dnadiff.heads import load_classifier_dir

    reward_model, _ = load_classifier_dir(reward_dir)
    table = {}
    for k, cell in enumerate(CELL_TYPES):
        table[cell] = []
        for w in scale["cfg_weights"]:
            samples, _ = generate(row, model, cell, scale["valid_num"], 1000, out / "valid" / f"{row}_w{w:g}_{cell}.fa",
                                  scale, threads, None, w, log)
            rate = target_rate(predict_proba(reward_model, samples), [k] * len(samples), list(CELL_TYPES))["rate"]
            js4 = js_divergence(kmer_counts(samples, 4), kmer_counts(valid[cell], 4))
            table[cell].append({"weight": w, "reward_target_rate": rate, "js_k4_valid": js4})
    chosen = {}
    for cell, rows in table.items():
        base = next(r for r in rows if r["weight"] == 0.0)["js_k4_valid"] if any(r["weight"] == 0.0 for r in rows) \
            else min(r["js_k4_valid"] for r in rows)
        ok = [r for r in rows if r["js_k4_valid"] <= CFG_GUARD * base] or rows
        chosen[cell] = max(ok, key=lambda r: (r["reward_target_rate"], -r["weight"]))["weight"]
        log(f"{row}: {cell}: weight {chosen[cell]:g} chosen on the validation split")
    return {"chosen": chosen, "grid": table, "rule": f"highest reward-classifier target rate among weights whose "
            f"4-mer JS to the cell type's validation sequences is <= {CFG_GUARD} x that of w = 0"}


def run(args: argparse.Namespace, command: str, dry: Path | None) -> int:
    import dhs_oracles

    from dnadiff.data import CELL_TYPES, load_dhs
    from dnadiff.eval import (
        Embedder,
        MotifScanner,
        background_of,
        load_jaspar,
        load_oracle,
        reverse_complement,
        scanner_settings,
        summarize,
    )
    from dnadiff.tokenizers import DNATokenizer

    scale = SCALES[args.scale]
    if args.seed_list is not None:
        scale = {**scale, "seeds": args.seed_list}
    out = dry if dry is not None else Path(args.out or scale["out"])
    out.mkdir(parents=True, exist_ok=True)
    results = Path(args.results) if args.results else (Path(scale["results"]) if scale["results"] else out / "dhs_tiny")
    if args.seed_list is not None and not args.results:  # a subset of seeds never replaces the table
        results = out / f"partial_seeds_{'_'.join(map(str, args.seed_list))}"
    if args.scale == "tiny":
        os.environ["DNADIFF_CACHE"] = str(dhs_oracles._tiny_cache(out))
    load_before, w0, c0 = common.start(args.threads)
    log = print
    table = load_dhs()
    tok = DNATokenizer()

    def seqs(rows):
        return [tok.decode(table.tokens[i]) for i in rows]

    reward_dir, eval_dir, oracles_trained = load_oracles(args, out, dry is not None, log)
    rows = list(args.row_list)
    for row in ("cfg", "cfg_chr22", "cg"):
        if row in rows and reward_dir is None:
            raise SystemExit(f"error: row {row} needs the reward classifier: run pipelines/dhs_oracles.py first "
                             f"(or give --oracles DIR)")
    chr22 = chr22_start(args.chr22_model, out, dry is not None or args.scale == "tiny", args.threads, log) \
        if "cfg_chr22" in rows else None
    rows = [row for row in rows if row != "cfg_chr22" or chr22 is not None]
    models = {row: train_row(row, out, scale, args.threads, dry is not None, log, chr22 if row == "cfg_chr22" else None)
              for row in rows if row != "real"}
    if dry is not None:  # one sequence per cell type from every row, then stop
        for row, info in models.items():
            for cell in CELL_TYPES:
                generate(row, info["model"], cell, 1, 0, out / "dry" / f"{row}_{cell}.fa", {**scale, "steps": 2},
                         args.threads, reward_dir, 1.0, log)
        print(f"dry run: rows {', '.join(rows)} built, trained one step and sampled ({time.time() - w0:.0f} s)")
        return 0

    valid = {cell: seqs(table.indices("valid")[table.labels[table.indices("valid")] == k])
             for k, cell in enumerate(CELL_TYPES)}
    cfg_choice = {row: choose_cfg_weights(models[row]["model"], valid, reward_dir, out, scale, args.threads, log, row)
                  for row in CFG_ROWS if row in rows}

    # what every set is scored with
    train_seqs = seqs(table.indices("train"))
    ctx = {"classes": list(CELL_TYPES), "train_seqs": train_seqs, "train_codes": onehot_rows(codes_matrix(train_seqs)),
           "train_rc": onehot_rows(codes_matrix([reverse_complement(s) for s in train_seqs])),
           "train_index": training_kmer_index(train_seqs), "oracle": None}
    if eval_dir is not None:
        oracle, _ = load_oracle(eval_dir)
        ctx.update(oracle=oracle, embedder=Embedder(oracle, name="evaluation oracle"))
        ctx["neural"], ctx["neural_dir"] = judging.neural_oracle(str(Path(eval_dir).parent))
    else:
        log("warning: no evaluation oracle (run pipelines/dhs_oracles.py): target rate and Fréchet left out")
    test_rows = {k: table.indices("test")[table.labels[table.indices("test")] == k] for k in range(len(CELL_TYPES))}
    scanner = MotifScanner(load_jaspar(), background_of(seqs(table.indices("test"))))

    per_seed: dict = {row: [] for row in rows}
    gen_info: dict = {row: [] for row in rows}
    for seed in scale["seeds"]:
        rng = np.random.default_rng(seed)
        ref, real = {}, {}
        for k, cell in enumerate(CELL_TYPES):
            perm = rng.permutation(test_rows[k])
            half = len(perm) // 2
            ref[cell] = seqs(perm[half:])
            real[cell] = seqs(perm[:half][: scale["num"]])
        ref_hits = {cell: scanner.scan(ref[cell]) for cell in CELL_TYPES}
        pooled_ref = list(itertools.chain.from_iterable(ref[c] for c in CELL_TYPES))
        pooled_ref_hits = (np.concatenate([ref_hits[c][0] for c in CELL_TYPES]),
                           np.concatenate([ref_hits[c][1] for c in CELL_TYPES]))
        for row in rows:
            sets, info = {}, []
            for cell in CELL_TYPES:
                if row == "real":
                    sets[cell] = real[cell]
                else:
                    w = cfg_choice[row]["chosen"][cell] if row in cfg_choice else None
                    sets[cell], i = generate(row, models[row]["model"], cell, scale["num"], seed,
                                             out / "samples" / f"{row}_seed{seed}_{cell}.fa", scale, args.threads,
                                             reward_dir, w, log)
                    info.append(i)
            hits = {cell: scanner.scan(sets[cell]) for cell in CELL_TYPES}
            entry = {"seed": seed, "per_class": {}}
            for k, cell in enumerate(CELL_TYPES):
                entry["per_class"][cell] = score_set(sets[cell], ref[cell], k, ctx, hits[cell], ref_hits[cell])
            pooled = list(itertools.chain.from_iterable(sets[c] for c in CELL_TYPES))
            ctx["pooled_targets"] = [k for k, c in enumerate(CELL_TYPES) for _ in sets[c]]
            all_hits = (np.concatenate([hits[c][0] for c in CELL_TYPES]),
                        np.concatenate([hits[c][1] for c in CELL_TYPES]))
            entry["overall"] = score_set(pooled, pooled_ref, None, ctx, all_hits, pooled_ref_hits)
            owner = np.concatenate([[k] * len(sets[c]) for k, c in enumerate(CELL_TYPES)])
            entry["markers"] = {cell: marker_rates(scanner, all_hits[0], all_hits[1], owner == k)
                                for k, cell in enumerate(CELL_TYPES)}
            per_seed[row].append(entry)
            gen_info[row].append({"seed": seed, "wall_s": round(sum(i["wall_s"] for i in info), 1),
                                  "commands": [i["command"] for i in info]})
            t = entry["overall"].get("target")
            log(f"{row} seed {seed}: overall target rate {t if t is None else round(t, 3)}, "
                f"motif Spearman {entry['overall']['motif_spearman']:.3f}, 6-mer JS {entry['overall']['js_k6']:.4f}")

    summary = {}
    for row in rows:
        summary[row] = {}
        for part in [*CELL_TYPES, "overall"]:
            entries = [e["overall"] if part == "overall" else e["per_class"][part] for e in per_seed[row]]
            keys = [k for k in entries[0] if k != "n"]
            summary[row][part] = {k: summarize([e[k] for e in entries]) for k in keys}
        summary[row]["markers"] = {cell: {m: summarize([e["markers"][cell][m] for e in per_seed[row]])
                                          for m in CELL_TYPES} for cell in CELL_TYPES}
    wall, cpu = time.time() - w0, time.process_time() - c0
    result = {"scale": args.scale, "command": command, "threads": args.threads, "rows": rows,
              "seeds": scale["seeds"], "num_per_cell_type": scale["num"], "cell_types": list(CELL_TYPES),
              "data": {"sha256": table.sha256, "counts": table.counts()},
              "oracles": {"reward": reward_dir, "evaluation": eval_dir, "trained_here": oracles_trained or None,
                          "reward_meta": oracle_meta(reward_dir), "evaluation_meta": oracle_meta(eval_dir),
                          "neural": ctx.get("neural_dir"), "neural_meta": oracle_meta(ctx.get("neural_dir"))},
              "models": models, "cfg_weights": cfg_choice.get("cfg"), "cfg_chr22_weights": cfg_choice.get("cfg_chr22"),
              "chr22_model": chr22, "generation": gen_info, "summary": summary,
              "per_seed": per_seed, "markers": {c: list(m) for c, m in MARKERS.items()},
              "motif_scanner": scanner_settings(scanner, "JASPAR2024 CORE vertebrates (pyjaspar)"),
              "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load_before": load_before,
              **common.stamp("load_after")}
    if args.carry_from:
        result = carry_rows(result, args.carry_from, ROWS, log)
    common.write_report(results, result, markdown, lambda r, _png: plots(r, results))  # plots: a list of PNGs
    print(f"wrote {results.with_suffix('.md')} ({wall:.0f} s wall, {cpu:.0f} s CPU)")
    return 0


def rerender(args: argparse.Namespace, command: str) -> int:
    """--from-json: a finished run's page and PNGs written again (e.g. after the page's code changed), rows and
    scores untouched."""
    from dnadiff.errors import DnadiffError

    result = common.read_results_json(args.from_json, "dhs_benchmark")
    missing = sorted({"rows", "summary", "cell_types", "oracles", "models", "generation"} - set(result))
    if missing:
        raise DnadiffError(f"--from-json {args.from_json}: not a dhs_benchmark results JSON (no {', '.join(missing)})")
    return common.rerender(args, result, markdown, lambda r, png: plots(r, png.with_suffix("")))  # plots: STEM_*.png


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        return common.main_plain(rerender, args, __file__, argv)
    return common.main_with_dry_run(run, args, __file__, argv, "dhs_benchmark")


if __name__ == "__main__":
    sys.exit(main())
