"""Configs: frozen dataclasses, YAML load/save, `key=value` overrides (OmegaConf). No torch here.

    cfg = load_config(RunConfig, "configs/experiments/tiny_dna_mdlm.yaml", ["train.max_steps=10"])
    save_config(cfg, "runs/x/model/config.yaml")

YAML is parsed safely (no Python tags, no code); OmegaConf resolves `${a.b}` references between
keys only. Unknown keys and wrong types raise DnadiffError naming the dotted key.
"""

from __future__ import annotations

import dataclasses
import os
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from dnadiff.config_types import wrong_type
from dnadiff.data_root import _resolve_data_paths
from dnadiff.errors import DnadiffError
from dnadiff.yaml_safe import MAX_CONFIG_BYTES, _bounded_safe_load

# The option mappings (model.overrides, objective.options, ...) are checked against the schemas the
# registered classes declare by dnadiff.config_options (a layer above the registries, which this module
# never imports): its `load_config` is this one with that check; commands and training call it.


# ----------------------------------------------------------------------------- schema


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise DnadiffError(f"{key}: {message}")


ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps", "tpu")
PRECISIONS = ("auto", "32", "32-true", "64", "64-true", "16", "16-mixed", "16-true", "bf16", "bf16-mixed", "bf16-true")


def _devices_ok(devices: Any) -> bool:
    """Lightning's `devices`: "auto", a count (-1 = all), a list of indices, or "0,1" / "2" as text."""
    if devices == "auto":
        return True
    if isinstance(devices, bool):
        return False
    if isinstance(devices, int):
        return devices == -1 or devices > 0
    if isinstance(devices, (list, tuple)):
        return len(devices) > 0 and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices)
    if isinstance(devices, str):
        parts = [p.strip() for p in devices.strip().rstrip(",").split(",")]
        return all(p.lstrip("-").isdigit() for p in parts) and (
            len(parts) > 1 or int(parts[0]) == -1 or int(parts[0]) > 0)
    return False


@dataclass(frozen=True)
class TokenizerConfig:
    kind: str = "dna"  # a TOKENIZERS name (tokenizers/)
    path: Optional[str] = None  # text: local tokenizer folder or HF-cache name
    strict: bool = False  # dna: IUPAC ambiguity codes raise instead of becoming N
    train: Optional[str] = None  # text: bert-like | gpt2-like: build `path` from the data's train split on first use
    train_vocab_size: int = 2048  # text: vocabulary of a tokenizer built on first use

    def __post_init__(self):
        _check(self.train in (None, "bert-like", "gpt2-like"), "tokenizer.train",
               f"must be bert-like, gpt2-like or null, got {self.train!r}")
        _check(self.train_vocab_size >= 300, "tokenizer.train_vocab_size",
               f"must be >= 300, got {self.train_vocab_size}")


@dataclass(frozen=True)
class ModelConfig:
    backbone: str = "caduceus"  # a BACKBONES name (backbones/)
    preset: str = "tiny"
    overrides: dict[str, Any] = field(default_factory=dict)  # backbone config fields
    init_from: Optional[str] = None  # dnadiff model dir or official Caduceus/HyenaDNA HF dir
    adapt_ar: bool = False  # init_from is a causal Mamba LM to adapt into a Caduceus-PH (backbones/ar_adapt.py)
    num_classes: int = 0  # > 0: class-conditional model (label embedding, classifier-free guidance)
    class_names: list[str] = field(default_factory=list)
    label_dropout: float = 0.1  # share of training labels replaced by the null label (CFG)
    # what a time-conditioned backbone is fed: sigma = σ(t) = -log α(t) (the MDLM reference) or t; None:
    # sigma for a new model, t in a model directory written before this field existed.
    time_input: Optional[str] = None

    def __post_init__(self):
        _check(self.time_input in (None, "sigma", "t"), "model.time_input",
               f"must be sigma or t, got {self.time_input!r}")
        _check(not self.adapt_ar or bool(self.init_from), "model.adapt_ar", "needs model.init_from (the AR to adapt)")


@dataclass(frozen=True)
class ScheduleConfig:
    name: str = "loglinear"  # loglinear | linear | cosine | cosine2
    eps: float = 1e-3


@dataclass(frozen=True)
class ObjectiveConfig:
    name: str = "mdlm"  # mdlm | d3pm | sedd | ar | mlm
    T: Optional[int] = None  # discrete time steps (mdlm with T, d3pm)
    t_min: float = 1e-3  # training/eval times are drawn from [t_min, 1]
    stratified: bool = True  # low-discrepancy t over the batch (app. D.3)
    options: dict[str, Any] = field(default_factory=dict)  # objective-specific switches
    # mdlm / d3pm / sedd: pads (attention_mask 0) under the forward process (diffusion/base.py):
    # reference (masked, not scored: official MDLM, tab. 1) | score (masked and scored: the padded
    # sequence's NELBO) | visible (never masked nor scored: fixed-length DNA windows)
    pad_policy: str = "reference"
    # bd3lm (block diffusion, diffusion/bd3lm.py): tokens per block, and the clipped training interval
    # [beta, omega] of the mask rates (likelihood always on [t_min, 1]); objectives without blocks refuse them
    block_size: Optional[int] = None
    clip: Optional[list[float]] = None

    def __post_init__(self):
        _check(self.pad_policy in ("reference", "score", "visible"), "objective.pad_policy",
               f"must be reference, score or visible, got {self.pad_policy!r}")
        _check(self.block_size is None or (not isinstance(self.block_size, bool) and self.block_size >= 1),
               "objective.block_size", f"must be an integer >= 1, got {self.block_size!r}")


@dataclass(frozen=True)
class DataConfig:
    # genome | text | benchmark (labelled sequences, genomic-benchmarks layout) | dhs (`dnadiff data dhs`)
    kind: str = "genome"
    root: Optional[str] = None  # data root of the config's relative paths (None: $DNADIFF_DATA, else the bundled data)
    benchmark: Optional[str] = None  # kind=benchmark: folder NAME/{train,test}/CLASS/*.txt
    fasta: Optional[str] = None  # genome FASTA (plain/bgzip); None = the sample bundled in the package
    bed: Optional[str] = None  # BED with split column; None = the bundled sample's
    seq_len: int = 1024
    stride: Optional[int] = None  # tiling stride for eval windows (default seq_len)
    rc_prob: float = 0.5  # reverse-complement augmentation in training
    max_n_frac: float = 0.5  # skip training windows with more N than this
    mask_n: bool = True  # N is input but never scored
    num_workers: int = 0
    train_windows: Optional[int] = None  # random crops per epoch (default: bases / seq_len)
    text: dict[str, Any] = field(default_factory=dict)  # text corpora options (data/text.py)

    def __post_init__(self):
        _check(self.seq_len > 0, "data.seq_len", f"must be > 0, got {self.seq_len}")
        _check(self.stride is None or self.stride > 0, "data.stride", f"must be > 0, got {self.stride}")
        _check(0.0 <= self.rc_prob <= 1.0, "data.rc_prob", f"must be in [0, 1], got {self.rc_prob}")
        _check(0.0 <= self.max_n_frac <= 1.0, "data.max_n_frac", f"must be in [0, 1], got {self.max_n_frac}")
        _check(self.num_workers >= 0, "data.num_workers", f"must be >= 0, got {self.num_workers}")


@dataclass(frozen=True)
class TrainerConfig:
    """The training fields `dnadiff train` (TrainConfig) and `dnadiff finetune` (FinetuneTrainConfig,
    dnadiff/classifier_tuning/config.py) share: same names, same checks (the values the Lightning Trainer and
    AdamW get)."""

    batch_size: int = 32
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    precision: str = "auto"  # auto (bf16 on GPU, fp32 on CPU) | 32 | bf16-mixed | 16-mixed
    accelerator: str = "auto"  # runtime: not recorded in model directories
    devices: Any = "auto"  # runtime
    progress: bool = True  # runtime
    threads: Optional[int] = None  # runtime: CPU threads; null: free physical cores (dnadiff/threads.py)

    def __post_init__(self):
        # every value handed to the Lightning Trainer and AdamW: a bad one is one line, not a traceback
        _check(self.batch_size > 0, "train.batch_size", f"must be > 0, got {self.batch_size}")
        _check(self.grad_clip >= 0, "train.grad_clip", f"must be >= 0, got {self.grad_clip}")
        _check(self.accelerator in ACCELERATORS, "train.accelerator",
               f"must be one of {', '.join(ACCELERATORS)}, got {self.accelerator!r}")
        _check(_devices_ok(self.devices), "train.devices",
               f"must be auto, a positive number of devices (-1: all), a list of device indices or '0,1', "
               f"got {self.devices!r}")
        _check(str(self.precision) in PRECISIONS, "train.precision",
               f"must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        warmup = getattr(self, "warmup_steps", None)  # finetune: null = warmup_frac of the steps
        _check(warmup is None or warmup >= 0, "train.warmup_steps", f"must be >= 0, got {warmup}")
        _check(self.threads is None or self.threads > 0, "train.threads", f"must be > 0 or null, got {self.threads}")
        _check(all(0.0 <= b < 1.0 for b in self.betas), "train.betas", f"must be in [0, 1), got {list(self.betas)}")
        _check(self.weight_decay >= 0, "train.weight_decay", f"must be >= 0, got {self.weight_decay}")


@dataclass(frozen=True)
class TrainConfig(TrainerConfig):
    max_steps: int = 1000
    # wall-clock minutes (Trainer max_time): the run stops at max_steps or max_minutes, whichever comes first;
    # null = steps only. The lr schedule still spans max_steps.
    max_minutes: Optional[float] = None
    # which clock max_minutes reads: wall (Lightning's max_time) or cpu, this process's CPU seconds
    # (time.process_time), so rows of an equal-budget comparison get equal compute on a shared machine
    budget_clock: str = "wall"
    accumulate: int = 1  # gradient accumulation (effective batch = batch_size * accumulate * devices)
    lr: float = 3e-4
    lr_schedule: str = "constant"  # constant (after warmup) | cosine
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0  # cosine floor
    ema: float = 0.9999  # 0 disables EMA; decay min(ema, (1+n)/(10+n))
    seed: int = 0
    val_every: int = 500
    val_batches: int = 8
    ckpt_every: int = 500
    log_every: int = 10
    num_nodes: int = 1  # runtime
    strategy: str = "auto"  # runtime: auto | ddp | fsdp

    def __post_init__(self):
        _check(self.max_steps > 0, "train.max_steps", f"must be > 0, got {self.max_steps}")
        _check(self.max_minutes is None or self.max_minutes > 0, "train.max_minutes",
               f"must be a positive number of minutes or null, got {self.max_minutes}")
        _check(self.budget_clock in ("wall", "cpu"), "train.budget_clock",
               f"must be wall or cpu, got {self.budget_clock!r}")
        _check(self.accumulate > 0, "train.accumulate", f"must be > 0, got {self.accumulate}")
        _check(self.lr > 0, "train.lr", f"must be > 0, got {self.lr}")
        _check(0.0 <= self.ema < 1.0, "train.ema", f"must be in [0, 1), got {self.ema}")
        _check(self.lr_schedule in ("constant", "cosine"), "train.lr_schedule",
               f"must be constant or cosine, got {self.lr_schedule!r}")
        _check(self.strategy in ("auto", "ddp", "fsdp", "ddp_spawn", "deepspeed"), "train.strategy",
               f"must be auto, ddp or fsdp, got {self.strategy!r}")
        for name in ("val_every", "ckpt_every", "log_every"):
            _check(getattr(self, name) > 0, f"train.{name}", f"must be > 0, got {getattr(self, name)}")
        _check(self.num_nodes >= 1, "train.num_nodes", f"must be >= 1, got {self.num_nodes}")
        _check(self.val_batches >= 0, "train.val_batches", f"must be >= 0, got {self.val_batches}")
        _check(0 <= self.seed < 2**32, "train.seed", f"must be in [0, 2^32), got {self.seed}")
        super().__post_init__()


# Choices of the machine a run happens on, not of the model: a model directory records their
# defaults (its config.yaml rebuilds the network anywhere; the run directory keeps what was used).
RUNTIME_TRAIN_KEYS = ("accelerator", "devices", "progress", "threads", "num_nodes", "strategy")
RUNTIME_BACKBONE_KEYS = ("scan_impl", "conv_impl")


def without_runtime(cfg: Any) -> Any:
    """`cfg` with the runtime choices (threads, devices, scan kernel, ...) back at their defaults."""
    defaults = type(cfg.train)()
    changes = {f"train.{k}": getattr(defaults, k) for k in RUNTIME_TRAIN_KEYS if hasattr(defaults, k)}
    overrides = getattr(cfg.model, "overrides", None)
    if overrides:
        changes["model.overrides"] = {k: v for k, v in overrides.items() if k not in RUNTIME_BACKBONE_KEYS}
    return replace(cfg, **changes)


@dataclass(frozen=True)
class SampleConfig:
    sampler: str = "ancestral"
    steps: int = 128
    num: int = 4
    length: int = 256
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunConfig:
    name: str = "run"
    out_dir: str = "runs"
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    sample: SampleConfig = field(default_factory=SampleConfig)
    # how `dnadiff design-finetune` made this model (method, reward, kl_weight, pretrained, settings); else empty
    reward_finetune: dict[str, Any] = field(default_factory=dict)
    # how `dnadiff distill` made this student (method, teacher, teacher_steps, steps, settings); else empty
    distill: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- machinery
# OmegaConf does the work: the schema comes from the dataclasses (`OmegaConf.structured`), files and
# overrides are merged onto it (`merge`, `from_dotlist`), which type-checks and converts every value;
# here its exceptions become one line naming the dotted key, and the result is built back into the
# frozen dataclasses (whose __post_init__ checks the ranges).

MAX_STRING = 4096  # the longest path a file system accepts


def _schema(cls: type) -> Any:
    from omegaconf import DictConfig, OmegaConf

    def writable(n: Any) -> None:  # the dataclasses are frozen; their schema is filled in first
        OmegaConf.set_readonly(n, False)
        for k in n.keys():
            child = n._get_node(k)
            if isinstance(child, DictConfig):
                writable(child)
            elif OmegaConf.is_config(child):
                OmegaConf.set_readonly(child, False)

    node = OmegaConf.structured(cls)
    writable(node)
    return node


def _merge_into(node: Any, data: Any, key: str) -> None:
    """Merge plain `data` into the structured OmegaConf `node` (in place); errors name the key."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

    cls = OmegaConf.get_type(node)
    if not isinstance(data, dict):
        raise DnadiffError(f"{key or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls) if dataclasses.is_dataclass(cls) else {}
    for k, v in data.items():
        full = f"{key}.{k}" if key else str(k)
        if hints and k not in hints:
            raise DnadiffError(f"unknown config key {full} (valid keys here: {', '.join(sorted(hints))})")
        _check_strings(v, full)
        child = node._get_node(k) if k in node else None
        if isinstance(child, DictConfig) and dataclasses.is_dataclass(OmegaConf.get_type(child)) and v is not None:
            _merge_into(child, v, full)
            continue
        try:
            node.merge_with({k: v})
        except ConfigKeyError as exc:  # a key nested in a mapping-typed field
            raise DnadiffError(f"unknown config key {exc.full_key or full}") from None
        except OmegaConfBaseException:
            raise DnadiffError(wrong_type(full, hints.get(k, Any), v)) from None


def _check_strings(value: Any, key: str) -> None:
    if isinstance(value, str):
        _check(len(value) <= MAX_STRING, key, f"a {len(value):,}-character string (at most {MAX_STRING:,})")
        _check(not _RESOLVER.search(value), key,
               f"resolver interpolation {value!r} is not allowed (only ${{a.b}} references)")
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_strings(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_strings(v, f"{key}[{i}]")


def _build(cls: type, data: dict[str, Any]) -> Any:
    """Plain (validated, converted) dict -> frozen dataclass `cls`, nested sections included."""
    hints = typing.get_type_hints(cls)
    return cls(**{k: _build(hints[k], v) if dataclasses.is_dataclass(hints[k]) else v for k, v in data.items()})


def _to_object(cls: type, node: Any) -> Any:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        data = OmegaConf.to_container(node, resolve=True)  # ${a.b} references between keys
    except OmegaConfBaseException as exc:
        where = f"{exc.full_key}: " if getattr(exc, "full_key", None) else ""
        raise DnadiffError(f"{where}{str(exc).splitlines()[0]}") from None
    return _build(cls, data)


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build dataclass `cls` from a plain dict; unknown keys and wrong types raise DnadiffError."""
    node = _schema(cls)
    _merge_into(node, data, prefix.rstrip("."))
    return _to_object(cls, node)


def to_dict(obj: Any) -> Any:
    """Dataclass -> plain dict (tuples become lists), suitable for YAML."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


_RESOLVER = re.compile(r"\$\{[^}]*:")  # ${name:args}: an OmegaConf resolver call (oc.env, oc.decode, ...)


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """['train.lr=1e-3', 'model.preset=tiny'] -> nested dict (OmegaConf.from_dotlist: YAML values)."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    out = OmegaConf.create({})
    for item in overrides:
        if "=" not in item:
            raise DnadiffError(f"override {item!r}: expected key=value")
        key, _, value = item.partition("=")
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise DnadiffError(f"override {item!r}: empty key")
        if value.strip():
            try:
                _bounded_safe_load(value, f"override {key}")
            except DnadiffError as exc:
                if "invalid YAML" not in str(exc):
                    raise
                value = repr(value)  # not YAML: the text as typed
        try:
            out.merge_with(OmegaConf.from_dotlist([f"{key}={value}"]))
        except OmegaConfBaseException:
            raise DnadiffError(f"override {item!r}: {key.rpartition('.')[0]} is not a section") from None
        except yaml.YAMLError as exc:  # OmegaConf's YAML loader is stricter (e.g. duplicate keys)
            raise DnadiffError(f"override {item!r}: invalid YAML ({str(exc).splitlines()[0]})") from None
    return OmegaConf.to_container(out)


CONFIG_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")


def resolve_config_path(path: str | os.PathLike) -> str:
    """A file path as is, else a name under the shipped configs/ (`experiments/tiny_dna_mdlm`)."""
    path = str(path)
    if os.path.isfile(path):
        return path
    for candidate in (os.path.join(CONFIG_ROOT, path), os.path.join(CONFIG_ROOT, path + ".yaml")):
        if os.path.isfile(candidate):
            return candidate
    if os.path.isdir(path):
        from dnadiff.utils import not_found

        raise DnadiffError(not_found(path, "config file"))
    raise DnadiffError(f"{path}: config file not found{closest_configs(path)}")


def closest_configs(name: str) -> str:
    """For a config name that is no file: the closest names `dnadiff configs` lists (difflib), as a hint."""
    import difflib

    names = sorted(os.path.relpath(os.path.join(d, f), CONFIG_ROOT)[:-5] for d, _, files in os.walk(CONFIG_ROOT)
                   for f in files if f.endswith(".yaml"))
    typed = str(name)[:-5] if str(name).endswith(".yaml") else str(name)
    close = difflib.get_close_matches(typed, names, n=3, cutoff=0.6)
    by_base = {}
    for n in names:  # `tiny_dna_mdlm` for experiments/tiny_dna_mdlm: compare the last part alone too
        by_base.setdefault(os.path.basename(n), []).append(n)
    for base in difflib.get_close_matches(os.path.basename(typed), list(by_base), n=3, cutoff=0.6):
        close += [n for n in by_base[base] if n not in close]
    return (f"; closest shipped configs: {', '.join(close[:3])} (`dnadiff configs` lists them all)" if close
            else " (`dnadiff configs` lists the shipped configs)")


def _read_yaml(path: str) -> dict[str, Any]:
    try:
        if os.path.getsize(path) > MAX_CONFIG_BYTES:  # refuse before reading a huge file into memory
            raise DnadiffError(f"{path}: {os.path.getsize(path):,} bytes is too large for a config "
                               f"(at most {MAX_CONFIG_BYTES:,})")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        raise DnadiffError(f"{path}: not a text (UTF-8) YAML file") from None
    except OSError as exc:
        raise DnadiffError(f"{path}: cannot read ({exc.strerror})") from None
    data = _bounded_safe_load(text, path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DnadiffError(f"{path}: the top level must be a mapping of keys")
    try:
        _check_strings(data, "")
    except DnadiffError as exc:
        raise DnadiffError(f"{path}: {exc}") from None
    return data


def _group_file(group: str, name: str, near: str | None) -> str:
    """`model=caduceus_tiny` -> configs/model/caduceus_tiny.yaml (beside the config's folder first)."""
    roots = ([os.path.dirname(os.path.dirname(os.path.abspath(near)))] if near else []) + [CONFIG_ROOT]
    for root in roots:
        for candidate in (os.path.join(root, group, name), os.path.join(root, group, name + ".yaml")):
            if os.path.isfile(candidate):
                return candidate
    choices = sorted(f[:-5] for f in os.listdir(os.path.join(CONFIG_ROOT, group)) if f.endswith(".yaml"))
    raise DnadiffError(f"{group}={name}: no config {group}/{name}.yaml (choose one of: {', '.join(choices)})")


def config_groups() -> list[str]:
    """The config group folders (`model`, `objective`, `data`, `train`, `sampler`, ...)."""
    return sorted(d for d in os.listdir(CONFIG_ROOT) if os.path.isdir(os.path.join(CONFIG_ROOT, d)))


def _default_group(entry: str) -> str:
    return os.path.basename(os.path.dirname(os.path.normpath(str(entry))))


def load_yaml_tree(path: str | os.PathLike, _seen: tuple[str, ...] = (),
                   groups: dict[str, str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """A YAML config as the list of (file, mapping) to merge, in order: the files listed under its
    `defaults:` key (names relative to the file's folder or the shipped configs/), then the file.
    The file of each mapping names it in the errors of merging (an unknown key, a wrong type).

    `groups` ({"model": "caduceus_tiny"}, the command line's group selections) replaces the
    defaults of the same group folder and goes after the file itself."""
    path = resolve_config_path(path)
    if path in _seen:
        raise DnadiffError(f"{path}: `defaults` include cycle")
    data = _read_yaml(path)
    defaults = data.pop("defaults", None) or []
    if not isinstance(defaults, list):
        raise DnadiffError(f"{path}: `defaults` must be a list of config names")
    layers: list[tuple[str, dict[str, Any]]] = []
    for name in defaults:
        if groups and _default_group(name) in groups:
            continue  # replaced by the command line's selection
        local = os.path.join(os.path.dirname(path), str(name))
        target = local if os.path.isfile(local) or os.path.isfile(local + ".yaml") else str(name)
        if not os.path.isfile(target) and os.path.isfile(target + ".yaml"):
            target += ".yaml"
        layers += load_yaml_tree(target, _seen + (path,))
    layers.append((path, data))
    for group, name in (groups or {}).items():
        layers += load_yaml_tree(_group_file(group, name, path), _seen + (path,))
    return layers


def _split_groups(overrides: list[str]) -> tuple[dict[str, str], list[str]]:
    """`model=caduceus_tiny` (a group folder name = a config name) apart from dotted overrides."""
    groups: dict[str, str] = {}
    rest: list[str] = []
    names = set(config_groups())
    for item in overrides:
        key, eq, value = item.partition("=")
        if eq and key.strip() in names and value.strip() and not value.strip().startswith(("{", "[")):
            groups[key.strip()] = value.strip()
        else:
            rest.append(item)
    return groups, rest


def load_config(cls: type, path: str | os.PathLike | None, overrides: list[str] | None = None,
                resolve_paths: bool = True, check: Callable[[Any], Any] | None = None) -> Any:
    """YAML file (or none) + group selections + overrides -> frozen dataclass `cls`.

    `model=caduceus_tiny` (a folder of the shipped configs/ = a file in it) merges that file after
    the config (replacing a default of the same group); dotted `key=value` overrides come last.
    With `resolve_paths`, the relative data paths of the config file (and of the defaults) are
    made absolute against the data root (see `data_root`); paths given as overrides stay relative
    to the current directory, like any path typed on a command line. `check(obj) -> obj` runs on the
    built config before the paths are resolved (config_options.check_options: the registries' options).
    """
    groups, dotted = _split_groups(list(overrides or []))
    given = parse_overrides(dotted)
    if path is not None:
        layers = load_yaml_tree(path, groups=groups)
        if not any(data for _, data in layers):  # an empty file is a mistake, not "all defaults" (a 1000-step run)
            raise DnadiffError(f"{path}: empty config file (no keys)")
    else:
        layers = [layer for g, n in groups.items() for layer in load_yaml_tree(_group_file(g, n, None))]
    node = _schema(cls)
    for source, layer in layers:
        try:
            _merge_into(node, layer, "")
        except DnadiffError as exc:  # name the file the key or value came from
            raise DnadiffError(f"{source}: {exc}") from None
    _merge_into(node, given, "")
    obj = _to_object(cls, node)
    if check is not None:  # the registries' option schemas: config_options.load_config passes its check_options
        obj = check(obj)
    return _absolute_init_from(_resolve_data_paths(obj, given)) if resolve_paths else obj


def _absolute_init_from(obj: Any) -> Any:
    """`model.init_from` naming a local folder, made absolute (from the current directory, where a path typed
    on the command line is read): the run's config.yaml then names the model it started from wherever it is
    read. A Hub id (org/name, no such local folder) stays as given."""
    model = getattr(obj, "model", None)
    init = getattr(model, "init_from", None)
    if not isinstance(init, str) or not init or not os.path.exists(os.path.expanduser(init)):
        return obj
    path = os.path.abspath(os.path.expanduser(init))
    return obj if path == init else replace(obj, **{"model.init_from": path})


def save_config(obj: Any, path: str | os.PathLike) -> None:
    import yaml

    from dnadiff.utils import atomic_write

    atomic_write(path, yaml.safe_dump(to_dict(obj), sort_keys=False))


def replace(obj: Any, **changes: Any) -> Any:
    """dataclasses.replace for nested dotted keys: replace(cfg, **{"train.lr": 1e-3})."""
    nested: dict[str, Any] = {}
    for key, value in changes.items():
        head, _, rest = key.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            nested[head] = value
    kwargs = {}
    for head, value in nested.items():
        if isinstance(value, dict) and dataclasses.is_dataclass(getattr(obj, head)):
            kwargs[head] = replace(getattr(obj, head), **value)
        else:
            kwargs[head] = value
    return dataclasses.replace(obj, **kwargs)


__all__ = ["RunConfig", "TrainConfig", "TrainerConfig", "ModelConfig",
           "ObjectiveConfig", "DataConfig", "SampleConfig", "ScheduleConfig", "TokenizerConfig",
           "CONFIG_ROOT", "load_config", "save_config", "replace", "to_dict", "from_dict", "parse_overrides",
           "resolve_config_path", "config_groups", "without_runtime"]
