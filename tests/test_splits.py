"""dnadiff/data/splits.py: the one 90/10 split, k folds and stratified subsamples (scikit-learn)."""

import numpy as np
import pytest

from dnadiff.data.splits import holdout_split, kfold_splits, paper_splits, stratified_subsample
from dnadiff.errors import DnadiffError


def test_holdout_split_is_train_test_split_with_the_seed():
    from sklearn.model_selection import train_test_split

    train, valid = holdout_split(57, seed=4)
    assert len(valid) == 6 and len(train) == 51  # round(5.7)
    ref_train, ref_valid = train_test_split(np.arange(57), test_size=6, random_state=4, shuffle=True)
    assert np.array_equal(train, np.sort(ref_train)) and np.array_equal(valid, np.sort(ref_valid))
    assert [tuple(map(tuple, s)) for s in paper_splits(57, [4])] == [(tuple(train), tuple(valid))]


def test_holdout_split_edges():
    assert [len(x) for x in holdout_split(3, 0)] == [2, 1]  # at least one validation example
    with pytest.raises(DnadiffError, match="at least 2 examples"):
        holdout_split(1, 0)
    with pytest.raises(DnadiffError, match="valid_frac"):
        holdout_split(10, 0, valid_frac=1.0)


def test_stratified_subsample_keeps_proportions_and_is_sklearns():
    from sklearn.model_selection import train_test_split

    labels = np.array([0] * 700 + [1] * 200 + [2] * 100)
    idx = stratified_subsample(labels, 100, seed=3)
    assert np.bincount(labels[idx]).tolist() == [70, 20, 10] and len(np.unique(idx)) == 100
    ref, _ = train_test_split(np.arange(1000), train_size=100, stratify=labels, random_state=3, shuffle=True)
    assert np.array_equal(idx, np.sort(ref))
    assert not np.array_equal(idx, stratified_subsample(labels, 100, seed=4))
    assert np.array_equal(stratified_subsample(labels, 5000), np.arange(1000))


def test_stratified_subsample_refuses_what_cannot_be_stratified():
    with pytest.raises(DnadiffError, match="one example per class"):
        stratified_subsample(np.array([0, 0, 1, 1, 2, 2]), 2)
    with pytest.raises(DnadiffError, match="stratified subsample"):
        stratified_subsample(np.array([0] * 10 + [1]), 5)


def test_kfold_covers_every_example_once():
    labels = np.array([0] * 13 + [1] * 7)
    folds = kfold_splits(labels, k=4, seed=1)
    valid = np.concatenate([va for _, va in folds])
    assert sorted(valid.tolist()) == list(range(20))
    for tr, va in folds:
        assert len(np.intersect1d(tr, va)) == 0 and abs(int((labels[va] == 1).sum()) - 7 / 4) < 1


def test_select_on_validation_ties_go_to_the_first_in_the_grid():
    from dnadiff.classifier_tuning.protocol import select_on_validation

    test = {m: 0.5 for m in ("accuracy", "mcc", "f1_macro", "auroc")}
    run = lambda v: {"val_acc": v, "test": {**test, "accuracy": v}}  # noqa: E731
    grid = {1e-3: [run(0.6), run(0.8)], 1e-4: [run(0.7), run(0.7)], 1e-2: [run(0.5), run(0.9)]}
    sel = select_on_validation(grid, [1e-3, 1e-4, 1e-2])
    assert list(sel) == ["lr_grid", "val_acc_by_lr", "selected_lr", "runs", "summary"]
    assert sel["selected_lr"] == 1e-3 and sel["val_acc_by_lr"] == {"0.001": 0.7, "0.0001": 0.7, "0.01": 0.7}
    assert select_on_validation(grid, [1e-4, 1e-3, 1e-2])["selected_lr"] == 1e-4
    assert sel["summary"]["val_acc"]["mean"] == pytest.approx(0.7) and sel["runs"] is grid[1e-3]
