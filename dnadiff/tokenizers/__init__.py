"""Tokenizers: DNA characters with Caduceus-compatible ids, and Hugging Face text tokenizers."""

from dnadiff.tokenizers.base import TOKENIZERS, Tokenizer, build_tokenizer
from dnadiff.tokenizers.dna import DNATokenizer
from dnadiff.tokenizers.text import TextTokenizer

__all__ = ["DNATokenizer", "TOKENIZERS", "TextTokenizer", "Tokenizer", "build_tokenizer"]
