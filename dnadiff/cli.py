"""`dnadiff` command line: subcommands map to functions in dnadiff/commands/; no logic here.

Errors the user can fix (DnadiffError) print `error: <message>` on one line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable

from dnadiff.errors import DnadiffError

# name -> module under dnadiff.commands (every one must import: a broken command is an error)
SUBCOMMANDS = ["train", "eval", "sample", "finetune", "metrics", "demo", "configs", "design", "design-finetune",
               "distill", "compare", "data", "edit"]
# the commands that compute: each takes --threads (dnadiff/threads.py), applied once at start
COMPUTE_COMMANDS = ("train", "eval", "sample", "finetune", "metrics", "demo", "design", "design-finetune",
                    "distill", "edit")
THREADS_HELP = ("CPU threads of this process (torch intra- and inter-op, numba; an explicit N is also exported as "
                "OMP/MKL_NUM_THREADS to child processes). Default: OMP_NUM_THREADS when set, else the free "
                "physical cores at start "
                "(cores minus the 1-minute load average, at least 1), so a busy machine gets 1 thread: on a busy "
                "2-core machine torch's own default of 2 threads made sampling 9x slower than 1. "
                "train/finetune/demo: sets train.threads, which a config may also set")


def _registry_lists() -> dict[str, Callable[[], str]]:
    """Placeholders of the commands' help texts -> their text, from the registries (a new sampler,
    reward or guidance method shows up in --help without an edit here)."""
    def samplers(**declared) -> str:
        from dnadiff.samplers import SAMPLERS

        return ", ".join(SAMPLERS.where(**declared))

    def methods() -> str:
        from dnadiff.guidance import METHODS

        return " | ".join(METHODS.names())

    def rewards() -> str:
        from dnadiff.guidance.rewards import reward_specs

        return reward_specs()

    return {"{samplers}": lambda: samplers(autoregressive=False),
            "{ar_samplers}": lambda: samplers(autoregressive=True),
            "{stepless_samplers}": lambda: samplers(has_steps=False, autoregressive=False),
            "{guidable_samplers}": lambda: samplers(guidable=True), "{methods}": methods, "{rewards}": rewards}


def fill_lists(text: str) -> str:
    for key, value in _registry_lists().items():
        if key in text:
            text = text.replace(key, value())
    return text


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Fills the registry lists (`{samplers}`, `{methods}`, ...) into help texts when help is shown,
    not when the parser is built: the registries import torch, which parsing does not need."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(fill_lists(text))

    def _get_help_string(self, action: argparse.Action) -> str:
        return fill_lists(super()._get_help_string(action) or "")


def build_parser() -> argparse.ArgumentParser:
    from dnadiff import __version__

    parser = argparse.ArgumentParser(
        prog="dnadiff",
        description="Masked diffusion language models (MDLM) for DNA and text: train, evaluate, sample, fine-tune.",
        epilog="Run `dnadiff COMMAND --help` for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"dnadiff {__version__}")
    verbosity = argparse.ArgumentParser(add_help=False)
    group = verbosity.add_argument_group("messages")
    group.add_argument("-q", "--quiet", action="count", default=0,
                       help="only warnings and errors on stderr, no progress bars")
    group.add_argument("-v", "--verbose", action="count", default=0, help="more detail on stderr (debug messages)")
    compute = argparse.ArgumentParser(add_help=False)
    compute.add_argument_group("compute").add_argument("--threads", type=thread_count, default=None, metavar="N",
                                                       help=THREADS_HELP)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"dnadiff.commands.{name.replace('-', '_')}")
        sub = subs.add_parser(
            name,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            formatter_class=HelpFormatter,
            parents=[verbosity, compute] if name in COMPUTE_COMMANDS else [verbosity],
            usage=getattr(module, "USAGE", None),
        )
        module.add_arguments(sub)
        sub.add_argument("--print-config", action="store_true",
                         help="print the fully resolved config (YAML: file, defaults, overrides, data root) and exit")
        sub.set_defaults(_run=module.run, _resolved=getattr(module, "resolved_config", None), _parser=sub,
                         _preflight=getattr(module, "preflight", None))
    return parser


def thread_count(text: str) -> int:
    """--threads N: a positive whole number (argparse reports anything else as a usage error)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive number of threads, got {text!r}")
    return value


def start_threads(args: argparse.Namespace) -> None:
    """Apply the thread count of a computing command once, before it starts (dnadiff/threads.py).

    An explicit --threads also goes to the children's environment and, for the commands that
    train, into the run's config as train.threads (which the run applies and records)."""
    import os

    from dnadiff.threads import apply_threads, choose_threads

    threads = getattr(args, "threads", None)
    if args.command not in COMPUTE_COMMANDS:
        return
    if threads is not None and hasattr(args, "overrides"):  # train, finetune, demo
        args.overrides = list(args.overrides or []) + [f"train.threads={threads}"]
    if not getattr(args, "print_config", False):
        apply_threads(choose_threads(threads), os.environ if threads is not None else None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and not argv[0].startswith("-") and argv[0] not in SUBCOMMANDS:  # before argparse's usage dump
        print(f"error: {unknown_command(argv[0])}", file=sys.stderr)
        return 2
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # key=value overrides may also come after options (`dnadiff train CFG --resume train.lr=1e-3`)
    if extra:
        if hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
            args.overrides = list(args.overrides or []) + extra
        else:
            unrecognized(getattr(args, "_parser", None) or parser, extra, getattr(args, "command", None))
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    if hasattr(args, "config") and args.config is None:  # train/finetune: an optional positional, explained here
        args._parser.error("CONFIG is required: a YAML file or a shipped config name (e.g. experiments/tiny_dna_mdlm); "
                        "key=value overrides after it are optional")
    from dnadiff.logs import setup_logging

    setup_logging(getattr(args, "verbose", 0) - getattr(args, "quiet", 0))
    try:
        if getattr(args, "_preflight", None) and not getattr(args, "print_config", False):
            args._preflight(args)  # destinations, arguments, file headers: before torch (commands/preflight.py)
        start_threads(args)
        if getattr(args, "print_config", False):
            return print_config(args)
        return int(args._run(args) or 0)
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a fault of the machine (read-only folder, full disk) rather than a bug: one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or type(exc).__name__}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def unknown_command(word: str) -> str:
    """`dnadiff trian`: the closest command, or the list of them."""
    import difflib

    close = difflib.get_close_matches(word, SUBCOMMANDS, n=1, cutoff=0.6)
    if close:
        return f"unknown command {word!r}; did you mean {close[0]!r}?"
    return f"unknown command {word!r}; the commands: {', '.join(SUBCOMMANDS)} (dnadiff --help says what each does)"


OVERRIDE_COMMANDS = ("train", "demo", "finetune")  # the commands that take key=value config overrides


def config_class(command: str) -> type:
    """The config dataclass whose keys `command` takes as overrides."""
    if command == "finetune":
        from dnadiff.classifier_tuning.config import FinetuneConfig

        return FinetuneConfig
    from dnadiff.config import RunConfig

    return RunConfig


def config_keys(cls: type, prefix: str = "") -> list[str]:
    """The dotted keys of a config dataclass (`train.max_steps`, `data.seq_len`, ...)."""
    import dataclasses
    import typing

    keys = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints.get(f.name)
        if dataclasses.is_dataclass(tp):
            keys += config_keys(tp, f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


def config_key_hint(command: str | None, extra: list[str], index: int) -> str | None:
    """`--max-steps 5` given to a command that takes overrides: `train.max_steps=5`, the override it
    probably means (the flag's name, dashes as underscores, is the last part of one config key)."""
    if command not in OVERRIDE_COMMANDS:
        return None
    word = extra[index]
    name, sep, value = word.lstrip("-").partition("=")
    if not sep and index + 1 < len(extra) and not extra[index + 1].startswith("-"):
        value = extra[index + 1]
    keys = config_keys(config_class(command))
    wanted = name.replace("-", "_")
    matches = [key for key in keys if key == wanted or key.rsplit(".", 1)[-1] == wanted]
    if len(matches) != 1:
        return None
    return f"{matches[0]}={value or '...'}"


def unrecognized(parser: argparse.ArgumentParser, extra: list[str], command: str | None = None) -> None:
    """Unknown arguments: the usage of the command they were given to (a subcommand's, not the top
    level's) and, for a misspelt option, the closest one it has (`--lenght` -> `--length`); for a
    flag that is a config key (`train --max-steps 5`), the override (`train.max_steps=5`). Exits 2."""
    import difflib

    options = [s for action in parser._actions for s in action.option_strings]
    hints = []
    for index, word in enumerate(extra):
        name = word.split("=", 1)[0]
        if name.startswith("-") and name not in options:
            override = config_key_hint(command, extra, index)  # an exact key before a fuzzy option (--lr)
            close = [] if override else difflib.get_close_matches(name, options, n=1, cutoff=0.6)
            hints += [(name, f"the config key {override}")] if override else [(name, close[0])] if close else []
    hint = ""
    if len(hints) == 1:
        hint = f"; did you mean {hints[0][1]}?"
    elif hints:
        hint = f"; did you mean {', '.join(f'{b} for {a}' for a, b in hints)}?"
    parser.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


def print_config(args: argparse.Namespace) -> int:
    """`--print-config`: what the command would run with, as YAML on stdout; nothing is run or written."""
    import yaml

    if args._resolved is None:
        raise DnadiffError(f"dnadiff {args.command}: --print-config is not available")
    from dnadiff.data_root import missing_data

    resolved = args._resolved(args)
    sys.stdout.write(yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True))
    for message in missing_data(resolved.get("data") or {}):  # a shared-data config without its data
        print(f"warning: {message}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # python -m dnadiff.cli
    sys.exit(main())


__all__ = ["COMPUTE_COMMANDS", "OVERRIDE_COMMANDS", "HelpFormatter", "SUBCOMMANDS", "build_parser", "config_class",
           "config_key_hint", "config_keys", "fill_lists", "main", "start_threads", "thread_count", "unknown_command",
           "unrecognized"]
