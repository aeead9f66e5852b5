"""`dnadiff configs [FILTER]`: the shipped configs with their one-line descriptions."""

from __future__ import annotations

import argparse

HELP = "list the shipped configs with a one-line description each"
DESCRIPTION = """List the YAML configs shipped with the package (any of them is a CONFIG of
`dnadiff train` / `dnadiff finetune`, named without its .yaml):

  dnadiff configs                          # all of them
  dnadiff configs text                     # those whose name contains "text"
  dnadiff configs experiments/tiny_finetune --print-config   # one config, fully resolved

Relative data paths in a config resolve against the data root: data.root, else $DNADIFF_DATA,
else the small real data bundled with the package."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("filter", nargs="?", default=None,
                   help="show only configs whose name contains this text (with --print-config: one config name)")


MAX_DESCRIPTION = 100  # characters; longer first sentences are cut at a word


def describe(path: str) -> str:
    """The first sentence of a config file's leading comment block, on one line."""
    import re

    lines = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith("#"):
                break
            lines.append(line.lstrip("#").strip())
    text = " ".join(s for s in lines if s)
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
    from dnadiff.errors import DnadiffError

    rows = [(n, d) for n, d in shipped_configs() if not args.filter or args.filter in n]
    if not rows:
        raise DnadiffError(f"no shipped config name contains {args.filter!r} (run `dnadiff configs` for the list)")
    width = max(len(n) for n, _ in rows)
    for name, text in rows:
        print(f"{name:<{width}}  {text}")
    return 0


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: the named config, resolved (a run config, or a fine-tuning config)."""
    from dnadiff.config import RunConfig, load_config, to_dict
    from dnadiff.errors import DnadiffError
    from dnadiff.heads.config import FinetuneConfig

    if not args.filter:
        raise DnadiffError("--print-config needs a config name, e.g. dnadiff configs experiments/tiny_dna_mdlm --print-config")
    try:
        return to_dict(load_config(RunConfig, args.filter))
    except DnadiffError as first:
        try:
            return to_dict(load_config(FinetuneConfig, args.filter))
        except DnadiffError:
            raise first from None
