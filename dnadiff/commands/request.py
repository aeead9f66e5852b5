"""What `dnadiff sample` and `dnadiff design` share: the request a user typed, checked before the
model is loaded (counts, prefix/suffix/template, output paths), then the one model load, the
length and the template; and the formats of the sample files.

    req = Request.checked(args)         # counts, prefix/suffix/template flags; nothing loaded
    req.load_config()                   # the path resolved once (req.source); its config (None: official)
    req.resolve_outputs("dna")          # OUT and OUT.json
    req.reserve_outputs()               # free (or --force) and writable
    req.read_templates()                # --template-fasta records
    model = req.load_model()            # once, in eval mode
    length = req.length(model)
    template = req.template(model, length)
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from dnadiff.errors import DnadiffError


def check_prefix_suffix(args: argparse.Namespace) -> None:
    """--prefix/--suffix are DNA (N: a position to fill), checked before any model is loaded."""
    from dnadiff.tokenizers import DNATokenizer

    for flag, seq in (("--prefix", args.prefix), ("--suffix", args.suffix)):
        if seq:
            DNATokenizer().encode_array(seq, where=flag)


def format_samples(records: list[tuple[str, str]], kind: str, path: str | None) -> str:
    """FASTA for DNA; for text, JSONL (stdout or .jsonl) or plain text blocks (.txt)."""
    import json

    if kind == "dna":
        from dnadiff.data.records import format_fasta

        return format_fasta(records)
    if path is not None and path.lower().endswith(".txt"):
        return "".join(f"### {name}\n{text}\n\n" for name, text in records)
    return "".join(json.dumps({"id": name.partition(" ")[0], "description": name.partition(" ")[2], "text": text},
                              ensure_ascii=False) + "\n" for name, text in records)


def diffusion_dna(cfg) -> bool:
    """Whether a model's config is a diffusion DNA generator (what guidance needs): a DNA tokenizer and an
    objective that generates, not left to right (masked or uniform noise)."""
    from dnadiff.diffusion import OBJECTIVES

    name = cfg.objective.name
    objective = OBJECTIVES.get(name) if name in OBJECTIVES else None
    return cfg.tokenizer.kind == "dna" and (objective is None or (objective.generator and not objective.autoregressive))


def masked_diffusion_dna(cfg) -> bool:
    """A diffusion DNA generator with masking noise (what reward fine-tuning's samplers need; not udlm)."""
    from dnadiff.diffusion import OBJECTIVES

    name = cfg.objective.name
    return diffusion_dna(cfg) and (name not in OBJECTIVES or OBJECTIVES.get(name).noise == "mask")


@dataclasses.dataclass
class Request:
    """One sample/design run: the arguments, checked, and what was resolved from them so far."""

    args: argparse.Namespace
    cfg: Any = None  # the model directory's RunConfig; None: an official checkpoint (or not read yet)
    out: str | None = None
    stats_path: str | None = None
    template_records: list | None = None
    model: Any = None
    source: Any = None  # the model path resolved once (modelio.ModelSource): the config and the model read it

    @classmethod
    def checked(cls, args: argparse.Namespace) -> "Request":
        """The checks of the numbers and the prefix/suffix/template flags (nothing is loaded)."""
        if args.num <= 0:
            raise DnadiffError(f"--num must be positive, got {args.num}")
        first = getattr(args, "first_index", None)
        if first is not None and first < 0:
            raise DnadiffError(f"--first-index must be >= 0, got {first}")
        for flag, value in (("--length", args.length), ("--steps", args.steps), ("--batch-size", args.batch_size)):
            if value is not None and value <= 0:
                raise DnadiffError(f"{flag} must be positive, got {value}")
        if args.prefix == "" or args.suffix == "":
            raise DnadiffError("--prefix/--suffix: empty sequence")
        if args.template_fasta and (args.prefix or args.suffix):
            raise DnadiffError("--template-fasta excludes --prefix/--suffix")
        return cls(args)

    @property
    def fixes_tokens(self) -> bool:
        """Whether the user fixed tokens (--prefix/--suffix/--template-fasta)."""
        return bool(self.args.prefix or self.args.suffix or self.args.template_fasta)

    def load_config(self):
        """The model directory's config (official checkpoints have none: None); the path is resolved here,
        once, into `self.source`, which `load_model` reads."""
        self.cfg = self.model_source().config
        return self.cfg

    def model_source(self):
        """The model path resolved (a folder or a cached Hub id, its format detected), once per request."""
        if self.source is None:
            from dnadiff.modelio import resolve

            self.source = resolve(self.args.model_dir)
        return self.source

    @property
    def kind(self) -> str:
        return self.cfg.tokenizer.kind if self.cfg is not None else "dna"

    @property
    def objective(self):
        """The objective class the model was trained with (None: unknown before loading)."""
        from dnadiff.diffusion import OBJECTIVES

        name = self.cfg.objective.name if self.cfg is not None else None
        return OBJECTIVES.get(name) if name in OBJECTIVES else None

    def resolve_outputs(self, kind: str) -> tuple[str | None, str | None]:
        """(--out, its statistics JSON) for a model of tokenizer `kind`; (None, None): stdout."""
        from dnadiff.sampling import output_paths  # torch-free callers of this module import no sampler

        self.out, self.stats_path = output_paths(self.args.out, kind)
        return self.out, self.stats_path

    def reserve_outputs(self) -> None:
        """A killed earlier run's pair finished, an existing output refused unless --force, the folder
        writable: before the model is loaded, not after minutes of work."""
        from dnadiff.commands.checks import check_writable
        from dnadiff.utils import recover_together, refuse_existing

        if self.out is not None:
            recover_together([self.out, self.stats_path])  # finish a killed run's pair, drop its temp files
            refuse_existing([self.out, self.stats_path], self.args.force)
            check_writable(self.out)

    def read_templates(self, first_index: int = 0) -> list | None:
        """--template-fasta's records; record I takes template I (cycled), whatever index the run starts at."""
        from dnadiff.data.records import read_fasta

        records = read_fasta(self.args.template_fasta) if self.args.template_fasta else None
        if records and first_index:
            k = first_index % len(records)
            records = records[k:] + records[:k]
        self.template_records = records
        return records

    def model_spec(self):
        """The model without its network (model.ModelSpec: config, tokenizer, schedule, objective), from the config
        alone; None for an official checkpoint (its config is built when the checkpoint is read)."""
        if self.cfg is None:
            return None
        from dnadiff.model import ModelSpec
        from dnadiff.modelio.model_dir import naming, tokenizer_from_config

        path = self.model_source().path
        try:
            return ModelSpec(self.cfg, tokenizer_from_config(self.cfg, path))
        except DnadiffError as exc:  # as the loader names them
            raise naming(exc, path) from None

    def load_model(self):
        """The model, loaded once (in eval mode, as every loader sets it)."""
        if self.model is None:
            from dnadiff.checkpoint import load_for_inference

            self.model = load_for_inference(self.model_source())
        return self.model

    def length(self, model) -> int:
        length = self.args.length or model.config.sample.length
        if length <= 0:
            raise DnadiffError(f"--length must be positive, got {length}")
        return length

    def template(self, model, length: int):
        """Long[num, length] template (mask id at the positions to fill), or None (all free)."""
        from dnadiff.samplers import build_template

        return build_template(model.tokenizer, self.args.num, length, self.args.prefix, self.args.suffix,
                              self.template_records, source=self.args.template_fasta)


__all__ = ["Request", "check_prefix_suffix", "diffusion_dna", "format_samples", "masked_diffusion_dna"]
