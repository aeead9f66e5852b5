"""Where a text corpus's documents come from: `TextOptions` (the `data.text` mapping) and
`split_sources(opts) -> {"train", "valid", "test": DocSource}` over local files or local copies of HF
data sets (text.py packs them into model inputs).

Options (`data.text` mapping; unknown keys raise):
  dataset      local | lm1b | openwebtext   (HF `datasets`, loaded offline unless download: true)
  path         local: a folder with {train,valid,test}.{jsonl,txt} or one file (train only);
               lm1b | openwebtext: a local copy of the data set, for a machine without internet:
               the Hub's parquet layout (e.g. plain_text/train/0000.parquet or
               data/train-00000-of-00080.parquet) or a `save_to_disk` folder (a DatasetDict, or one
               Dataset: the train split); the reference splits apply (LM1B: train, test as validation;
               OWT: the last 100,000 train documents as validation)
  train/valid/test  explicit local file(s) per split (override `path`)
  wrap         default true for openwebtext, false otherwise
  field        JSON field holding the text (default "text")
  txt_unit     line | paragraph: what one document of a .txt file is (default: line)
  detokenizer  none | lm1b | ptb | wikitext | lambada | scientific_papers (applied before tokenising)
  holdout_docs the last N documents of train are the validation split when there is no validation
               file/split (OpenWebText: 100,000 as in the reference; lower it for small corpora)
  eos_between, block_bos_eos (wrap), add_special (pad): layout switches, default true
  max_docs     use only the first N documents of each split (quick runs)
  cache, cache_dir  tokenised arrays are cached as .npy under a key hashing the tokenizer identity
               (name + vocabulary digest), length, layout and the source files (path, size, mtime)
  streaming    tokenise on the fly (IterableDataset, no cache, shards documents over workers)
  hf_cache_dir, download  for the HF datasets
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from dnadiff.data.detokenizers import get_detokenizer
from dnadiff.data.documents import iter_documents
from dnadiff.data_root import data_root_hint
from dnadiff.errors import DnadiffError

SPLITS = ("train", "valid", "test")
OWT_HOLDOUT = 100_000  # reference: openwebtext train[:-100000] / train[-100000:]


@dataclass(frozen=True)
class TextOptions:
    dataset: str = "local"
    path: Optional[str] = None
    train: Any = None
    valid: Any = None
    test: Any = None
    wrap: Optional[bool] = None
    field: str = "text"
    txt_unit: str = "line"
    detokenizer: Optional[str] = None
    holdout_docs: Optional[int] = None
    eos_between: bool = True
    block_bos_eos: bool = True
    add_special: bool = True
    max_docs: Optional[int] = None
    cache: bool = True
    cache_dir: Optional[str] = None
    streaming: bool = False
    hf_cache_dir: Optional[str] = None
    download: bool = False

    @property
    def wrapped(self) -> bool:
        return self.wrap if self.wrap is not None else self.dataset == "openwebtext"

    @staticmethod
    def from_mapping(raw: dict[str, Any] | None) -> "TextOptions":
        raw = dict(raw or {})
        names = {f.name for f in dataclasses.fields(TextOptions)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise DnadiffError(f"data.text.{unknown[0]}: unknown option (valid: {', '.join(sorted(names))})")
        opts = TextOptions(**raw)
        if opts.dataset not in ("local", "lm1b", "openwebtext"):
            raise DnadiffError(f"data.text.dataset: {opts.dataset!r} is not one of local, lm1b, openwebtext")
        if opts.txt_unit not in ("line", "paragraph"):
            raise DnadiffError(f"data.text.txt_unit: {opts.txt_unit!r} is not line or paragraph")
        if opts.holdout_docs is not None and opts.holdout_docs < 1:
            raise DnadiffError(f"data.text.holdout_docs: must be >= 1, got {opts.holdout_docs}")
        if opts.max_docs is not None and opts.max_docs < 1:
            raise DnadiffError(f"data.text.max_docs: must be >= 1, got {opts.max_docs}")
        get_detokenizer(opts.detokenizer)  # validates the name
        return opts


# ----------------------------------------------------------------------------- document sources (data/documents.py)


@dataclass
class DocSource:
    """Documents of one split: local files or an HF dataset split. With `holdout` = k, `part`
    "head" is every document but the last k and "tail" the last k (counted when first read)."""

    files: list[str] = field(default_factory=list)
    hf: Optional[dict] = None  # {"name", "config", "split"}
    holdout: Optional[int] = None
    part: str = "all"  # all | head | tail
    opts: TextOptions = field(default_factory=TextOptions)

    def describe(self) -> dict:
        if self.hf is not None:
            src: dict = {"hf": self.hf}
            if self.hf.get("path"):  # a local copy: its files, so that a changed copy is tokenised anew
                src["files"] = [_file_identity(f) for f in local_copy_files(self.hf["path"])]
        else:
            src = {"files": []}
            for f in self.files:
                src["files"].append(_file_identity(f))
        src.update(holdout=self.holdout, part=self.part, field=self.opts.field, txt_unit=self.opts.txt_unit,
                   detokenizer=self.opts.detokenizer)
        return src

    def count_raw(self) -> int:
        if self.hf is not None:
            return _hf_len(self.hf, self.opts)
        return sum(1 for f in self.files
                   for _ in iter_documents(f, self.opts.field, self.opts.txt_unit, field_hint="set data.text.field"))

    def bounds(self) -> tuple[int, Optional[int]]:
        """[start, stop) document indices of this split (stop None = to the end)."""
        start, stop = 0, None
        if self.part != "all":
            n, k = self.count_raw(), int(self.holdout or 0)
            if k >= n:
                raise DnadiffError(
                    f"data.text.holdout_docs: {k} held-out documents but the training text has only {n}; "
                    "lower data.text.holdout_docs or give a validation file"
                )
            start, stop = (0, n - k) if self.part == "head" else (n - k, None)
        if self.opts.max_docs is not None:
            stop = start + self.opts.max_docs if stop is None else min(stop, start + self.opts.max_docs)
        return start, stop

    def _raw(self, start: int, stop: Optional[int]) -> Iterator[str]:
        if self.hf is not None:
            yield from _hf_texts(self.hf, self.opts, start, stop)
            return
        i = 0
        for f in self.files:
            for text in iter_documents(f, self.opts.field, self.opts.txt_unit, field_hint="set data.text.field"):
                if stop is not None and i >= stop:
                    return
                if i >= start:
                    yield text
                i += 1

    def label(self) -> str:
        """Where this split's documents come from, for a reader: its files (or Hub dataset split) and
        which part of them (a tail hold-out, data.text.max_docs)."""
        if self.hf is not None:
            where = f"{self.hf['name']} {self.hf['split']} split"
            if self.hf.get("path"):
                where += f" (local copy {self.hf['path']})"
        else:
            where = ", ".join(self.files)
        if self.part == "head":
            where += f", all but its last {self.holdout:,} documents"
        elif self.part == "tail":
            where += f", its last {self.holdout:,} documents (held out)"
        if self.opts.max_docs is not None:
            where += f", at most {self.opts.max_docs:,} documents"
        return where

    def docs(self) -> Iterator[str]:
        """Non-empty, detokenised documents in order."""
        detok = get_detokenizer(self.opts.detokenizer)
        start, stop = self.bounds()
        for text in self._raw(start, stop):
            if detok is not None:
                text = detok(text)
            if text.strip():
                yield text


def _import_datasets(opts: TextOptions):
    if not opts.download:
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # read when `datasets` is first imported
    try:
        import datasets  # noqa: F401
    except ImportError:
        raise DnadiffError(
            f"data.text.dataset={opts.dataset}: the `datasets` package is not installed; install it, "
            "or give local files with data.text.path"
        ) from None
    return datasets


def _file_identity(path: str) -> dict:
    st = os.stat(path)
    return {"path": os.path.abspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def local_copy_files(folder: str) -> list[str]:
    """The data files of a local copy of a Hugging Face data set (parquet, arrow, json), sorted."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # .cache/.git of a Hub snapshot
        out += [os.path.join(root, f) for f in sorted(files)
                if f.endswith((".parquet", ".arrow")) or f in ("dataset_dict.json", "state.json", "dataset_info.json")]
    return out


_SPLIT_NAMES = {"train": ("train",), "test": ("test",), "validation": ("validation", "valid", "val")}


def _parquet_split_files(folder: str, split: str) -> list[str]:
    """Parquet files of one split in the Hub's layouts: a folder named after the split
    (`plain_text/train/0000.parquet`, `partial-train/`) or files named `train-00000-of-00080.parquet`."""
    names = _SPLIT_NAMES.get(split, (split,))
    found = []
    for path in local_copy_files(folder):
        if not path.endswith(".parquet"):
            continue
        parts = os.path.relpath(path, folder).split(os.sep)
        stem = parts[-1][: -len(".parquet")]
        tokens = parts[:-1] + [stem]
        if any(t in names or t.removeprefix("partial-") in names or t.split("-")[0] in names or t.split("_")[0] in names
               for t in tokens):
            found.append(path)
    return found


def _load_local_copy(datasets, spec: dict, opts: TextOptions):
    """One split of a local copy: a `save_to_disk` folder, or the Hub's parquet files (read offline)."""
    folder, split, name = spec["path"], spec["split"], spec["name"]
    where = f"data.text.path: {folder}"
    if os.path.isfile(os.path.join(folder, "dataset_dict.json")) or os.path.isfile(os.path.join(folder, "state.json")):
        try:
            loaded = datasets.load_from_disk(folder)
        except Exception as exc:
            raise DnadiffError(f"{where}: cannot read the save_to_disk folder "
                               f"({str(exc).splitlines()[0][:200]})") from None
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise DnadiffError(f"{where}: no {split!r} split in this copy of {name} (it has {', '.join(loaded)})")
            ds = loaded[split]
        elif split == "train":  # one Dataset saved alone: the train split
            ds = loaded
        else:
            raise DnadiffError(f"{where}: a single saved Dataset (taken as train), "
                               f"but {name} needs a {split!r} split too")
        return ds.to_iterable_dataset() if opts.streaming else ds
    files = _parquet_split_files(folder, split)
    if not files:
        raise DnadiffError(f"{where}: no parquet files of the {split!r} split of {name} (expected the Hub's layout, "
                           f"e.g. plain_text/{split}/0000.parquet or data/{split}-00000-of-00001.parquet, "
                           "or a save_to_disk folder)")
    try:
        return datasets.load_dataset("parquet", data_files={split: files}, split=split, cache_dir=opts.hf_cache_dir,
                                     streaming=opts.streaming)
    except Exception as exc:
        raise DnadiffError(f"{where}: cannot read the {split!r} parquet files "
                           f"({str(exc).splitlines()[0][:200]})") from None


def _hf_load(spec: dict, opts: TextOptions):
    datasets = _import_datasets(opts)
    if spec.get("path"):
        return _load_local_copy(datasets, spec, opts)
    args = [spec["name"]] + ([spec["config"]] if spec.get("config") else [])
    try:
        return datasets.load_dataset(*args, split=spec["split"], cache_dir=opts.hf_cache_dir,
                                     streaming=opts.streaming)
    except Exception as exc:  # offline miss, missing split, ...
        raise DnadiffError(
            f"data.text.dataset={spec['name']}: could not load split {spec['split']!r} from the local "
            f"Hugging Face cache ({str(exc).splitlines()[0][:200]}); download it first or use local files"
        ) from None


def _hf_texts(spec: dict, opts: TextOptions, start: int, stop: Optional[int]) -> Iterator[str]:
    ds = _hf_load(spec, opts)
    if opts.streaming:  # IterableDataset: skip/take
        ds = ds.skip(start) if start else ds
        ds = ds.take(stop - start) if stop is not None else ds
    elif start or stop is not None:
        ds = ds.select(range(start, len(ds) if stop is None else stop))
    for rec in ds:
        yield str(rec[opts.field])


def _hf_len(spec: dict, opts: TextOptions) -> int:
    if spec.get("path") and opts.streaming:  # a local copy: counted without reading its documents
        files = _parquet_split_files(spec["path"], spec["split"])
        if files and not os.path.isfile(os.path.join(spec["path"], "dataset_dict.json")):
            import pyarrow.parquet as pq  # installed with `datasets`

            return sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        return len(_hf_load(spec, dataclasses.replace(opts, streaming=False)))  # save_to_disk: memory-mapped
    ds = _hf_load(spec, opts)
    try:
        return len(ds)
    except TypeError:  # streaming: the split size recorded in the dataset info
        splits = getattr(getattr(ds, "info", None), "splits", None) or {}
        if spec["split"] in splits and splits[spec["split"]].num_examples:
            return int(splits[spec["split"]].num_examples)
        raise DnadiffError(f"data.text: cannot count the documents of streaming {spec['name']}") from None


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


def _find_split_file(folder: Path, split: str) -> list[str]:
    names = {"valid": ("valid", "validation", "val", "dev"), "train": ("train",), "test": ("test",)}[split]
    for stem in names:
        for ext in (".jsonl", ".txt"):
            if (folder / f"{stem}{ext}").is_file():
                return [str(folder / f"{stem}{ext}")]
    return []


def split_sources(opts: TextOptions) -> dict[str, DocSource]:
    """Where each split's documents come from (applies the tail hold-out when needed)."""
    local = None
    if opts.dataset in ("lm1b", "openwebtext") and opts.path is not None:  # a local copy (offline cluster)
        local = os.path.abspath(opts.path)
        if not os.path.isdir(local):
            raise DnadiffError(f"data.text.path: {opts.path} is not a folder (a local copy of {opts.dataset}: "
                               f"the Hub's parquet files or a save_to_disk folder){data_root_hint(opts.path)}")
    if opts.dataset == "lm1b":
        # LM1B has train and test; the reference validates on test.
        return {
            "train": DocSource(hf={"name": "lm1b", "config": None, "split": "train", "path": local}, opts=opts),
            "valid": DocSource(hf={"name": "lm1b", "config": None, "split": "test", "path": local}, opts=opts),
            "test": DocSource(hf={"name": "lm1b", "config": None, "split": "test", "path": local}, opts=opts),
        }
    if opts.dataset == "openwebtext":
        # only a train split: its last k documents are the validation set (reference: train[-100000:])
        k = opts.holdout_docs or OWT_HOLDOUT
        spec = {"name": "openwebtext", "config": None, "split": "train", "path": local}
        train = DocSource(hf=spec, holdout=k, part="head", opts=opts)
        valid = DocSource(hf=spec, holdout=k, part="tail", opts=opts)
        return {"train": train, "valid": valid, "test": valid}

    files = {s: _as_list(getattr(opts, s)) for s in SPLITS}
    if opts.path is not None:
        base = Path(opts.path)
        if base.is_file():
            files["train"] = files["train"] or [str(base)]
        elif base.is_dir():
            for s in SPLITS:
                files[s] = files[s] or _find_split_file(base, s)
        else:
            raise DnadiffError(f"data.text.path: {opts.path} does not exist{data_root_hint(opts.path)}")
    if not files["train"]:
        raise DnadiffError("data.text: no training text; set data.text.path (a folder or file) or data.text.train")
    for s in SPLITS:
        for f in files[s]:
            if not os.path.isfile(f):
                raise DnadiffError(f"data.text.{s}: {f} does not exist{data_root_hint(f)}")
    train = DocSource(files=files["train"], opts=opts)
    if files["valid"]:
        valid = DocSource(files=files["valid"], opts=opts)
    else:
        k = opts.holdout_docs or OWT_HOLDOUT
        train = DocSource(files=files["train"], holdout=k, part="head", opts=opts)
        valid = DocSource(files=files["train"], holdout=k, part="tail", opts=opts)
    test = DocSource(files=files["test"], opts=opts) if files["test"] else valid
    return {"train": train, "valid": valid, "test": test}
