
import pytest

from dnadiff.data import SequenceClassificationDataset, load_benchmark_split, resolve_benchmark
from dnadiff.errors import DnadiffError
from helpers.benchmark_files import write_benchmark

SETS = [("human_chr22_repeats", ["repeat", "unique"]), ("leptospira_coding_vs_intergenic", ["coding", "intergenic"])]


@pytest.mark.parametrize("name, classes", SETS)
def test_bundled_benchmarks(benchmarks_dir, name, classes):
    """The subsets shipped with the package (tests/data/make_fixtures.py): 250 train + 60 test per class."""
    _check_set(benchmarks_dir / name, classes, 250, 60)


@pytest.mark.slow
@pytest.mark.parametrize("name, classes, n_train, n_test",
                         [(*SETS[0], 5000, 1250), (*SETS[1], 4946, 1237)])
def test_full_benchmarks(shared_data, benchmarks_dir, name, classes, n_train, n_test):
    _check_set(shared_data / "benchmarks" / name, classes, n_train, n_test)
    full = set(load_benchmark_split(shared_data / "benchmarks" / name, "train").sequences)
    assert set(load_benchmark_split(benchmarks_dir / name, "train").sequences) <= full  # a real subset


def _check_set(path, classes, n_train, n_test):
    root = resolve_benchmark(path)
    train = load_benchmark_split(root, "train")
    test = load_benchmark_split(root, "test")
    assert train.classes == test.classes == classes  # sorted names
    assert train.counts() == {c: n_train for c in classes}
    assert test.counts() == {c: n_test for c in classes}
    assert all(len(s) == 200 for s in train.sequences[:50])
    first = (root / "train" / classes[0] / "0.txt").read_text().strip()
    assert train.sequences[0] == first and train.labels[0] == 0


def test_labels_from_sorted_names_and_padding(tmp_path):
    write_benchmark(tmp_path, {split: {"zeta": ["ACGT", "AC"], "alpha": ["GGG"]} for split in ("train", "test")})
    data = load_benchmark_split(tmp_path, "train")
    assert data.classes == ["alpha", "zeta"]
    assert data.labels == [0, 1, 1]
    ds = SequenceClassificationDataset(data)
    batch = ds.collate([ds[0], ds[1], ds[2]])
    assert batch["input_ids"].tolist() == [[9, 9, 9, 4], [7, 8, 9, 10], [7, 8, 4, 4]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch["labels"].tolist() == [0, 1, 1]


@pytest.mark.parametrize("layout, message", [
    ({"train": {"a": ["ACGT"], "b": ["ACGT"]}, "test": {"a": ["ACGT"], "c": ["ACGT"]}}, "differ from test classes"),
    ({"train": {"a": ["ACGT"], "b": []}, "test": {"a": ["ACGT"], "b": ["ACGT"]}}, "class 'b' has no sequences"),
    ({"train": {"a": ["ACGT"]}, "test": {"a": ["ACGT"]}}, "at least 2 classes"),
], ids=["class-sets-must-match", "empty-class", "one-class"])
def test_bad_class_layouts_are_refused(tmp_path, layout, message):
    write_benchmark(tmp_path, layout)  # an empty list: the class folder without files
    with pytest.raises(DnadiffError, match=message):
        load_benchmark_split(tmp_path, "train")


def test_unknown_name_without_download(tmp_path, monkeypatch):
    monkeypatch.setattr("dnadiff.data.benchmarks.cache_dir", lambda: tmp_path)
    with pytest.raises(DnadiffError, match="--download"):
        resolve_benchmark("human_nontata_promoters")
    (tmp_path / "human_nontata_promoters").mkdir()
    assert resolve_benchmark("human_nontata_promoters") == tmp_path / "human_nontata_promoters"
