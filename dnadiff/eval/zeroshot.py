"""Zero-shot perplexity of a text model on other corpora (MDLM tab. 3, app. D.5).

An OWT-trained model is evaluated on PTB, Wikitext-2, Wikitext-103, LM1B, Lambada, AG News,
PubMed and arXiv. Each set is detokenised (data/detokenizers.py), tokenised with the model's
tokenizer, concatenated with no EOS between documents and wrapped into 1,024-token blocks framed
[BOS] … [EOS] (the training layout). Only local copies are used; a set that is not present is
skipped with a message saying which files were looked for.

Local layout under `root` (first match wins; .jsonl holds one JSON object per line):

    ptb/{valid,validation,ptb.valid}.{txt,jsonl}          field "sentence"    (reference split: validation)
    wikitext2/{valid,validation,wiki.valid.tokens}...     field "text"        (validation)
    wikitext103/...                                       field "text"        (validation)
    lm1b/test.{txt,jsonl}                                 field "text"        (test)
    lambada/{test,lambada_test}.jsonl                     field "text"        (test)
    ag_news/test.{txt,jsonl}                              field "text"        (test)
    pubmed/{valid,validation}.jsonl, arxiv/...            field "article"     (validation)

`.txt` files are read line by line keeping the newlines (the Hugging Face copies of Wikitext
and PTB store one line per record), so the concatenation reproduces the original text.

    res = zero_shot_eval(dnadiff.load("runs/owt/model"), root="data/zeroshot")   # JSON-able dict
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from dnadiff.data.detokenizers import get_detokenizer
from dnadiff.data.documents import iter_documents
from dnadiff.errors import DnadiffError


@dataclass(frozen=True)
class ZeroShotSet:
    stems: tuple[str, ...]
    field: str
    detokenizer: str | None


_VALID = ("valid", "validation", "val", "dev")
ZERO_SHOT_SETS: dict[str, ZeroShotSet] = {
    "ptb": ZeroShotSet(_VALID + ("ptb.valid",), "sentence", "ptb"),
    "wikitext2": ZeroShotSet(_VALID + ("wiki.valid.tokens", "wiki.valid.raw"), "text", "wikitext"),
    "wikitext103": ZeroShotSet(_VALID + ("wiki.valid.tokens", "wiki.valid.raw"), "text", "wikitext"),
    "lm1b": ZeroShotSet(("test",), "text", "lm1b"),
    "lambada": ZeroShotSet(("test", "lambada_test"), "text", "lambada"),
    "ag_news": ZeroShotSet(("test",), "text", None),
    "pubmed": ZeroShotSet(_VALID, "article", "scientific_papers"),
    "arxiv": ZeroShotSet(_VALID, "article", "scientific_papers"),
}


def _candidates(root: Path, name: str, spec: ZeroShotSet) -> list[Path]:
    out = []
    for stem in spec.stems:
        if "." in stem:
            out.append(root / name / stem)
        else:
            out += [root / name / f"{stem}.jsonl", root / name / f"{stem}.txt"]
    return out


def find_set(root: str | Path, name: str) -> Path | None:
    """The local file of a zero-shot set, or None."""
    if name not in ZERO_SHOT_SETS:
        raise DnadiffError(f"zero-shot set {name!r}: unknown (choose from {', '.join(ZERO_SHOT_SETS)})")
    for p in _candidates(Path(root), name, ZERO_SHOT_SETS[name]):
        if p.is_file():
            return p
    return None


def read_set(path: Path, spec: ZeroShotSet, max_docs: int | None = None) -> list[str]:
    """Documents of a local file, detokenised."""
    detok = get_detokenizer(spec.detokenizer)
    texts: list[str] = []
    for text in iter_documents(path, spec.field, unit="record"):
        if max_docs is not None and len(texts) >= max_docs:
            break
        texts.append(detok(text) if detok is not None else text)
    return texts


@torch.no_grad()
def perplexity_of_blocks(model, blocks, batch_size: int = 8, seed: int = 0, mc_samples: int = 1,
                         max_blocks: int | None = None) -> dict[str, Any]:
    """exp(Σ bound / Σ tokens) of `model.nll` over a TokenBlockDataset (one time draw per sequence
    and MC round, as the reference evaluation)."""
    n = len(blocks) if max_blocks is None else min(len(blocks), max_blocks)
    gen = torch.Generator(device=model.device).manual_seed(seed) if model.device.type != "cpu" else \
        torch.Generator().manual_seed(seed)
    total, tokens = 0.0, 0.0
    for _ in range(mc_samples):
        for start in range(0, n, batch_size):
            items = [blocks[i] for i in range(start, min(n, start + batch_size))]
            x0 = torch.stack([it["input_ids"] for it in items])  # (B, L)
            am = torch.stack([it["attention_mask"] for it in items])  # (B, L)
            out = model.nll(x0, am, generator=gen)
            total += float(out.nll.sum())
            tokens += float(out.num_tokens.sum())
    nll = total / max(tokens, 1.0)
    return {"ppl": math.exp(nll), "nll_per_token": nll, "blocks": n, "tokens": int(tokens / mc_samples)}


def zero_shot_eval(model, root: str | Path, sets: Sequence[str] | None = None, seq_len: int = 1024,
                   batch_size: int = 8, max_blocks: int | None = None, max_docs: int | None = None,
                   mc_samples: int = 1, seed: int = 0, log=print) -> dict[str, Any]:
    """Zero-shot perplexity on each set found under `root`: {name: {ppl, nll_per_token, blocks,
    tokens, file} | {skipped: reason}}."""
    from dnadiff.data.text import wrap_texts

    if getattr(model.tokenizer, "kind", "dna") != "text":
        raise DnadiffError("zero-shot evaluation needs a text model (tokenizer.kind = text)")
    results: dict[str, Any] = {}
    for name in sets or list(ZERO_SHOT_SETS):
        path = find_set(root, name)
        if path is None:
            looked = ", ".join(str(p) for p in _candidates(Path(root), name, ZERO_SHOT_SETS[name])[:3])
            results[name] = {"skipped": f"not present locally (looked for {looked}, ...)"}
            if log:
                log(f"zero-shot {name}: skipped, not present locally under {Path(root) / name}")
            continue
        texts = read_set(path, ZERO_SHOT_SETS[name], max_docs)
        try:
            blocks = wrap_texts(texts, model.tokenizer, seq_len, eos_between=False)  # app. D.5: no EOS between
        except DnadiffError as exc:
            results[name] = {"skipped": str(exc)}
            continue
        res = perplexity_of_blocks(model, blocks, batch_size, seed, mc_samples, max_blocks)
        res["file"] = str(path)
        results[name] = res
        if log:
            log(f"zero-shot {name}: ppl {res['ppl']:.2f} over {res['tokens']} tokens ({res['blocks']} blocks)")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from dnadiff.checkpoint import load

    p = argparse.ArgumentParser(description="Zero-shot perplexity of a dnadiff text model on local copies of "
                                            "PTB, Wikitext, LM1B, Lambada, AG News, PubMed, arXiv.")
    p.add_argument("model_dir")
    p.add_argument("--root", required=True, help="folder holding ptb/, wikitext2/, ... (see module docs)")
    p.add_argument("--sets", nargs="*", default=None, choices=list(ZERO_SHOT_SETS))
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-blocks", type=int, default=None)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    try:
        res = zero_shot_eval(load(args.model_dir), args.root, args.sets, args.seq_len, args.batch_size,
                             args.max_blocks)
    except DnadiffError as exc:
        print(f"error: {exc}")
        return 2
    text = json.dumps(res, indent=1)
    if args.out:
        from dnadiff.utils import atomic_write  # local: tests monkeypatch dnadiff.utils.atomic_write

        atomic_write(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
