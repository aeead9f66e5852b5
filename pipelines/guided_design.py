"""Guided design, judged honestly: steer a class-conditional generator toward "coding" on the
Leptospira coding/intergenic benchmark and judge with an independent oracle.

    python pipelines/guided_design.py --scale cpu            # results/guided_design_cpu.{md,json}

Steps: (1) split the train set per class into halves A and B (seed 0); (2) train the tiny
class-conditional MDLM of experiments/tiny_cfg_leptospira on the whole train set; (3) fine-tune a
noise-aware HyenaDNA classifier on half A (`dnadiff finetune ... model.noisy=true`): the guide,
reward = log p(coding | x); (4) fit the oracle on half B, a different architecture: logistic
regression on 3..5-mer counts of both strands; (5) design with every method and score: oracle
positive rate, mean guide reward, realism (k-mer JS k = 3..6 and |ΔGC| to the real coding test
sequences), diversity (mean pairwise Hamming, distinct 6-mers / possible), memorisation (mean
longest exact match to the train set, both strands), NFE (denoiser rows and reward rows per
sequence) and wall time. Rows: unguided, CFG (w = 1), cg, cg_grad, SVDD, SMC, best-of-N at the
denoiser budget of SVDD and of SMC, and the real coding / intergenic test sequences.

--scale cpu sizes (2 shared CPU cores): generator 300 steps; classifier 5 epochs on ≤ 2,000 of half A;
16 designs of 200 bases with 16 ancestral steps per method (cg exact: 4 designs, it scores
4 × 200 one-base edits per denoiser call). Data: $DNADIFF_DATA/benchmarks/... when set, else the
bundled 250-per-class subset.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import common
import numpy as np
import torch

from dnadiff.machine import describe_machine, load_average

SCALES = {"cpu": dict(gen_steps=300, clf_epochs=5, clf_max_train=2000, num=16, num_cg=4, steps=16, length=200,
                      svdd_m=4, smc_k=4, smc_alpha=0.1)}


def benchmark_root() -> Path:
    """The leptospira set under the data root ($DNADIFF_DATA), else the copy bundled with the package."""
    from dnadiff.data_root import bundled_data_root, data_root

    sets = [Path(root) / "benchmarks/leptospira_coding_vs_intergenic" for root in (data_root(), bundled_data_root())]
    return next((s for s in sets if s.is_dir()), sets[-1])


def class_sequences(root: Path, split: str, cls: str) -> list[str]:
    """The sequences of one class of a benchmark split, in file order (the package's benchmark reader)."""
    from dnadiff.data import load_benchmark_split

    data = load_benchmark_split(root, split)
    return [s for s, y in zip(data.sequences, data.labels) if data.classes[y] == cls]


def split_halves(root: Path, out: Path) -> dict:
    """halfA/halfB in the genomic-benchmarks layout (test = the full test set), per-class split."""
    rng = random.Random(0)
    classes = sorted(p.name for p in (root / "train").iterdir() if p.is_dir())
    seqs = {}
    for c in classes:
        files = sorted((root / "train" / c).glob("*.txt"))
        rng.shuffle(files)
        half = len(files) // 2
        for name, part in (("A", files[:half]), ("B", files[half:])):
            d = out / f"half{name}" / "train" / c
            d.mkdir(parents=True, exist_ok=True)
            for f in part:
                (d / f.name).write_text(f.read_text())
            seqs[(name, c)] = [f.read_text().strip().upper() for f in part]
            t = out / f"half{name}" / "test" / c
            t.mkdir(parents=True, exist_ok=True)
            for f in (root / "test" / c).glob("*.txt"):
                (t / f.name).write_text(f.read_text())
    return seqs


def kmer_features(seqs: list[str], ks=(3, 4, 5)) -> np.ndarray:
    """k-mer frequencies on both strands (the k-mer LR baseline's features), as a dense matrix."""
    from dnadiff.classifier_tuning import kmer_features as sparse_kmer_features

    return sparse_kmer_features(seqs, ks=ks).toarray()


def fit_oracle(pos: list[str], neg: list[str]):
    from sklearn.linear_model import LogisticRegression

    X = kmer_features(pos + neg)
    y = np.array([1] * len(pos) + [0] * len(neg))
    mu, sd = X.mean(0), X.std(0) + 1e-8
    clf = LogisticRegression(C=1.0, max_iter=2000).fit((X - mu) / sd, y)
    return lambda seqs: clf.predict_proba((kmer_features(seqs) - mu) / sd)[:, 1]


def evaluate(seqs: list[str], oracle, reward_fn, real_coding: list[str], train: list[str]) -> dict:
    from dnadiff.eval import gc_content, js_divergence, kmer_counts, longest_matches

    arr = np.array([list(s) for s in seqs])
    ham = [float((arr[i] != arr[j]).mean()) for i, j in itertools.combinations(range(len(seqs)), 2)]
    six = {s[i : i + 6] for s in seqs for i in range(len(s) - 5)}
    possible = sum(len(s) - 5 for s in seqs)
    row = {"oracle_pos_rate": float((oracle(seqs) > 0.5).mean()), "reward_mean": reward_fn(seqs),
           **{f"js_k{k}": js_divergence(kmer_counts(seqs, k), kmer_counts(real_coding, k)) for k in (3, 4, 5, 6)},
           "gc_dist": float(abs(np.nanmean(gc_content(seqs)) - np.nanmean(gc_content(real_coding)))),
           "hamming": float(np.mean(ham)) if ham else float("nan"), "distinct_6mers": len(six) / max(1, possible),
           "longest_match": float(np.mean(longest_matches(seqs, train)))}
    return row


def train_generator_and_guide(root: Path, work: Path, sc: dict) -> tuple[Path, Path]:
    """The class-conditional generator (whole train set) and the noise-aware guide (half A), each trained
    once per work folder; their run folders."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    gen_dir = work / "generator"
    if not (gen_dir / "model").is_dir():
        subprocess.run([sys.executable, "-m", "dnadiff", "train", "-q", "experiments/tiny_cfg_leptospira",
                        f"data.benchmark={root}", f"train.max_steps={sc['gen_steps']}", "--run-dir", str(gen_dir),
                        "--overwrite"], check=True, env=env)
    clf_dir = work / "classifier_A"
    if not (clf_dir / "classifier").is_dir():
        subprocess.run([sys.executable, "-m", "dnadiff", "finetune", "-q", "experiments/tiny_finetune",
                        f"data.dataset={work / 'data/halfA'}", "model.backbone=hyena", "model.noisy=true",
                        "protocol.seeds=[0]", f"train.epochs={sc['clf_epochs']}",
                        f"data.max_train={sc['clf_max_train']}", "data.max_test=200", "--out", str(clf_dir),
                        "--no-progress"], check=True, env=env)
    return gen_dir, clf_dir


def method_plan(sc: dict) -> list[tuple]:
    """(row label, method, options, designs) per guided row; best-of-N's options name the method whose
    denoiser budget it gets."""
    return [("unguided", "none", {}, sc["num"]), ("cfg w=1", "cfg", {}, sc["num"]),
            ("cg (exact)", "cg", {"scale": 1.0}, sc["num_cg"]), ("cg_grad", "cg_grad", {"scale": 1.0}, sc["num"]),
            ("svdd", "svdd", {"candidates": sc["svdd_m"], "alpha": 0.0}, sc["num"]),
            ("smc", "smc", {"particles": sc["smc_k"], "alpha": sc["smc_alpha"]}, sc["num"]),
            ("best_of_n @svdd budget", "best_of_n", "svdd", sc["num"]),
            ("best_of_n @smc budget", "best_of_n", "smc", sc["num"])]


def design(model, reward, name: str, opts, num: int, sc: dict, seed: int, nfe: dict):
    """`num` designs with one method: the token ids, the method's NFE stats and the options it ran with.
    `nfe` holds the denoiser calls per sequence of SVDD and SMC, the budgets of the best-of-N rows."""
    import dnadiff
    from dnadiff.guidance import build_method

    L, steps, tok = sc["length"], sc["steps"], model.tokenizer
    if name == "cfg":  # one batch, one stream per sequence (dnadiff.sample): the samples of SeedStream(seed)
        x = dnadiff.sample(model, num, L, steps=steps, label="coding", guidance=1.0, seed=seed, batch_size=num).x
        return x, {"nfe_per_sequence": 2 * steps, "reward_evals_per_sequence": 0}, opts
    if name == "best_of_n":
        opts = {"n": max(1, int(round(nfe[opts] / steps)))}
    if name in ("cg", "cg_grad"):
        opts = {**opts, "token_ids": list(tok.nucleotide_ids)}
    method = build_method(name, model.build_sampler("ancestral", steps), reward, **opts)
    x = dnadiff.sample(model, num, L, sampler=method, seed=seed, batch_size=num).x  # the unconditional model
    if name in ("svdd", "smc"):
        nfe[name] = method.last_stats["nfe_per_sequence"]
    return x, method.last_stats, opts


def run(args) -> dict:
    from dnadiff.checkpoint import load
    from dnadiff.guidance import build_reward

    torch.set_num_threads(1)
    sc = SCALES[args.scale]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    root = benchmark_root()
    halves = split_halves(root, work / "data")
    gen_dir, clf_dir = train_generator_and_guide(root, work, sc)
    guide = json.loads((clf_dir / "results.json").read_text())
    guide_acc = float(np.mean([r["test"]["accuracy"] for r in guide["runs"]]))
    oracle = fit_oracle(halves[("B", "coding")], halves[("B", "intergenic")])
    real_pos = class_sequences(root, "test", "coding")
    real_neg = class_sequences(root, "test", "intergenic")
    right = (oracle(real_pos) > 0.5).sum() + (oracle(real_neg) <= 0.5).sum()
    oracle_acc = float(right / (len(real_pos) + len(real_neg)))
    train_all = sum((v for v in halves.values()), [])

    model = load(str(gen_dir / "model"))
    model.backbone.eval()
    tok = model.tokenizer
    reward = build_reward(f"classifier:{clf_dir / 'classifier'}", target="coding")

    def reward_of(seqs):
        return float(reward(torch.tensor([tok.encode(s) for s in seqs])).mean())

    rows, nfe = [], {}
    for label, name, opts, num in method_plan(sc):
        start = time.time()
        x, stats, opts = design(model, reward, name, opts, num, sc, args.seed, nfe)
        seqs = model.decode(x)
        row = {"method": label, "num": num, **{k: v for k, v in opts.items() if k != "token_ids"},
               **evaluate(seqs, oracle, reward_of, real_pos, train_all),
               "nfe_per_seq": stats["nfe_per_sequence"], "reward_evals_per_seq": stats["reward_evals_per_sequence"],
               "wall_s": round(time.time() - start, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    for label, seqs in (("real coding (test)", real_pos[: sc["num"] * 4]),
                        ("real intergenic (test)", real_neg[: sc["num"] * 4])):
        rows.append({"method": label, "num": len(seqs), **evaluate(seqs, oracle, reward_of, real_pos, train_all)})
    return {"rows": rows, "oracle_test_accuracy": oracle_acc, "guide_test_accuracy": guide_acc,
            "benchmark": str(root), "scale": args.scale, "wall_s": round(time.time() - t0, 1),
            "machine": describe_machine(), "load_average": load_average(),
            "command": common.command_line(__file__, None)}


def markdown(res: dict) -> str:
    from dnadiff.utils import format_table

    cols = ["method", "num", "oracle_pos_rate", "reward_mean", "js_k3", "js_k6", "gc_dist", "hamming", "distinct_6mers",
            "longest_match", "nfe_per_seq", "reward_evals_per_seq", "wall_s"]
    table = format_table([{c: r.get(c, "") for c in cols} for r in res["rows"]], cols)
    return (f"# Guided design toward `coding` (Leptospira), scale {res['scale']}\n\n"
            f"Command: `{res['command']}`  \nBenchmark: {res['benchmark']}  \n"
            f"Wall time: {res['wall_s']} s on {res['machine']}; at the end, {res['load_average']}.  \n"
            f"Oracle (k-mer logistic regression on half B) test accuracy: {res['oracle_test_accuracy']:.3f}; the guide "
            f"is a noise-aware HyenaDNA classifier fine-tuned on half A (clean test accuracy "
            f"{res.get('guide_test_accuracy', float('nan')):.3f}, on a 200-sequence test subsample).\n\n"
            f"```\n{table}\n```\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", default="cpu", choices=sorted(SCALES))
    p.add_argument("--work", default="runs/guided_design_cpu")
    p.add_argument("--out", default="results/guided_design_cpu")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    res = run(args)
    from dnadiff.utils import atomic_write, portable_paths, write_json

    write_json(args.out + ".json", portable_paths(res))
    atomic_write(args.out + ".md", portable_paths(markdown(res)))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
