"""Class names and their aliases: one name printed, every spelling a user may type accepted.

The DHS table's embryonic stem cell sample is `hESCT0_ENCLB449ZZZ` (hESC at time point 0, DNA-Diffusion's
tag); dnadiff names the cell type `hESC`, as the README and the papers do. Model and classifier
directories written before that name was chosen record `hESCT0`: a class is looked up by its canonical
name, so `--class hESC` finds it there, and `--class hESCT0` finds `hESC` in a new one.
"""

from __future__ import annotations

from collections.abc import Sequence

ALIASES = {"hESCT0": "hESC"}  # a spelling accepted -> the name printed


def canonical(name: str) -> str:
    """The name dnadiff prints for a class spelt `name` (itself when it has no alias)."""
    return ALIASES.get(str(name), str(name))


def class_position(label: str, names: Sequence[str]) -> int | None:
    """The index of class `label` in `names` (exact spelling first, then through the aliases); None when absent."""
    names = [str(n) for n in names]
    if label in names:
        return names.index(label)
    wanted = canonical(label)
    matches = [i for i, n in enumerate(names) if canonical(n) == wanted]
    return matches[0] if len(matches) == 1 else None


def known_names(names: Sequence[str]) -> str:
    """The classes of a model as the user may type them: `GM12878, ..., hESC`."""
    return ", ".join(canonical(n) for n in names)


__all__ = ["ALIASES", "canonical", "class_position", "known_names"]
