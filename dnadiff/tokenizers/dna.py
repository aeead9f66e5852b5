"""Character-level DNA tokenizer with the ids of the public Caduceus/HyenaDNA tokenizer.

    [CLS]0 [SEP]1 [BOS]2 [MASK]3 [PAD]4 [RESERVED]5 [UNK]6 A7 C8 G9 T10 N11

so official checkpoints load unchanged. Input is upper-cased (soft-masked genomes are lower
case); IUPAC ambiguity codes (R Y K M S W B D H V) become N, or raise under `strict=True`.
`COMPLEMENT` is dnadiff's one complement table: the id map (`complement_map`, `DNA_COMPLEMENT`),
string reverse complements (`reverse_complement_str`) and the 2-bit base codes A0 C1 G2 T3 of the
k-mer statistics and baselines (`complement_codes`) all derive from it. A<->T, C<->G; N and every
other id (specials, padded model ids) map to themselves.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.base import TOKENIZERS, Tokenizer

SPECIAL_TOKENS = ["[CLS]", "[SEP]", "[BOS]", "[MASK]", "[PAD]", "[RESERVED]", "[UNK]"]
NUCLEOTIDES = "ACGTN"
IUPAC_AMBIGUOUS = "RYKMSWBDHV"
COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A", "N": "N"}
BASES = "ACGT"  # order of the 2-bit codes A0 C1 G2 T3
_RC_TRANSLATION = str.maketrans("".join(COMPLEMENT) + "".join(COMPLEMENT).lower(),
                                "".join(COMPLEMENT.values()) + "".join(COMPLEMENT.values()).lower())
_CODE_COMPLEMENT = np.array([BASES.index(COMPLEMENT[b]) for b in BASES], dtype=np.int8)


def reverse_complement_str(seq: str) -> str:
    """Reverse complement of a DNA string; case is kept (soft-masking), other characters stay."""
    return seq.translate(_RC_TRANSLATION)[::-1]


def complement_codes(codes: np.ndarray) -> np.ndarray:
    """Complement of 2-bit base codes (A0 C1 G2 T3); negative codes (N, breaks) stay."""
    codes = np.asarray(codes)
    return np.where(codes >= 0, _CODE_COMPLEMENT[np.clip(codes, 0, 3)], codes).astype(codes.dtype)


@TOKENIZERS.register("dna")
class DNATokenizer(Tokenizer):
    """Encode/decode DNA strings; complement and reverse-complement token ids."""

    cls_id, sep_id, bos_id, mask_id, pad_id, reserved_id, unk_id = range(7)
    a_id, c_id, g_id, t_id, n_id = range(7, 12)
    vocab_size = 12
    kind = "dna"

    @classmethod
    def from_config(cls, path: str | None = None, strict: bool = False) -> "DNATokenizer":
        return cls(strict=strict)

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.vocab: list[str] = SPECIAL_TOKENS + list(NUCLEOTIDES)
        self.token_to_id = {tok: i for i, tok in enumerate(self.vocab)}
        # Byte -> id lookup table (-1: not allowed) for fast vectorised encoding.
        lut = np.full(256, -1, dtype=np.int64)
        for i, base in enumerate(NUCLEOTIDES):
            lut[ord(base)] = lut[ord(base.lower())] = 7 + i
        if not strict:
            for code in IUPAC_AMBIGUOUS:
                lut[ord(code)] = lut[ord(code.lower())] = self.n_id
        self._lut = lut
        self._id_to_char = np.array([ord("?")] * 7 + [ord(b) for b in NUCLEOTIDES], dtype=np.uint8)

    # ----------------------------------------------------------------- ids
    @property
    def nucleotide_ids(self) -> list[int]:
        """Ids of the four real bases (what MLM random replacement draws from)."""
        return [self.a_id, self.c_id, self.g_id, self.t_id]

    @property
    def special_ids(self) -> list[int]:
        return list(range(7))

    # what models built on this tokenizer take from it (tokenizers/base.py)
    @property
    def content_ids(self) -> list[int]:
        """The real tokens: MLM's random replacements, an AR model's free first token."""
        return self.nucleotide_ids

    @property
    def never_sampled_ids(self) -> list[int]:
        """Ids a sampler never produces: specials and N (N is not scored in training, so its logit
        is untrained); the mask id stays (samplers handle it)."""
        return [i for i in range(self.vocab_size) if i not in self.nucleotide_ids and i != self.mask_id]

    @property
    def ar_context_id(self) -> int | None:
        """The `ar` objective's context token: [BOS], so AR scores every real base like the diffusion objectives."""
        return self.bos_id

    def complement_map(self, size: int | None = None) -> list[int]:
        """complement_map()[i] is the complement id of i; ids >= 12 (model padding) map to themselves."""
        size = size or self.vocab_size
        cmap = list(range(size))
        for base, comp in COMPLEMENT.items():
            cmap[self.token_to_id[base]] = self.token_to_id[comp]
        return cmap

    # ----------------------------------------------------------------- encode / decode
    def encode_array(self, seq: str | bytes, where: str = "sequence", offset: int = 0) -> np.ndarray:
        """Vectorised encode: str -> int64 array of ids; bad characters raise DnadiffError.

        `offset`: where `seq` starts in a longer sequence read piece by piece (the error's position)."""
        raw = seq.encode("ascii", errors="replace") if isinstance(seq, str) else bytes(seq)
        ids = self._lut[np.frombuffer(raw, dtype=np.uint8)]
        if (ids < 0).any():
            pos = int(np.flatnonzero(ids < 0)[0])
            char = chr(raw[pos]) if raw[pos] < 128 else "non-ASCII"
            allowed = "ACGTN" if self.strict else "ACGTN or IUPAC codes"
            raise DnadiffError(f"{where}: character {char!r} at position {offset + pos} is not DNA "
                               f"(allowed: {allowed})")
        return ids

    def encode(self, seq: str, where: str = "sequence") -> list[int]:
        return self.encode_array(seq, where).tolist()

    def decode(self, ids: Sequence[int] | np.ndarray | torch.Tensor, skip_special: bool = False) -> str:
        """ids -> string; special tokens print as their names ([MASK], ...) unless skipped."""
        if isinstance(ids, torch.Tensor):
            ids = ids.detach().cpu().numpy()
        arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        if arr.size and ((arr < 0) | (arr >= self.vocab_size)).any():
            bad = int(arr[(arr < 0) | (arr >= self.vocab_size)][0])
            raise DnadiffError(f"token id {bad} is outside the DNA vocabulary (0..{self.vocab_size - 1})")
        if arr.size and (arr >= 7).all():  # fast path: only bases
            return self._id_to_char[arr].tobytes().decode("ascii")
        out = []
        for i in arr.tolist():
            if i >= 7:
                out.append(NUCLEOTIDES[i - 7])
            elif not skip_special:
                out.append(self.vocab[i])
        return "".join(out)

    def __call__(self, seq: str) -> list[int]:
        return self.encode(seq)

    # ----------------------------------------------------------------- strands
    def complement(self, ids):
        """Complement ids (list, numpy array or torch tensor), same type back."""
        if isinstance(ids, torch.Tensor):
            cmap = torch.tensor(self.complement_map(max(16, int(ids.max()) + 1 if ids.numel() else 16)),
                                device=ids.device)
            return cmap[ids]
        if isinstance(ids, np.ndarray):
            cmap = np.asarray(self.complement_map(max(16, int(ids.max()) + 1 if ids.size else 16)))
            return cmap[ids]
        cmap = self.complement_map(max(16, max(ids, default=0) + 1))
        return [cmap[i] for i in ids]

    def reverse_complement(self, ids):
        """Reverse complement along the last axis (list, numpy array or torch tensor)."""
        comp = self.complement(ids)
        if isinstance(comp, torch.Tensor):
            return comp.flip(-1)
        if isinstance(comp, np.ndarray):
            return comp[..., ::-1].copy()
        return comp[::-1]

    reverse_complement_str = staticmethod(reverse_complement_str)

    def __repr__(self) -> str:
        return f"DNATokenizer(vocab_size={self.vocab_size}, strict={self.strict})"


# complement id of each id of the 12-token vocabulary (what official Caduceus configs store)
DNA_COMPLEMENT = tuple(DNATokenizer().complement_map())
