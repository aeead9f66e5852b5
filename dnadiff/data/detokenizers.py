"""Detokenizers for the zero-shot text sets (MDLM app. D.5, as applied in the reference dataloader).

PTB, Wikitext and LM1B are distributed pre-tokenised ("do n't", "3 @.@ 5", "( a )"); before a
subword tokenizer sees them the spacing is undone so that the text looks like ordinary prose.
The rules below are the published ones (Megatron-LM's Wikitext rules, the MDLM reference's
PTB / LM1B / Lambada rules), written as tables of literal and regular-expression rewrites that
are applied in order.

    get_detokenizer("ptb")("the company 's N shares")  ->  "the company's 1 shares"
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from dnadiff.errors import DnadiffError

Rule = tuple[str, str, str]  # (kind "lit" | "re", pattern, replacement)


def _apply(rules: list[Rule], text: str) -> str:
    for kind, pattern, repl in rules:
        text = text.replace(pattern, repl) if kind == "lit" else re.sub(pattern, repl, text)
    return text


WIKITEXT_RULES: list[Rule] = [
    # contractions
    ("lit", "s '", "s'"),
    ("re", r"/' [0-9]/", r"/'[0-9]/"),
    # number separators: 1 @,@ 000 -> 1,000 ; 3 @.@ 5 -> 3.5 ; well @-@ known -> well-known
    ("lit", " @-@ ", "-"),
    ("lit", " @,@ ", ","),
    ("lit", " @.@ ", "."),
    # punctuation followed by a space
    *[("lit", f" {p} ", f"{p} ") for p in (":", ";", ".", "!", "?", ",")],
    # spaces just inside brackets and quotes
    ("re", r"\(\s*([^\)]*?)\s*\)", r"(\1)"),
    ("re", r"\[\s*([^\]]*?)\s*\]", r"[\1]"),
    ("re", r"{\s*([^}]*?)\s*}", r"{\1}"),
    ("re", r"\"\s*([^\"]*?)\s*\"", r'"\1"'),
    ("re", r"'\s*([^']*?)\s*'", r"'\1'"),
    # section markers "= = =" -> "==="
    ("lit", "= = = =", "===="),
    ("lit", "= = =", "==="),
    ("lit", "= =", "=="),
    ("lit", " \u00b0 ", "\u00b0"),
    ("lit", " \n", "\n"),
    ("lit", "\n ", "\n"),
    ("lit", " N ", " 1 "),
    ("lit", " 's", "'s"),
]

PTB_RULES: list[Rule] = [
    ("lit", " 's", "'s"),
    ("lit", "s ' ", "s' "),
    ("lit", " n't", "n't"),
    ("lit", " \n ", "\n"),
    ("lit", "\\/", "/"),
]
PTB_TAIL: list[Rule] = [
    ("lit", "$ 1", "$1"),
    ("lit", "# 1", "#1"),
    ("lit", "<unk>", "?"),
]

LM1B_RULES: list[Rule] = [
    ("lit", "http : / / ", "http://"),
    ("lit", "https : / / ", "https://"),
    ("re", r" '(\w+)", r"'\1"),
    ("re", r" (\w+) \. ", r" \1. "),
    ("re", r" (\w+) \.$", r" \1."),
    ("lit", " ? ", "? "),
    ("re", r" \?$", "?"),
    ("lit", " ! ", "! "),
    ("re", r" \!$", "!"),
    ("lit", " , ", ", "),
    ("lit", " : ", ": "),
    ("lit", " ; ", "; "),
    ("lit", " / ", "/"),
    ("re", r"\" ([^\"]+) \"", r'"\1"'),
    ("re", r"' ([^']+) '", r"'\1'"),
    ("re", r"\( ([^\(\)]+) \)", r"(\1)"),
    ("re", r"\[ ([^\[\]]+) \]", r"[\1]"),
    ("lit", "$ ", "$"),
    ("lit", "\u00a3 ", "\u00a3"),
]


def wikitext_detokenize(text: str) -> str:
    return _apply(WIKITEXT_RULES, text)


def ptb_detokenize(text: str) -> str:
    text = _apply(PTB_RULES, text)
    # " N " (a number) -> " 1 "; repeated because adjacent matches overlap ("N N N")
    for _ in range(10):
        text = text.replace(" N ", " 1 ")
    return _apply(PTB_TAIL, text)


def lm1b_detokenize(text: str) -> str:
    return _apply(LM1B_RULES, text)


def lambada_detokenize(text: str) -> str:
    """Curly double quotes to straight ones; the passage starts on a new line (as in the reference)."""
    text = text.replace("\u201c", '"').replace("\u201d", '"')
    return "\n" + text.strip()


def scientific_papers_detokenize(text: str) -> str:
    """arXiv / PubMed articles: the Wikitext rules, then the LM1B rules."""
    return lm1b_detokenize(wikitext_detokenize(text))


DETOKENIZERS: dict[str, Callable[[str], str]] = {
    "wikitext": wikitext_detokenize,
    "wikitext2": wikitext_detokenize,
    "wikitext103": wikitext_detokenize,
    "ptb": ptb_detokenize,
    "lm1b": lm1b_detokenize,
    "lambada": lambada_detokenize,
    "scientific_papers": scientific_papers_detokenize,
    "pubmed": scientific_papers_detokenize,
    "arxiv": scientific_papers_detokenize,
}


def get_detokenizer(name: Optional[str]) -> Optional[Callable[[str], str]]:
    """None / "none" -> None; otherwise the named function (unknown names raise DnadiffError)."""
    if name is None or name == "none":
        return None
    if name not in DETOKENIZERS:
        raise DnadiffError(f"data.text.detokenizer: unknown {name!r} (choose from none, {', '.join(DETOKENIZERS)})")
    return DETOKENIZERS[name]
