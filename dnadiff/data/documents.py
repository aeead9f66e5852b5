"""The one reader of local text corpora: training text, tokenizer training and zero-shot sets.

    for text in iter_documents("train.jsonl", field="text"): ...
    for text in iter_documents("corpus.txt", unit="paragraph"): ...

`.jsonl` (also `.jsonl.txt`): one JSON object per line, the document under `field` (blank lines
skipped). Plain text, by `unit`: "line" = every non-empty line (newline dropped); "paragraph" =
blocks separated by blank lines; "record" = every line as stored, newline kept (the Hugging Face
copies of Wikitext and PTB keep one line per record, so the concatenation is the original text).
Errors name the file and line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from dnadiff.errors import DnadiffError

UNITS = ("line", "paragraph", "record")


def is_jsonl(path: str | os.PathLike) -> bool:
    name = Path(path).name
    return name.endswith(".jsonl") or name.endswith(".jsonl.txt")


def iter_documents(path: str | os.PathLike, field: str = "text", unit: str = "line",
                   field_hint: str = "") -> Iterator[str]:
    """Documents of one local file, in file order. `field_hint` ends the missing-field error
    (e.g. "set data.text.field")."""
    if unit not in UNITS:
        raise DnadiffError(f"text unit {unit!r} is not one of {', '.join(UNITS)}")
    path = Path(path)
    if not path.is_file():
        raise DnadiffError(f"{path}: text file not found")
    hint = f" ({field_hint})" if field_hint else ""
    with open(path, encoding="utf-8") as fh:
        if is_jsonl(path):
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    raise DnadiffError(f"{path}:{n}: not valid JSON") from None
                if not isinstance(record, dict) or field not in record:
                    raise DnadiffError(f"{path}:{n}: no {field!r} field{hint}")
                yield str(record[field])
        elif unit == "record":
            yield from fh
        elif unit == "line":
            for line in fh:
                line = line.rstrip("\n")
                if line.strip():
                    yield line
        else:  # paragraphs separated by blank lines
            block: list[str] = []
            for line in fh:
                if line.strip():
                    block.append(line.rstrip("\n"))
                elif block:
                    yield "\n".join(block)
                    block = []
            if block:
                yield "\n".join(block)
