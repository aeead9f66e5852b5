"""Templates for conditional sampling (prefix/suffix prompts, infilling): a LongTensor (num, length)
holding the fixed tokens and `mask_id` at the positions the sampler fills; every sampler keeps the
fixed tokens (samplers/base.py).

    tmpl = build_template(tok, num=4, length=200, prefix="ACGTACGT", suffix="TTTT")
    tmpl = build_template(tok, num=2, length=300, records=read_fasta("templates.fa"), source="templates.fa")
    x = model.sample(num=4, length=200, template=tmpl)

N marks a position to fill, in template records and in a prefix/suffix alike.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError


def build_template(tokenizer, num: int, length: int, prefix: str | None = None, suffix: str | None = None,
                   records: list[tuple[str, str]] | None = None, source: str = "templates") -> Tensor | None:
    """(num, length) template, or None when nothing is fixed.

    `records` [(name, sequence)] gives one template per sample (cycled over `num`; each exactly
    `length` long, `source` names them in errors); otherwise `prefix` is fixed at the start and
    `suffix` at the end of every sample."""
    if records is not None and (prefix or suffix):
        raise DnadiffError("template records exclude a prefix/suffix: give one or the other")
    if not (prefix or suffix or records):
        return None
    mask_id = tokenizer.mask_id
    n_id = getattr(tokenizer, "n_id", None)
    tmpl = torch.full((num, length), mask_id, dtype=torch.long)  # (num, length)
    if records:
        for i in range(num):
            name, seq = records[i % len(records)]
            if len(seq) != length:
                raise DnadiffError(f"{source}: template {name!r} has length {len(seq)}, the sample length is {length}")
            ids = torch.tensor(tokenizer.encode(seq, where=f"{source}: template {name!r}"))
            tmpl[i] = torch.where(ids == n_id, torch.tensor(mask_id), ids) if n_id is not None else ids
        return tmpl
    pre = tokenizer.encode(prefix, where="prefix") if prefix else []
    suf = tokenizer.encode(suffix, where="suffix") if suffix else []
    if len(pre) + len(suf) > length:
        raise DnadiffError(f"prefix and suffix ({len(pre) + len(suf)} bases) do not fit in the sample length {length}")
    if pre:
        tmpl[:, : len(pre)] = torch.tensor([mask_id if i == n_id else i for i in pre])
    if suf:
        tmpl[:, length - len(suf):] = torch.tensor([mask_id if i == n_id else i for i in suf])
    return tmpl
