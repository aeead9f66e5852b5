"""Classifier two-sample test: can a classifier tell generated DNA from held-out real DNA? (issue 46)

    res = discriminator_test(samples, reference, DiscriminatorSettings(seed=0))
    res["cnn"]["auroc"], res["cnn"]["p_value"], res["cnn"]["floor_auroc"], res["kmer_lr"][...]

Lopez-Paz & Oquab, "Revisiting classifier two-sample tests", ICLR 2017 (arXiv 1610.06545), §2: label the
generated sequences 1 and as many real ones 0, train a classifier on part of them and score the rest. If the
two sets come from one distribution no classifier beats chance, so the held-out accuracy t is the test
statistic, with n_te * t ~ Binomial(n_te, 1/2) under H0; the p-value is the exact one-sided binomial tail
P(X >= correct). Here every sequence is held out once (k-fold cross-fitting: fold f is scored by a classifier
trained on the other k-1 folds, classes balanced in every fold), so n_te is all 2n sequences.

Reported per classifier:
- auroc of the pooled out-of-fold scores (0.5: indistinguishable, 1: every sample told apart), its standard
  error by Hanley & McNeil (1982, Radiology 143:29, eq. 1-3): SE^2 = [A(1-A) + (n1-1)(Q1-A^2) + (n2-1)(Q2-A^2)]
  / (n1 n2), Q1 = A/(2-A), Q2 = 2A^2/(1+A);
- accuracy (score > 1/2) and the binomial p_value above;
- floor_*: the same test on two disjoint halves of the real set (real vs real: what a perfect generator gets).
Classifiers: `cnn`, a ConvJudge (eval/conv_judge.py: one-hot, both strands' logits averaged, early-stopped on a
10% slice of the training folds) and `kmer_lr`, a logistic regression on k-mer frequencies of both strands
(k = 3..6, eval/kmer_oracle.kmer_features; its C chosen among C_GRID on the same slice). A k-mer model's
samples can match every k-mer frequency the second reads; the first reads motifs, their co-occurrence and
spacing, which is how it can fail a k-mer model.

Sequences: all are cut to one length L, the shortest sample's, keeping each one's central L bases (a
reference sequence shorter than L is an error). The real side is n sequences drawn (seeded) from the reference
and the floor's second real half n others, n = min(#samples, #reference // 2); when n < #samples, n samples
are drawn too. Seeded: the same inputs, settings and thread count give identical numbers.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Sequence

import numpy as np

from dnadiff.errors import DnadiffError

CLASSIFIERS = ("cnn", "kmer_lr")
MIN_PER_FOLD = 10  # sequences of each side in every fold, at least
AUTO_MIN = 200  # the default run needs this many sequences per side (AUROC SE ~0.03 at n = 200, the floor's band)
C_GRID = (1e-3, 1e-2, 1e-1)  # the k-mer LR's inverse L2 strengths (features scaled to unit variance)
VALID_FRACTION = 0.1  # of the training folds: early stopping (CNN) and the choice of C (k-mer LR)


@dataclasses.dataclass
class DiscriminatorSettings:
    folds: int = 5
    seed: int = 0
    floor: bool = True
    classifiers: tuple[str, ...] = CLASSIFIERS
    channels: int = 32  # the CNN's width (ConvJudgeConfig.channels)
    blocks: int = 2
    epochs: int = 20
    patience: int = 5
    lr: float = 5e-3
    batch_size: int = 64
    kmer_ks: tuple[int, ...] = (3, 4, 5, 6)

    def check(self) -> None:
        if self.folds < 2:
            raise DnadiffError(f"--discriminator-folds must be at least 2, got {self.folds}")
        bad = [c for c in self.classifiers if c not in CLASSIFIERS]
        if bad or not self.classifiers:
            raise DnadiffError(f"discriminator classifiers must be among {', '.join(CLASSIFIERS)}, got {bad or '[]'}")
        if self.epochs < 1:
            raise DnadiffError(f"--discriminator-epochs must be positive, got {self.epochs}")


def auroc_standard_error(auroc: float, n1: int, n2: int) -> float:
    """Hanley & McNeil (1982) eq. 1-3: the standard error of an AUROC from n1 positives and n2 negatives."""
    a = float(auroc)
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n2 - 1) * (q2 - a * a)) / (n1 * n2)
    return math.sqrt(max(var, 0.0))


def binomial_p_value(correct: int, n: int) -> float:
    """P(X >= correct), X ~ Binomial(n, 1/2): Lopez-Paz & Oquab §2, the exact one-sided test of the accuracy."""
    from scipy.stats import binom

    return float(binom.sf(correct - 1, n, 0.5))


def centre_cut(seqs: Sequence[str], length: int) -> list[str]:
    """Each sequence's central `length` bases (all are at least that long)."""
    return [s[(len(s) - length) // 2: (len(s) - length) // 2 + length] for s in seqs]


def fold_ids(n: int, folds: int, rng: np.random.Generator) -> np.ndarray:
    """Int[2n] fold of each sequence (first n: samples, last n: real): each side spread evenly over the folds."""
    out = np.empty(2 * n, dtype=np.int64)
    for side in range(2):
        out[side * n: (side + 1) * n] = rng.permutation(np.arange(n) % folds)
    return out


def _inner_split(train: np.ndarray, labels: np.ndarray, rng: np.random.Generator):
    """(fit rows, validation rows) of the training folds: VALID_FRACTION of each class held out."""
    fit, valid = [], []
    for c in (0, 1):
        rows = rng.permutation(train[labels[train] == c])
        k = max(1, int(round(VALID_FRACTION * rows.size)))
        valid.append(rows[:k])
        fit.append(rows[k:])
    return np.concatenate(fit), np.concatenate(valid)


def _cnn_scores(seqs, labels, train, test, settings, seed, rng) -> np.ndarray:
    from dnadiff.eval.conv_judge import ConvJudge, ConvJudgeConfig, fit_judge

    fit, valid = _inner_split(train, labels, rng)
    model = ConvJudge(2, ConvJudgeConfig(channels=settings.channels, blocks=settings.blocks))
    fit_judge(model, [seqs[i] for i in fit], labels[fit], [seqs[i] for i in valid], labels[valid],
              epochs=settings.epochs, patience=settings.patience, lr=settings.lr, batch_size=settings.batch_size,
              seed=seed)
    logits = model.predict_logits([seqs[i] for i in test])
    return logits[:, 1] - logits[:, 0]  # the log-odds of "generated"


def _kmer_scores(features, labels, train, test, rng) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    fit, valid = _inner_split(train, labels, rng)
    best = None
    for c in C_GRID:  # the C of lowest validation log-loss, then refitted on all training folds
        model = make_pipeline(StandardScaler(with_mean=False), LogisticRegression(C=c, max_iter=2000))
        model.fit(features[fit], labels[fit])
        loss = log_loss(labels[valid], model.predict_proba(features[valid])[:, 1], labels=[0, 1])
        if best is None or loss < best[0]:
            best = (loss, c)
    model = make_pipeline(StandardScaler(with_mean=False), LogisticRegression(C=best[1], max_iter=2000))
    model.fit(features[train], labels[train])
    return model.decision_function(features[test])


def two_sample_test(generated: Sequence[str], real: Sequence[str], classifier: str, settings: DiscriminatorSettings,
                    seed: int, bar=None) -> dict:
    """One classifier two-sample test of `generated` vs `real` (equal counts, equal lengths): k-fold
    out-of-fold scores, their AUROC ± SE, accuracy and exact binomial p-value (module docstring)."""
    from sklearn.metrics import roc_auc_score

    n = len(generated)
    if len(real) != n:
        raise DnadiffError(f"two-sample test: {n} generated but {len(real)} real sequences (give equal counts)")
    if n < settings.folds * MIN_PER_FOLD:
        raise DnadiffError(f"two-sample test: {n} sequences per side are too few for {settings.folds} folds "
                           f"(needs {settings.folds * MIN_PER_FOLD}: {MIN_PER_FOLD} per fold)")
    seqs = [s.upper() for s in generated] + [s.upper() for s in real]
    labels = np.concatenate([np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64)])
    rng = np.random.default_rng(seed)
    folds = fold_ids(n, settings.folds, rng)
    features = None
    if classifier == "kmer_lr":
        from dnadiff.eval.kmer_oracle import kmer_features

        features = kmer_features(seqs, settings.kmer_ks, both_strands=True)
    scores = np.zeros(2 * n)
    t0 = time.process_time()
    for f in range(settings.folds):
        train, test = np.flatnonzero(folds != f), np.flatnonzero(folds == f)
        if classifier == "cnn":
            scores[test] = _cnn_scores(seqs, labels, train, test, settings, seed * 1000 + f, rng)
        else:
            scores[test] = _kmer_scores(features, labels, train, test, rng)
        if bar is not None:
            bar.update(1)
    auroc = float(roc_auc_score(labels, scores))
    correct = int(((scores > 0) == (labels == 1)).sum())
    return {"auroc": auroc, "std_error": auroc_standard_error(auroc, n, n), "accuracy": correct / (2 * n),
            "p_value": binomial_p_value(correct, 2 * n), "n_per_side": n, "cpu_s": round(time.process_time() - t0, 2)}


def plan(num_samples: int, num_reference: int, settings: DiscriminatorSettings) -> int:
    """n, the sequences per side the test uses: min(#samples, #reference // 2) with the floor (two disjoint real
    halves), min(#samples, #reference) without; an error when n is too few for the folds."""
    n = min(num_samples, num_reference // 2 if settings.floor else num_reference)
    if n < settings.folds * MIN_PER_FOLD:
        need = settings.folds * MIN_PER_FOLD
        twice = ", twice for the real-vs-real floor" if settings.floor else ""
        raise DnadiffError(
            f"--discriminator: {num_samples} samples and {num_reference} reference sequences are too few for "
            f"{settings.folds} folds: it needs {need} samples and {need * (2 if settings.floor else 1)} reference "
            f"sequences ({MIN_PER_FOLD} per fold and side{twice})")
    return n


def common_length(samples: Sequence[str], reference: Sequence[str]) -> tuple[int, str]:
    """(L, how sequences are cut): L = the shortest sample; a reference sequence shorter than L is an error."""
    length = min(len(s) for s in samples)
    short = [len(r) for r in reference if len(r) < length]
    if short:
        raise DnadiffError(f"--discriminator: {len(short)} reference sequence(s) are shorter than the shortest "
                           f"sample ({min(short)} < {length} bp); it compares sequences of one length: give a "
                           f"reference of sequences at least {length} bp long (or --no-discriminator)")
    longer = sum(len(s) > length for s in samples) + sum(len(r) > length for r in reference)
    how = (f"all {length} bp" if not longer else
           f"{longer} sequence(s) longer than {length} bp (the shortest sample) cut to their central {length} bp")
    return length, how


def discriminator_test(samples: Sequence[str], reference: Sequence[str],
                       settings: DiscriminatorSettings | None = None, progress: bool = False) -> dict:
    """The classifier two-sample tests of the samples against held-out reference sequences, and (settings.floor)
    of two disjoint halves of the reference; one dict per classifier (module docstring)."""
    from dnadiff.logs import progress_bar

    settings = settings or DiscriminatorSettings()
    settings.check()
    length, how = common_length(samples, reference)
    n = plan(len(samples), len(reference), settings)
    rng = np.random.default_rng(settings.seed)
    ref_order = rng.permutation(len(reference))
    smp = sorted(rng.permutation(len(samples))[:n].tolist()) if n < len(samples) else list(range(len(samples)))
    gen = centre_cut([samples[i] for i in smp], length)
    real_a = centre_cut([reference[i] for i in ref_order[:n]], length)
    real_b = centre_cut([reference[i] for i in ref_order[n: 2 * n]], length) if settings.floor else None
    out = {"length": length, "cut": how, "n_per_side": n, "num_samples_used": n, "num_samples": len(samples),
           "folds": settings.folds, "seed": settings.seed, "settings": dataclasses.asdict(settings),
           "method": "classifier two-sample test (Lopez-Paz & Oquab, ICLR 2017): k-fold out-of-fold scores; "
                     "AUROC ± Hanley-McNeil SE; exact binomial p-value of the accuracy; floor = two disjoint "
                     "halves of the real set"}
    runs = len(settings.classifiers) * settings.folds * (2 if settings.floor else 1)
    with progress_bar(total=runs, desc="discriminator", unit="fit", disable=not progress) as bar:
        for name in settings.classifiers:
            res = two_sample_test(gen, real_a, name, settings, settings.seed, bar)
            if settings.floor:  # real vs real, with the same real half as the samples' test
                floor = two_sample_test(real_b, real_a, name, settings, settings.seed + 1, bar)
                res.update({f"floor_{k}": floor[k] for k in ("auroc", "std_error", "accuracy", "p_value")})
            out[name] = res
    return out


def auroc_columns(samples: Sequence[str], reference: Sequence[str], seed: int = 0, floor: bool = False,
                  settings: DiscriminatorSettings | None = None) -> dict:
    """A pipeline table's discriminator columns for one row: {"disc_auroc_cnn", "disc_se_cnn", "disc_p_cnn",
    ... "_kmer_lr"} of the test of `samples` vs `reference` (no floor by default: the tables' real row is
    theirs), or {} when the two sets are too few for the folds. `settings` (a smaller judge, e.g. in tests)
    replaces the defaults and then `seed` and `floor`."""
    settings = settings or DiscriminatorSettings(seed=seed, floor=floor)
    try:
        plan(len(samples), len(reference), settings)
        common_length(samples, reference)
    except DnadiffError:
        return {}
    res = discriminator_test(samples, reference, settings)
    out = {}
    for name in settings.classifiers:
        r = res[name]
        out.update({f"disc_auroc_{name}": r["auroc"], f"disc_se_{name}": r["std_error"],
                    f"disc_p_{name}": r["p_value"]})
    return out


def settings_for(requested: bool | None, num_samples: int, num_reference: int, folds: int, seed: int,
                 floor: bool, notes: list[str] | None = None) -> DiscriminatorSettings | None:
    """The settings of `dnadiff metrics`' test, or None to skip it: requested None (the default) runs it when
    both sides reach AUTO_MIN sequences; True runs it or says in one error line why it cannot; False skips it.
    Why a default run is skipped goes to `notes` when given (the caller says it once its other inputs passed
    their checks: a bad input's error stays one line), else to the log."""
    from dnadiff.logs import log

    if requested is False:
        return None
    settings = DiscriminatorSettings(folds=folds, seed=seed, floor=floor)
    settings.check()
    if requested is None:
        n = min(num_samples, num_reference // 2 if floor else num_reference)
        if n < max(AUTO_MIN, folds * MIN_PER_FOLD):
            note = (f"(no discriminator: {n} sequences per side, fewer than the {AUTO_MIN} it runs on by default; "
                    "--discriminator asks for it)")
            notes.append(note) if notes is not None else log.info("%s", note)
            return None
    plan(num_samples, num_reference, settings)
    return settings


def check_disjoint(reference: Sequence[str], training: Sequence[str], match_bp: int, where: str) -> None:
    """An error when any reference sequence shares an exact match of >= match_bp bases (either strand) with the
    generator's training sequences: the real side of the test must be held out."""
    from dnadiff.eval.dna_metrics import longest_matches

    lm = longest_matches(list(reference), list(training), both_strands=True)
    hits = int((lm >= match_bp).sum())
    if hits:
        raise DnadiffError(f"{where}: {hits:,} of {len(reference):,} reference sequences share an exact match of "
                           f">= {match_bp} bp with it (the generator's training data); the discriminator's real "
                           "side must be held out (e.g. another --split)")


__all__ = ["CLASSIFIERS", "DiscriminatorSettings", "auroc_columns", "auroc_standard_error", "binomial_p_value",
           "check_disjoint", "common_length", "discriminator_test", "plan", "settings_for",
           "two_sample_test"]
