"""`dnadiff configs [FILTER]`: the shipped configs with their one-line descriptions."""

from __future__ import annotations

import argparse
import os

from dnadiff.errors import DnadiffError

HELP = "list the shipped configs with a one-line description each"
DESCRIPTION = """List the YAML configs shipped with the package (any of them is a CONFIG of
`dnadiff train` / `dnadiff finetune`, named without its .yaml):

  dnadiff configs                          # all of them
  dnadiff configs text                     # those whose name contains "text"
  dnadiff configs experiments/tiny_dna_mdlm                  # one config: its whole header comment
  dnadiff configs experiments/tiny_finetune --print-config   # one config, fully resolved

Relative data paths in a config resolve against the data root: data.root, else $DNADIFF_DATA,
else the small real data bundled with the package."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("filter", nargs="?", default=None,
                   help="show only configs whose name contains this text; a full config name prints that "
                        "config's whole header comment (with --print-config: the config, resolved)")


MAX_DESCRIPTION = 100  # characters; longer first sentences are cut at a word


def header(path: str) -> list[str]:
    """The leading comment block of a config file, one string per line, without the `#`."""
    lines = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith("#"):
                break
            text = line.rstrip("\n")[1:]
            lines.append(text[1:] if text.startswith(" ") else text.rstrip())
    return lines


def describe(path: str) -> str:
    """The first sentence of a config file's leading comment block, on one line."""
    import re

    text = " ".join(s.strip() for s in header(path) if s.strip())
    # a sentence ends at . ! ? before a capital, but not after an abbreviation ("App. D.6", "tab. 6", "et al.")
    for m in re.finditer(r"[.!?](?=\s+[A-Z(`])", text):
        if not re.search(r"\b(app|tab|fig|eq|al|e\.g|i\.e|cf|vs)\.$", text[: m.end()], re.IGNORECASE):
            text = text[: m.end()]
            break
    if len(text) > MAX_DESCRIPTION:
        text = text[: MAX_DESCRIPTION - 3].rsplit(" ", 1)[0].rstrip(",;:(") + "..."
    return text


def shipped_configs() -> list[tuple[str, str]]:
    """(name, description) of every shipped config, sorted by name."""
    from pathlib import Path

    from dnadiff.config import CONFIG_ROOT

    root = Path(CONFIG_ROOT)
    return [(str(p.relative_to(root).with_suffix("")), describe(str(p))) for p in sorted(root.rglob("*.yaml"))]


def run(args: argparse.Namespace) -> int:
    from dnadiff.logs import log

    exact = [n for n, _ in shipped_configs() if n == args.filter]
    if exact:  # one config named in full: its whole description
        from dnadiff.config import CONFIG_ROOT

        path = os.path.join(CONFIG_ROOT, exact[0] + ".yaml")
        print(f"{exact[0]}  ({path})\n")
        print("\n".join(header(path)).strip("\n") or "(no description)")
        return 0
    rows = [(n, d) for n, d in shipped_configs() if not args.filter or args.filter in n]
    if not rows:
        raise DnadiffError(f"no shipped config name contains {args.filter!r} (run `dnadiff configs` for the list)")
    width = max(len(n) for n, _ in rows)
    for name, text in rows:
        print(f"{name:<{width}}  {text}")
    if any(text.endswith("...") for _, text in rows):
        log.info("(descriptions cut with ...: `dnadiff configs NAME` prints one config's whole header)")
    return 0


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: the named config, resolved (a run config, or a fine-tuning config)."""
    from dnadiff.classifier_tuning.config import load_finetune_config
    from dnadiff.config import RunConfig, to_dict
    from dnadiff.config_options import load_config

    if not args.filter:
        raise DnadiffError("--print-config needs a config name, e.g. dnadiff configs experiments/tiny_dna_mdlm "
                           "--print-config")
    try:
        return to_dict(load_config(RunConfig, args.filter))
    except DnadiffError as first:
        try:
            return to_dict(load_finetune_config(args.filter))
        except DnadiffError:
            raise first from None
