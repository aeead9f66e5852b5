"""`dnadiff finetune`: the protocol's runs over the learning-rate grid, restart-safe, and the results.

For each learning rate (`train.lr`, or each of `train.lr_grid`) and each run of the protocol
(protocol.py: seeds or folds), one classifier is trained from the same backbone template by
dnadiff.training.classifier_loop.fit_classifier (the Lightning part, imported only when a neural row trains);
the learning rate is chosen per model by mean best validation accuracy over the runs (test scores
never enter the choice). A `kmer_lr` backbone runs the k-mer LR baseline (kmer_lr.py) instead.
"""

from __future__ import annotations

import copy
import functools
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Subset

from dnadiff.backbones import BACKBONES, build_backbone, build_backbone_from_config
from dnadiff.checkpoint import official_kind
from dnadiff.classifier_tuning.config import FinetuneConfig
from dnadiff.classifier_tuning.kmer_lr import run_kmer_lr
from dnadiff.classifier_tuning.protocol import protocol_data, protocol_runs, results_markdown, select_on_validation
from dnadiff.config import replace, save_config, to_dict
from dnadiff.data.benchmarks import SequenceClassificationDataset, pad_batch
from dnadiff.errors import DnadiffError
from dnadiff.heads.classifier import SequenceClassifier
from dnadiff.heads.saved import save_classifier_dir
from dnadiff.machine import describe_machine
from dnadiff.modelio import read_backbone_noted, resolve
from dnadiff.threads import apply_threads

# ----------------------------------------------------------------------------- model


def build_backbone_template(cfg: FinetuneConfig):
    """The backbone every run starts from: loaded from `model.init_from`, or a fresh scratch one."""
    return load_backbone_template(cfg)[0]


def load_backbone_template(cfg: FinetuneConfig):
    """(the template backbone, a note naming what init_from's model held that a classifier drops: Plaid's
    embeddings and schedule, modelio.read_backbone_noted; "" for nothing or a scratch backbone)."""
    m = cfg.model
    if m.init_from:
        if not os.path.exists(m.init_from):
            raise DnadiffError(f"model.init_from: {m.init_from}: no such model directory")
        _, backbone, note = read_backbone_noted(resolve(m.init_from))
        return backbone, note
    import dataclasses


    overrides = dict(m.overrides)
    if set(overrides) >= {f.name for f in dataclasses.fields(BACKBONES.get(m.backbone).Config)}:
        return build_backbone_from_config(m.backbone, overrides), ""  # a full saved config: the preset is moot
    overrides.setdefault("vocab_size", 12)
    return build_backbone(m.backbone, preset=m.preset, **overrides), ""


def record_init_from(cfg: FinetuneConfig, template, dropped: str = "") -> tuple[FinetuneConfig, str | None]:
    """With `model.init_from`: the config naming the backbone actually loaded (registry name and its
    full config: the preset and the config file's backbone are moot) and a line saying what was
    loaded (and `dropped`, what of the model was left out), for the console. Without it: (cfg, None)."""
    import dataclasses


    path = cfg.model.init_from
    if not path:
        return cfg, None
    name = BACKBONES.name_of(template)
    cfg = replace(cfg, **{"model.backbone": name, "model.overrides": dataclasses.asdict(template.config)})
    kind = {"caduceus": "official Caduceus directory", "hyena": "official HyenaDNA directory"}.get(
        official_kind(path) or "", "dnadiff model directory")
    n = sum(p.numel() for p in template.parameters())
    return cfg, (f"model.init_from: loaded {name} backbone ({n:,} parameters) from {kind} {path}"
                 + (f"; {dropped}" if dropped else ""))


def classifier_factory(cfg: FinetuneConfig, template, num_classes: int):
    """A zero-argument function that builds a fresh classifier (deep copy of the template backbone).

    A scratch backbone is re-initialised per run from the run's seed; a pretrained one is copied.
    """
    m = cfg.model

    def make():
        backbone = copy.deepcopy(template) if m.init_from else build_backbone_template(cfg)
        return SequenceClassifier(backbone, num_classes, pooling=m.pooling, conjoin=m.conjoin, rc_aug=m.rc_aug,
                                  dropout=m.dropout, freeze_backbone=m.freeze_backbone,
                                  conjoin_train=m.conjoin_train).train()

    return make


# ----------------------------------------------------------------------------- runner


def run_finetune(cfg: FinetuneConfig, out_dir: str | os.PathLike | None = None, echo=print,
                 resume: bool = False) -> dict[str, Any]:
    """Run the protocol over the lr grid; write config.yaml, results.json, results.md under out_dir.

    Restart-safe: each finished run is recorded atomically in out_dir/runs/; with `resume=True`
    the recorded runs of the same config are reused and only the missing ones are trained (a run
    is a pure function of the config, lr and seed, so the results equal an uninterrupted job's).
    """
    if cfg.model.backbone == "kmer_lr":  # the classical baseline, scikit-learn (kmer_lr.py)

        return run_kmer_lr(cfg, out_dir, echo)
    from dnadiff.training.rundir import launch_rank
    from dnadiff.training.watchdog import watch_launcher

    watch = watch_launcher(launch_rank())  # a DDP worker whose launcher is killed stops at once, in one line
    try:
        result = _run_with_threads(cfg, out_dir, echo, resume)
    except BaseException:
        if watch is not None and watch.orphaned():  # a collective failed because the launcher died
            watch.stop()
        raise
    if watch is not None:
        watch.close()
    return result


def _run_with_threads(cfg: FinetuneConfig, out_dir, echo, resume: bool) -> dict[str, Any]:
    from dnadiff.training.run import resolve_threads

    # null: the free physical cores, shared among the node's processes (as `dnadiff train`); only
    # applied, not recorded in cfg (the config's fingerprint, which resume compares, stays as it was)
    threads = apply_threads(resolve_threads(cfg).train.threads)
    try:
        return _run_finetune(cfg, out_dir, echo, resume)
    finally:
        apply_threads(threads)


RUNS_DIR = "runs"  # out_dir/runs/lr{lr}/{run}.json: one finished run (restart-safe resume)
# out_dir/best_classifiers/lr{lr}/: that lr's best run so far (copied to out_dir/classifier)
BEST_DIR = "best_classifiers"


def _config_fingerprint(cfg: FinetuneConfig) -> str:
    import hashlib
    import json

    d = to_dict(cfg)
    d["train"].pop("progress", None)  # display only
    if d["model"].get("role") is None:  # unmarked: the fingerprint of runs recorded before the key existed
        d["model"].pop("role", None)
    init = getattr(cfg.model, "init_from", None)
    if init:  # the pretrained weights themselves, not just their path: retraining them invalidates runs
        for name in ("model.safetensors", "pytorch_model.bin"):
            f = Path(init) / name
            if f.is_file():
                h = hashlib.sha256()
                with open(f, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        h.update(block)
                d["init_weights_sha256"] = h.hexdigest()
                break
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _cached_run(path: Path, fingerprint: str):
    """The RunResult recorded at `path` for this config, or None (absent, other config, unreadable)."""
    import json

    from dnadiff.training.classifier_loop import RunResult  # Lightning: only for a neural row

    try:
        data = json.loads(path.read_text())
        if data.get("fingerprint") != fingerprint:
            return None
        return RunResult(**data["result"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _run_finetune(cfg: FinetuneConfig, out_dir, echo, resume: bool = False) -> dict[str, Any]:
    from dnadiff.training.classifier_loop import fit_classifier  # Lightning: only for a neural row
    from dnadiff.utils import atomic_write, write_json  # local: tests monkeypatch dnadiff.utils.atomic_write

    t0 = time.time()
    out = Path(out_dir or os.path.join(cfg.out_dir, cfg.name))
    root, tok, train_all, test_all, train_keep, test_keep = protocol_data(cfg)
    train_ds = SequenceClassificationDataset(train_all, tok, cfg.data.max_len)
    test_ds = Subset(SequenceClassificationDataset(test_all, tok, cfg.data.max_len), test_keep.tolist())
    train_labels = np.asarray(train_all.labels)[train_keep]
    collate = functools.partial(pad_batch, pad_id=tok.pad_id)
    num_classes = len(train_all.classes)

    template, dropped = load_backbone_template(cfg)
    cfg, loaded = record_init_from(cfg, template, dropped)
    if loaded:
        echo(loaded)
    limit = getattr(getattr(template, "config", None), "l_max", None)  # HyenaDNA: longest input it supports
    longest = max(len(s) for s in train_all.sequences + test_all.sequences)
    longest = min(longest, cfg.data.max_len) if cfg.data.max_len else longest
    if limit and longest > limit:
        raise DnadiffError(f"sequences of up to {longest} bases exceed the backbone's l_max {limit} "
                           "(set data.max_len to truncate, or use a longer model)")
    make_fresh = classifier_factory(cfg, template, num_classes)
    made: list = []

    def make():  # remembers the last classifier built: fit_classifier leaves its best weights in it
        made.append(make_fresh())
        return made[-1]

    runs = protocol_runs(cfg, train_labels)
    # several processes (train.devices > 1): every rank runs the protocol in step (each fit is one DDP
    # fit), rank 0 alone writes files and prints; the other ranks' runs are the same runs
    from dnadiff.training.rundir import launch_rank

    writer = launch_rank() == 0
    if not writer:
        echo = _silent
    # the output folder is touched only once the data and the model are known to be good
    fingerprint = _config_fingerprint(cfg)
    if writer:
        out.mkdir(parents=True, exist_ok=True)
        for stale in [*out.glob(".*.tmp"), *out.glob(f"{RUNS_DIR}/*/.*.tmp")]:  # half-written files of a killed job
            stale.unlink(missing_ok=True)
        if not resume:
            import shutil

            for folder in (RUNS_DIR, BEST_DIR):  # a fresh job never reuses earlier runs
                if (out / folder).is_dir():
                    shutil.rmtree(out / folder)
        save_config(cfg, out / "config.yaml")
    echo(f"{root.name}: {len(train_keep)} train / {len(test_keep)} test, classes {train_all.classes}; "
         f"{cfg.protocol.name} protocol, {len(runs)} runs x {len(cfg.train.learning_rates())} lr")

    grid: dict[float, list] = {}
    for lr in cfg.train.learning_rates():
        grid[lr] = []
        for name, seed, tr, va in runs:
            tr_set = Subset(train_ds, train_keep[tr].tolist())
            va_set = Subset(train_ds, train_keep[va].tolist())
            record = out / RUNS_DIR / f"lr{lr:g}" / f"{name}.json"
            res = _cached_run(record, fingerprint) if resume else None
            if res is None:
                res = fit_classifier(cfg, make, tr_set, va_set, test_ds, collate, lr, seed, f"lr{lr:g}/{name}",
                                     str(out))
                if writer:  # the lr's best run so far, on disk (a resumed job finds it there)
                    keep_best_classifier(out / BEST_DIR / f"lr{lr:g}", made[-1], res, train_all.classes,
                                         {"lr": lr, "dataset": str(root), "max_len": cfg.data.max_len,
                                          "noisy": cfg.model.noisy,
                                          **({"role": cfg.model.role} if cfg.model.role else {})})
                made.clear()
                if writer:
                    write_json(record, {"fingerprint": fingerprint, "result": res.to_dict()})
            else:
                echo(f"  lr {lr:g} {name}: reused from {record}")
            grid[lr].append(res)
            echo(f"  lr {lr:g} {name}: best epoch {res.best_epoch}, val acc {res.val_acc:.4f}, "
                 f"test acc {res.test['accuracy']:.4f}, mcc {res.test['mcc']:.4f} ({res.wall_s:.0f} s)")
    # lr chosen on validation only: the highest mean best-validation accuracy (ties: first in the grid)
    selection = select_on_validation({lr: [r.to_dict() for r in rs] for lr, rs in grid.items()},
                                     cfg.train.learning_rates())
    chosen = selection["selected_lr"]
    counts = train_all.counts()
    result = {
        "name": cfg.name,
        "dataset": str(root),
        "classes": train_all.classes,
        "num_train": int(len(train_keep)),
        "num_test": int(len(test_keep)),
        "majority_baseline": float(max(np.bincount(np.asarray(test_all.labels)[test_keep])) / len(test_keep)),
        "train_class_counts": counts,
        "protocol": cfg.protocol.name,
        "init_from": cfg.model.init_from,
        "backbone": type(template).__name__,
        "num_parameters": int(sum(p.numel() for p in make_fresh().parameters())),
        **selection,  # lr_grid, val_acc_by_lr, selected_lr, runs, summary
        "wall_s": round(time.time() - t0, 1),
        "machine": describe_machine(),
        "config": to_dict(cfg),
    }
    best_dir = out / BEST_DIR / f"lr{chosen:g}"
    if writer and (best_dir / "classifier.json").is_file():
        # the best-validation run of the chosen lr, as a loadable directory (`--reward classifier:DIR`)
        import shutil

        tmp = out / ".classifier.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(best_dir, tmp)
        shutil.rmtree(out / "classifier", ignore_errors=True)
        os.replace(tmp, out / "classifier")
        result["classifier_dir"] = "classifier"  # relative to the output folder
    if writer:
        write_json(out / "results.json", result)
        atomic_write(out / "results.md", results_markdown(result) + "\n")
    return result


def keep_best_classifier(path: Path, model, res, classes, info: dict[str, Any]) -> None:
    """Save `model` (a run's best-epoch classifier) to `path` if its validation accuracy beats the
    one saved there (ties: the earlier run stays, as the lr choice's order)."""
    import json


    meta = path / "classifier.json"
    if meta.is_file() and not res.val_acc > json.loads(meta.read_text()).get("val_acc", -1.0):
        return
    save_classifier_dir(path, model, list(classes), {"run": res.run, "val_acc": res.val_acc, **info})


def _silent(*args, **kwargs) -> None:
    return None
