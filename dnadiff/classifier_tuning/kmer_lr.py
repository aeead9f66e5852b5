"""k-mer-count logistic regression: the classical baseline of the Genomic Benchmarks table (tab. 7).

    dnadiff finetune finetune/finetune_base model.backbone=kmer_lr          # same protocol as the heads
    dnadiff finetune ... model.backbone=kmer_lr model.overrides.ks=[3,4,5,6] model.overrides.c_grid=[0.01,0.1,1]

Features: for every k in `ks` (default 3..6) the k-mer frequencies of the sequence, counted on
both strands (the sequence and its reverse complement) by default, k-mers containing a non-A/C/G/T
letter skipped, each k's block normalised to sum 1 (sequences of different lengths compare);
scaled to unit variance on the run's training part (scikit-learn StandardScaler without centring,
the features stay sparse). Classifier: scikit-learn LogisticRegression (L2, lbfgs) with inverse
regularisation C from `c_grid`, chosen like the neural heads' learning rate: the C with the
highest mean validation accuracy over the runs (test scores never enter the choice).
Protocol: exactly `dnadiff finetune`'s (protocol.py): the same stratified subsamples
(data.max_train / max_test), the same runs (protocol.seeds x 90/10 split, or k-fold), data.max_len
truncation, test metrics from dnadiff.eval.classification, summaries as mean ± spread from its
`summarize`. Like the neural rows, a run keeps OUT/classifier: the chosen C's best-validation fit as a
k-mer LR classifier directory (dnadiff/eval/kmer_oracle.py; classifier.json carries model.role), which
dnadiff.eval.oracle.load_oracle scores with and `--reward classifier:` refuses (no gradient to guide with).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from dnadiff.classifier_tuning.kmer_settings import DEFAULTS, kmer_options  # noqa: F401  (re-exported)
from dnadiff.classifier_tuning.protocol import protocol_data, protocol_runs, results_markdown, select_on_validation
from dnadiff.config import save_config, to_dict
from dnadiff.errors import DnadiffError
from dnadiff.eval.kmer_oracle import KmerLRClassifier, kmer_features, save_kmer_classifier  # noqa: F401  (re-exported)
from dnadiff.machine import describe_machine


def fit_predict(x_train, y_train, x_eval: list, c: float, max_iter: int, seed: int, fitted: list | None = None
                ) -> list[np.ndarray]:
    """Scale on the train part, fit L2 logistic regression, return class probabilities of each eval set
    (`fitted`: a list the fitted scikit-learn pipeline is appended to)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(with_mean=False), LogisticRegression(C=c, max_iter=max_iter, random_state=seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter reached: recorded by n_iter_, still a valid fit
        clf.fit(x_train, y_train)
    if fitted is not None:
        fitted.append(clf)
    return [clf.predict_proba(x) for x in x_eval]


def _truncate(seqs: list[str], max_len: int | None) -> list[str]:
    return [s[:max_len] for s in seqs] if max_len else list(seqs)


def run_kmer_lr(cfg, out_dir: str | os.PathLike | None = None, echo=print) -> dict[str, Any]:
    """The k-mer LR row of tab. 7 under `dnadiff finetune`'s protocol; writes config.yaml, results.json/.md."""
    from dnadiff.eval.classification import classification_metrics
    from dnadiff.utils import atomic_write, write_json  # local: tests monkeypatch dnadiff.utils.atomic_write

    t0 = time.time()
    if cfg.model.init_from:
        raise DnadiffError("model.init_from: the k-mer LR baseline has no pretrained weights; leave it empty")
    opts = kmer_options(dict(cfg.model.overrides))
    out = Path(out_dir or os.path.join(cfg.out_dir, cfg.name))
    root, _, train_all, test_all, train_keep, test_keep = protocol_data(cfg)  # the neural rows' data
    train_labels = np.asarray(train_all.labels)[train_keep]
    test_labels = np.asarray(test_all.labels)[test_keep]
    num_classes = len(train_all.classes)
    x_train = kmer_features(_truncate([train_all.sequences[i] for i in train_keep], cfg.data.max_len),
                            opts["ks"], opts["both_strands"])
    x_test = kmer_features(_truncate([test_all.sequences[i] for i in test_keep], cfg.data.max_len),
                           opts["ks"], opts["both_strands"])
    runs = protocol_runs(cfg, train_labels)
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out / "config.yaml")
    echo(f"{root.name}: {len(train_keep)} train / {len(test_keep)} test, classes {train_all.classes}; k-mer LR "
         f"(k = {opts['ks']}, {x_train.shape[1]} features), {cfg.protocol.name} protocol, {len(runs)} runs x "
         f"{len(opts['c_grid'])} C")

    grid: dict[float, list[dict]] = {c: [] for c in opts["c_grid"]}
    best: dict[float, tuple[float, Any, str]] = {}  # C -> (val acc, pipeline) of its best run (ties: the earlier)
    for name, seed, tr, va in runs:
        for c in opts["c_grid"]:
            t1 = time.time()
            fitted: list = []
            p_val, p_test = fit_predict(x_train[tr], train_labels[tr], [x_train[va], x_test], c, opts["max_iter"], seed,
                                        fitted)
            val_acc = float((p_val.argmax(axis=1) == train_labels[va]).mean())
            test = classification_metrics(test_labels, p_test, num_classes, probs=True)
            grid[c].append({"run": name, "seed": seed, "lr": c, "C": c, "best_epoch": 0, "val_acc": val_acc,
                            "test": test, "num_train": int(len(tr)), "num_valid": int(len(va)), "steps": 0,
                            "wall_s": round(time.time() - t1, 2),
                            "test_correct": (p_test.argmax(axis=1) == test_labels).astype(int).tolist()})
            if c not in best or val_acc > best[c][0]:
                best[c] = (val_acc, fitted[0], name)
            echo(f"  C {c:g} {name}: val acc {val_acc:.4f}, test acc {test['accuracy']:.4f}, mcc {test['mcc']:.4f}")
    selection = select_on_validation(grid, opts["c_grid"])  # C chosen as the heads' lr (ties: first in the grid)
    coef = x_train.shape[1] * (1 if num_classes == 2 else num_classes) + (1 if num_classes == 2 else num_classes)
    result = {
        "name": cfg.name, "dataset": str(root), "classes": train_all.classes,
        "num_train": int(len(train_keep)), "num_test": int(len(test_keep)),
        "majority_baseline": float(max(np.bincount(test_labels)) / len(test_labels)),
        "train_class_counts": train_all.counts(), "protocol": cfg.protocol.name, "init_from": None,
        "backbone": "kmer_lr", "kmer_options": opts, "num_parameters": int(coef),
        **selection,  # lr_grid, val_acc_by_lr, selected_lr, runs, summary: the `lr` keys hold C
        "hyperparameter": "C (inverse L2 strength; the `lr` fields hold C)", "selected_C": selection["selected_lr"],
        "wall_s": round(time.time() - t0, 1), "machine": describe_machine(), "config": to_dict(cfg),
    }
    chosen = selection["selected_lr"]
    if chosen in best:  # the chosen C's best-validation run as a classifier directory, as the neural rows keep
        val_acc, pipeline, run_name = best[chosen]
        save_classifier(out, pipeline, opts, train_all.classes,
                        {"run": run_name, "val_acc": val_acc, "C": chosen, "dataset": str(root),
                         "max_len": cfg.data.max_len, **({"role": cfg.model.role} if cfg.model.role else {})})
        result["classifier_dir"] = "classifier"  # relative to the output folder
    write_json(out / "results.json", result)
    atomic_write(out / "results.md", results_markdown(result) + "\n")
    return result


def save_classifier(out: Path, pipeline, opts: dict, classes, info: dict) -> None:
    """OUT/classifier: the fitted pipeline as a k-mer LR classifier directory (eval/kmer_oracle.py), written
    under a temporary name and renamed (a reader never sees half a directory)."""
    import shutil

    lr = pipeline[-1]
    if list(lr.classes_) != list(range(len(classes))):  # a class absent from the training part: no C-way model
        raise DnadiffError(f"k-mer LR: the training part holds the classes {list(lr.classes_)} of "
                           f"{len(classes)}; cannot save a {len(classes)}-way classifier")
    tmp = out / ".classifier.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    save_kmer_classifier(tmp, KmerLRClassifier(pipeline, opts["ks"], opts["both_strands"], classes), info)
    shutil.rmtree(out / "classifier", ignore_errors=True)
    os.replace(tmp, out / "classifier")
