"""The two DHS oracles of the DRAKES protocol (issue 34 §3): a reward classifier and an evaluation oracle.

    python pipelines/dhs_oracles.py --scale cpu --threads 1     # the real table: ~20 CPU-min on one core
    python pipelines/dhs_oracles.py --scale tiny                # the 300-row test fixture, seconds

Needs the DHS table in dnadiff's cache (`dnadiff data dhs` once; $DNADIFF_CACHE moves the cache); --scale
tiny builds a temporary cache from tests/data/dhs/dhs_fixture.txt instead.

- reward classifier (configs/finetune/finetune_dhs_oracle_reward.yaml): Caduceus-PH d32 x 2 trained on half_a of
  the training split (dnadiff/data/dhs.py HALVES: by the sha256 of the sequence). `--reward
  classifier:runs/dhs_oracles/reward_classifier --target HepG2` is what design, guidance and
  design-finetune may use.
- evaluation oracle (configs/finetune/finetune_dhs_oracle_eval.yaml): a k-mer logistic regression (k = 3-6
  frequencies of both strands; dnadiff/classifier_tuning/kmer_lr.py, saved by dnadiff/eval/kmer_oracle.py), another
  kind of model, trained on half_b. Its classifier.json says role: evaluation, which `--reward classifier:DIR`
  refuses; dnadiff.eval.oracle.score_fasta scores generated FASTA files with it.
- neural evaluation oracle (issue 46; --roles neural): a one-hot convolutional network with dilated residual
  blocks, both strands' logits averaged (dnadiff/eval/conv_judge.py), trained on half_b, the epoch of lowest
  validation-split (chr2) loss kept, saved as OUT/neural_oracle with role: evaluation (refused as a reward
  like the k-mer LR); a judge that reads motif grammar where the k-mer LR reads k-mer frequencies. Capped in
  CPU seconds (cpu scale: 15 CPU-min) and wall seconds (50 min).
--roles picks the oracles trained; an oracle of an earlier run already in OUT (reward_classifier, eval_oracle)
is scored too, for the test-split agreement of every pair.

Model choice: for each oracle, every learning rate of its config's lr_grid (every C of a k-mer LR's
model.overrides.c_grid) is one `dnadiff finetune` run on `dhs:HALF:valid` (a neural run keeps its best epoch
on a 10% hold-out of the half; the run's scores are on the validation split, chr2); the value with the
highest validation-split accuracy is chosen, and only that
classifier is scored on the test split (chr1), once. Reported: 4-way accuracy and per-cell-type accuracy
(recall) on validation and test, the confusion matrix, the agreement of the two oracles on test, wall and
CPU time, the machine's load. Writes OUT/{reward_classifier,eval_oracle}/ and results/dhs_oracles.{md,json}
(--scale tiny: OUT/dhs_oracles.{md,json}).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import common
import numpy as np

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "data" / "dhs" / "dhs_fixture.txt"
# (role, shipped finetune config, training half, output folder name)
ORACLES = (("reward", "finetune/finetune_dhs_oracle_reward", "half_a", "reward_classifier"),
           ("evaluation", "finetune/finetune_dhs_oracle_eval", "half_b", "eval_oracle"))
# the neural evaluation oracle (issue 46): a one-hot convolutional judge (dnadiff/eval/conv_judge.py), not a
# `dnadiff finetune` run; (role, training half, output folder name)
NEURAL = ("evaluation", "half_b", "neural_oracle")
ROLES = ("reward", "evaluation", "neural")  # --roles: the key of each oracle in the results
SCALES = {
    "cpu": {"out": "runs/dhs_oracles", "results": "results/dhs_oracles", "overrides": [],
            "neural": {"config": {"channels": 64, "blocks": 3}, "epochs": 40, "patience": 5, "lr": 2e-3,
                       "batch_size": 64, "cpu_limit_s": 15 * 60, "time_limit_s": 50 * 60}},
    "tiny": {"out": "runs/dhs_oracles_tiny", "results": None,
             "overrides": ["train.epochs=1", "train.max_steps_per_epoch=2", "train.batch_size=16"],
             "neural": {"config": {"channels": 8, "blocks": 1}, "epochs": 2, "patience": 1, "lr": 2e-3,
                        "batch_size": 16, "cpu_limit_s": None, "time_limit_s": None}},
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", choices=sorted(SCALES), default="cpu")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of every run (default 1)")
    p.add_argument("--out", default=None, help="output folder (default: runs/dhs_oracles[_tiny])")
    p.add_argument("--results", default=None,
                   help="results path without extension (default: results/dhs_oracles; tiny: OUT/dhs_oracles)")
    p.add_argument("--roles", default=",".join(ROLES),
                   help="comma-separated oracles to train and score: reward (the Caduceus reward classifier), "
                   "evaluation (the k-mer LR), neural (the convolutional evaluation oracle); default all")
    p.add_argument("--seed", type=int, default=0, help="seed of the neural oracle's initialisation and batches")
    p.add_argument("--resume", action="store_true",
                   help="reuse the finetune runs recorded in OUT with the same config (dnadiff finetune --resume); "
                   "without it they are replaced (--overwrite)")
    return p.parse_args(argv)


def _tiny_cache(out: Path) -> Path:
    """A dnadiff cache holding the fixture as the DHS store (its own sha256, not the real table's)."""
    import hashlib

    from dnadiff.data import parse_dhs_table, store_dhs

    cache = Path(tempfile.mkdtemp(prefix="cache_", dir=out))
    data = FIXTURE.read_bytes()
    store_dhs(parse_dhs_table(data, str(FIXTURE), hashlib.sha256(data).hexdigest()), cache / "dhs")
    return cache


def _copy_dir(src: Path, dst: Path) -> None:
    tmp = dst.parent / f".{dst.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)


def train_oracle(role: str, config: str, half: str, folder: str, out: Path, overrides: list[str], threads: int,
                 log, resume: bool = False) -> dict:
    """One `dnadiff finetune` run per lr of the config's grid on dhs:HALF:valid; the lr with the best
    validation-split accuracy is kept as OUT/folder."""
    import json

    from dnadiff.classifier_tuning import kmer_options, load_finetune_config
    from dnadiff.cli import main as dnadiff_main

    cfg = load_finetune_config(config, overrides)
    kmer = cfg.model.backbone == "kmer_lr"  # the k-mer LR: its C takes the lr's place (one run per C)
    values = kmer_options(dict(cfg.model.overrides))["c_grid"] if kmer else cfg.train.learning_rates()
    runs = []
    for lr in values:
        run_dir = out / role / (f"C{lr:g}" if kmer else f"lr{lr:g}")
        setting = f"model.overrides.c_grid=[{lr:g}]" if kmer else f"train.lr={lr:g}"
        argv = ["finetune", config, f"data.dataset=dhs:{half}:valid", setting, f"train.threads={threads}",
                *overrides, "--out", str(run_dir), "--no-progress", "-q",
                "--resume" if resume else "--overwrite"]
        w0, c0 = time.time(), time.process_time()
        code = dnadiff_main(argv)
        if code != 0:
            raise SystemExit(f"error: `dnadiff {' '.join(argv)}` exited with {code}")
        res = json.loads((run_dir / "results.json").read_text())
        run = res["runs"][0]
        runs.append({"lr": lr, "command": "dnadiff " + " ".join(argv), "valid_split_accuracy": run["test"]["accuracy"],
                     "holdout_accuracy": run["val_acc"], "best_epoch": run["best_epoch"],
                     "wall_s": round(time.time() - w0, 1), "cpu_s": round(time.process_time() - c0, 1),
                     "num_train": res["num_train"], "num_parameters": res["num_parameters"], "dir": str(run_dir)})
        log(f"{role}: {'C' if kmer else 'lr'} {lr:g}: validation (chr2) accuracy "
            f"{runs[-1]['valid_split_accuracy']:.4f}, "
            f"best epoch {run['best_epoch']}, {runs[-1]['wall_s']:.0f} s wall, {runs[-1]['cpu_s']:.0f} s CPU")
    best = max(runs, key=lambda r: (r["valid_split_accuracy"], -runs.index(r)))  # ties: first in the grid
    _copy_dir(Path(best["dir"]) / "classifier", out / folder)
    if kmer:
        opts = kmer_options(dict(cfg.model.overrides))
        ks = opts["ks"]
        kind = {"preset": f"k {ks[0]}-{ks[-1]}" if ks == list(range(ks[0], ks[-1] + 1)) else f"k {ks}",
                "conjoin": "both strands counted" if opts["both_strands"] else None, "epochs": None,
                "batch_size": None, "kmer_options": opts}
    else:
        kind = {"preset": cfg.model.preset, "conjoin": cfg.model.conjoin, "epochs": cfg.train.epochs,
                "batch_size": cfg.train.batch_size}
    return {"role": role, "config": config, "half": half, "backbone": cfg.model.backbone, **kind,
            "hyperparameter": "C" if kmer else "lr", "lr_grid": values, "runs": runs, "chosen_lr": best["lr"],
            "num_parameters": best["num_parameters"], "num_train": best["num_train"], "dir": str(out / folder)}


def train_neural_oracle(table, out: Path, settings: dict, seed: int, log) -> dict:
    """The neural evaluation oracle: a ConvJudge (both strands averaged) trained on half_b, early-stopped on the
    validation split (chr2) loss, saved as OUT/neural_oracle with role: evaluation."""
    from dnadiff.data import CELL_TYPES, train_half
    from dnadiff.eval import ConvJudge, ConvJudgeConfig, fit_judge, save_judge

    role, half, folder = NEURAL
    seqs, labels = table.sequences(None), table.labels.astype(np.int64)
    rows, valid = train_half(table, half), table.indices("valid")
    model = ConvJudge(len(CELL_TYPES), ConvJudgeConfig(**settings["config"]), CELL_TYPES)
    w0, c0 = time.time(), time.process_time()

    def progress(epoch, train_loss, valid_loss, valid_acc):
        log(f"neural: epoch {epoch}: train loss {train_loss:.4f}, chr2 loss {valid_loss:.4f}, "
            f"chr2 accuracy {valid_acc:.4f} ({time.time() - w0:.0f} s)")

    fit = fit_judge(model, [seqs[i] for i in rows], labels[rows], [seqs[i] for i in valid], labels[valid],
                    epochs=settings["epochs"], patience=settings["patience"], lr=settings["lr"],
                    batch_size=settings["batch_size"], seed=seed, progress=progress,
                    time_limit_s=settings["time_limit_s"], cpu_limit_s=settings["cpu_limit_s"])
    save_judge(out / folder, model, {"role": role, "half": half, "seed": seed,
                                     "early_stopping": "validation split (chr2) loss", "best_epoch": fit["best_epoch"]})
    cfg = settings["config"]
    run = {"lr": settings["lr"], "command": None, "valid_split_accuracy": fit["valid_accuracy"],
           "holdout_accuracy": fit["valid_accuracy"], "best_epoch": fit["best_epoch"],
           "epochs_run": fit["epochs_run"], "wall_s": round(time.time() - w0, 1),
           "cpu_s": round(time.process_time() - c0, 1), "num_train": int(len(rows)),
           "num_parameters": int(sum(p.numel() for p in model.parameters())), "dir": str(out / folder)}
    return {"role": role, "config": "dnadiff/eval/conv_judge.py ConvJudge", "half": half, "backbone": "conv_judge",
            "preset": f"c{cfg['channels']} x{cfg['blocks']}", "conjoin": "strand-averaged logits",
            "epochs": settings["epochs"], "batch_size": settings["batch_size"], "hyperparameter": "lr",
            "lr_grid": [settings["lr"]], "runs": [run], "chosen_lr": settings["lr"],
            "num_parameters": run["num_parameters"], "num_train": run["num_train"], "dir": str(out / folder),
            "history": fit["history"]}


def score_split(model, table, split: str, classes) -> tuple[dict, np.ndarray]:
    from dnadiff.eval import accuracy_table, predict_proba
    from dnadiff.tokenizers import DNATokenizer

    rows = table.indices(split)
    tok = DNATokenizer()
    probs = predict_proba(model, [tok.decode(table.tokens[i]) for i in rows])
    return accuracy_table(probs, table.labels[rows].astype(np.int64), classes), probs


def run(args: argparse.Namespace, command: str) -> dict:
    from dnadiff.data import CELL_TYPES, HALVES, load_dhs, train_half
    from dnadiff.errors import DnadiffError
    from dnadiff.eval import load_oracle
    from dnadiff.guidance import build_reward
    from dnadiff.machine import describe_machine, load_average
    from dnadiff.threads import apply_threads
    from dnadiff.utils import atomic_write, portable_paths, write_json

    scale = SCALES[args.scale]
    out = Path(args.out or scale["out"])
    out.mkdir(parents=True, exist_ok=True)
    results = Path(args.results) if args.results else (Path(scale["results"]) if scale["results"]
                                                       else out / "dhs_oracles")
    if args.scale == "tiny":
        os.environ["DNADIFF_CACHE"] = str(_tiny_cache(out))
    apply_threads(args.threads)
    load_before = load_average()
    w0, c0 = time.time(), time.process_time()
    table = load_dhs()
    halves = {h: train_half(table, h) for h in HALVES}
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    if not roles or any(r not in ROLES for r in roles):
        raise DnadiffError(f"--roles {args.roles!r}: give a comma-separated subset of {', '.join(ROLES)}")
    oracles = {}
    for role, config, half, folder in ORACLES:
        if role in roles:
            oracles[role] = train_oracle(role, config, half, folder, out, scale["overrides"], args.threads, print,
                                         args.resume)
    if "neural" in roles:
        oracles["neural"] = train_neural_oracle(table, out, scale["neural"], args.seed, print)
    kept = {}  # oracles of an earlier run in OUT that this run did not train: scored for the agreement too
    for role, config, half, folder in ORACLES:
        if role not in oracles and (out / folder / "classifier.json").is_file():
            meta = json.loads((out / folder / "classifier.json").read_text())
            kept[role] = oracles[role] = {
                "role": role, "config": config, "half": half, "dir": str(out / folder), "kept_from_earlier_run": True,
                "backbone": meta.get("backbone"), "preset": meta.get("preset") or (f"k {meta['ks'][0]}-{meta['ks'][-1]}"
                                                                                  if meta.get("ks") else ""),
                "hyperparameter": "C" if "C" in meta else "lr", "chosen_lr": float(meta.get("C", meta.get("lr", 0))),
                "num_parameters": meta.get("num_parameters", "?"), "num_train": "?", "runs": []}
    test_preds = {}
    for role, o in oracles.items():  # the chosen classifiers: validation, then the test split read once
        model, meta = load_oracle(o["dir"])
        classes = [str(c) for c in meta["classes"]]
        assert len(classes) == len(CELL_TYPES), classes
        classes = list(CELL_TYPES)  # the same order; an older oracle may spell hESC as hESCT0
        o["valid"], _ = score_split(model, table, "valid", classes)
        o["test"], probs = score_split(model, table, "test", classes)
        o["role_recorded"] = meta.get("role")
        test_preds[role] = probs.argmax(axis=1)
        print(f"{role}: test accuracy {o['test']['accuracy']:.4f} "
              f"({', '.join(f'{c} {v:.3f}' for c, v in o['test']['per_class'].items())})")
    refusals = {}
    for role in ("evaluation", "neural"):  # the guard: what guides and fine-tunes cannot read an evaluation oracle
        if role not in oracles:
            continue
        try:
            build_reward(f"classifier:{oracles[role]['dir']}", target="HepG2")
        except DnadiffError as exc:
            refusals[role] = str(exc)
        else:
            raise SystemExit(f"error: --reward classifier: accepted the {role} oracle")
    pairs = {f"{a}_vs_{b}": float((test_preds[a] == test_preds[b]).mean())
             for i, a in enumerate(oracles) for b in list(oracles)[i + 1:]}
    wall, cpu = time.time() - w0, time.process_time() - c0
    result = {
        "scale": args.scale, "command": command, "threads": args.threads,
        "data": {"source": ("tests/data/dhs/dhs_fixture.txt (300-row fixture)" if args.scale == "tiny"
                            else "dnadiff cache ($DNADIFF_CACHE/dhs, written by `dnadiff data dhs`)"),
                 "sha256": table.sha256, "counts": table.counts(),
                 "halves": {h: {"rows": int(len(r)), **{c: int((table.labels[r] == k).sum())
                                                        for k, c in enumerate(CELL_TYPES)}}
                            for h, r in halves.items()},
                 "halves_rule": "half_a: first byte of sha256(sequence) even; half_b: odd (dnadiff/data/dhs.py)"},
        "oracles": oracles,
        "test_agreement": pairs.get("reward_vs_evaluation"), "test_agreement_pairs": pairs,
        "evaluation_oracle_refused_as_reward": refusals.get("evaluation"),
        "neural_oracle_refused_as_reward": refusals.get("neural"),
        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load_before": load_before, "load_after": load_average(),
        "machine": describe_machine(),
    }
    result = portable_paths(result)
    write_json(results.with_suffix(".json"), result)
    atomic_write(results.with_suffix(".md"), markdown(result))
    print(f"wrote {results.with_suffix('.md')} ({wall:.0f} s wall, {cpu:.0f} s CPU)")
    return result


def markdown(r: dict) -> str:
    from dnadiff.data import CELL_TYPES
    from dnadiff.utils import markdown_table

    kinds = {"caduceus": "Caduceus-PH (bidirectional Mamba, both strands)",
             "hyena": "Hyena (implicit long convolutions, both strands)",
             "dit": "DiT transformer (attention, both strands)",
             "kmer_lr": "k-mer logistic regression (k-mer frequencies of both strands, scikit-learn)",
             "conv_judge": "one-hot convolutional network (dilated residual blocks, both strands' logits averaged; "
                           "dnadiff/eval/conv_judge.py)"}
    rows = []
    for role, o in r["oracles"].items():
        for split in ("valid", "test"):
            t = o[split]
            rows.append({"oracle": role, "model": f"{o['backbone']} {o['preset']}", "params": o["num_parameters"],
                         "trained on": f"{o['half']} ({o['num_train']}"
                                       + (")" if role == "neural" else " + 10% hold-out)"),
                         "lr / C": f"{o.get('hyperparameter', 'lr')} {o['chosen_lr']:g}",
                         "split": {"valid": "validation (chr2)", "test": "test (chr1)"}[split],
                         "accuracy": f"{t['accuracy']:.4f}",
                         **{c: f"{v:.3f}" for c, v in zip(CELL_TYPES, t["per_class"].values())}})
    lr_rows = [{"oracle": role, "lr / C": f"{o.get('hyperparameter', 'lr')} {x['lr']:g}", "best epoch": x["best_epoch"],
                "hold-out acc": f"{x['holdout_accuracy']:.4f}", "validation acc": f"{x['valid_split_accuracy']:.4f}",
                "wall s": x["wall_s"], "CPU s": x["cpu_s"],
                "command": f"`{x['command']}`" if x["command"] else "(in this pipeline)"}
               for role, o in r["oracles"].items() for x in o["runs"]]
    conf = []
    for role, o in r["oracles"].items():
        for k, c in enumerate(CELL_TYPES):
            conf.append({"oracle": role, "true \\ predicted": c,
                         **{c2: o["test"]["confusion"][k][k2] for k2, c2 in enumerate(CELL_TYPES)}})
    bullets = []
    for role, o in r["oracles"].items():
        kind = kinds.get(o["backbone"], o["backbone"])
        if role == "reward":
            bullets.append(f"- **reward classifier** ({o['dir']}): {kind}, trained on {o['half']}; guidance and "
                           f"fine-tuning read it as `--reward classifier:{o['dir']} --target HepG2`.")
        else:
            refused = r.get(f"{role if role == 'neural' else 'evaluation'}_oracle_refused_as_reward")
            bullets.append(f"- **{'neural ' if role == 'neural' else ''}evaluation oracle** ({o['dir']}): {kind}, "
                           f"trained on {o['half']}; classifier.json role `{o['role_recorded']}`: `--reward "
                           f"classifier:` refuses it (`{refused}`); score generated FASTA files with "
                           "`dnadiff.eval.oracle.score_fasta`.")
    agree = "; ".join(f"{k.replace('_vs_', ' and ')} agree on {v:.1%}"
                      for k, v in (r.get("test_agreement_pairs") or {}).items())
    lines = [
        f"# DHS oracles (issue 34 §3, the DRAKES protocol): scale {r['scale']}",
        "",
        f"`{r['command']}`  ",
        f"{r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU ({r['threads']} thread); {r['machine']}; "
        f"before: {r['load_before']}; after: {r['load_after']}.",
        "",
        f"Data: {r['data']['source']}, sha256 `{r['data']['sha256'][:16]}…`. Training split halves "
        f"({r['data']['halves_rule']}): half_a {r['data']['halves']['half_a']['rows']} rows, "
        f"half_b {r['data']['halves']['half_b']['rows']} rows, no sequence in both.",
        "",
        *bullets,
        "",
        "Accuracy (4-way) and per-cell-type accuracy (recall) of the chosen classifiers; the test split is read "
        "once, after the lr (C) was chosen on the validation split. The test row is the ceiling for generated "
        f"sequences. Test-split agreement (same argmax): {agree or 'one oracle only'}.",
        "",
        markdown_table(rows),
        "",
        "Runs (one per lr, or per C of a k-mer LR; a finetune run keeps its best epoch on a 10% hold-out of the "
        "half, a k-mer LR is fitted on the other 90%; the lr or C kept is the best on chr2; the neural oracle "
        "trains on all of half_b and keeps the epoch of lowest chr2 loss, so its validation figure is not "
        "held out):",
        "",
        markdown_table(lr_rows),
        "",
        "Test confusion matrices (rows: true cell type, columns: predicted):",
        "",
        markdown_table(conf),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return common.main_plain(run, parse_args(argv), __file__, argv)


if __name__ == "__main__":
    sys.exit(main())
