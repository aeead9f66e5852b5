"""Which models pipelines/genomic_benchmarks_table.py fine-tunes: --init NAME=PATH, the DNA perplexity
pipeline's models (or its --dry-run stand-ins), or an earlier run's (--only-baselines); and the scratch row's
architecture, copied from one of them with fresh weights."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "runs"  # pipelines/dna_perplexity.py --scale S writes runs/dna_perplexity_S/
# tab. 7 rows -> the DNA perplexity pipeline's run keys (seed 0 of each): MLM-pretrained Caduceus, the
# same model fine-tuned with MDLM, the AR baseline (Mamba) and Plaid (issue 48: the Caduceus-PH its
# plaid_caduceus row trained, taken out of the Plaid network by `dnadiff finetune`, Plaid's embeddings and
# schedule dropped: a Caduceus in every Caduceus column, as tab. 7)
DEFAULT_INITS = {"mlm": "caduceus_mlm", "mdlm": "caduceus_mdlm", "ar": "mamba_ar", "plaid": "plaid_caduceus"}


def parse_inits(items: list[str]) -> dict[str, str]:
    from dnadiff.errors import DnadiffError

    out: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise DnadiffError(f"--init {item!r}: expected NAME=PATH")
        if name == "scratch":
            raise DnadiffError("--init: the name 'scratch' is reserved (it is added automatically)")
        if not Path(path).is_dir():
            raise DnadiffError(f"--init {name}: {path} is not a model directory")
        out[name] = path
    return out


def _is_model_dir(p: Path) -> bool:
    return p.is_dir() and ((p / "config.yaml").is_file() or (p / "config.json").is_file())


def discover_inits(root: Path) -> dict[str, str]:
    """The DNA perplexity pipeline's models (DEFAULT_INITS, seed 0) under `root` when present,
    else every model directory (NAME/ or NAME/model/) directly under `root`, by folder name."""
    if not root.is_dir():
        return {}
    known = {name: root / f"{key}_seed0" / "model" for name, key in DEFAULT_INITS.items()}
    found = {name: str(p) for name, p in known.items() if _is_model_dir(p)}
    if found:
        return found
    out = {}
    for p in sorted(root.iterdir()):
        if _is_model_dir(p):
            out[p.name] = str(p)
        elif _is_model_dir(p / "model"):
            out[p.name] = str(p / "model")
    return out


def scratch_overrides(init_path: str) -> list[str]:
    """Config overrides that rebuild the architecture of a model directory with fresh weights."""
    from dnadiff.checkpoint import load_backbone

    name, backbone = load_backbone(init_path)
    fields = dataclasses.asdict(backbone.config)
    import yaml

    # YAML flow style, not JSON: YAML 1.1 reads JSON's 1e-05 as a string, yaml.safe_dump writes 1.0e-05
    flow = yaml.safe_dump(fields, default_flow_style=True, width=10**9).strip()
    return [f"model.backbone={name}", f"model.overrides={flow}", "model.init_from=null"]


def pick_scratch_architecture(inits: dict[str, str]) -> str | None:
    """The init whose architecture the scratch row copies: the first bidirectional one (else the first)."""
    from dnadiff.checkpoint import load_backbone

    for name, path in inits.items():
        if not getattr(load_backbone(path)[1], "is_causal", False):
            return name
    return next(iter(inits), None)


def load_prior(out_stem: Path, option: str = "--only-baselines") -> dict:
    """The results JSON an earlier full run wrote (its rows are kept by --only-baselines, but the k-mer LR's, and
    by --add-inits, but the added inits')."""
    from dnadiff.errors import DnadiffError

    f = Path(str(out_stem) + ".json")
    if not f.is_file():
        raise DnadiffError(f"{option}: {f} not found (run the full pipeline once first)")
    try:
        prior = json.loads(f.read_text())
        prior["table"], prior["cells"], prior["inits"], prior["datasets"]  # noqa: B018  (the keys it needs)
    except (json.JSONDecodeError, KeyError, TypeError):
        raise DnadiffError(f"{option}: {f} is not a results file of this pipeline") from None
    return prior


def make_dry_run_inits(root: Path, scale: str) -> dict[str, str]:
    """Stand-ins for DEFAULT_INITS: the DNA perplexity pipeline's --dry-run models at this scale."""
    import dna_perplexity

    from dnadiff.errors import DnadiffError

    only = ",".join(DEFAULT_INITS.values())
    if dna_perplexity.main(["--scale", scale, "--dry-run", "--out-dir", str(root), "--only", only, "--no-markov"]):
        raise DnadiffError("--dry-run: the DNA perplexity pipeline's dry run failed")
    return discover_inits(root)


def choose_inits(args, out_stem: Path, dry_root: Path | None) -> tuple[dict | None, dict[str, str]]:
    """The initialisations to fine-tune (and, with --only-baselines, the earlier run they come from)."""
    from dnadiff.errors import DnadiffError

    if args.only_baselines and (dry_root is not None or args.no_kmer_lr):
        raise DnadiffError("--only-baselines runs the k-mer LR row: not with --dry-run or --no-kmer-lr")
    if args.add_inits and args.only_baselines:
        raise DnadiffError("--add-inits and --only-baselines: one at a time")
    if args.only_baselines:
        prior = load_prior(out_stem)
        return prior, prior["inits"]
    if args.add_inits:
        if not args.init or dry_root is not None:
            raise DnadiffError("--add-inits adds the --init NAME=PATH rows to a stored table: give --init, not "
                               "with --dry-run")
        return load_prior(out_stem, "--add-inits"), parse_inits(args.init)
    if args.init:
        return None, parse_inits(args.init)
    if dry_root is not None:
        return None, make_dry_run_inits(dry_root / "models", args.scale)
    return None, discover_inits(Path(args.models_dir or RUNS / f"dna_perplexity_{args.scale}"))
