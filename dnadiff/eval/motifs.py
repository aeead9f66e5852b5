"""Transcription-factor motif content of DNA: JASPAR PWMs scanned on both strands at a p-value threshold.

    from dnadiff.eval.motifs import load_jaspar, MotifScanner, motif_metrics
    motifs = load_jaspar()                                   # JASPAR2024 CORE vertebrates (pyjaspar, offline)
    scanner = MotifScanner(motifs, background_of(reference))
    res = motif_metrics(scanner, samples, reference)         # hit rates, Spearman, motif-spectrum JS

The scan is our own (no MEME suite), following FIMO (Grant, Bailey & Noble 2011, Bioinformatics 27:1017):
- log-odds PWM in bits: W[j, b] = log2(p[j, b] / bg[b]), with the frequency-scale pseudocount of FIMO's
  --motif-pseudo: p[j, b] = (f[j, b] + a·bg[b]) / (1 + a), a = 0.1 by default;
- scores rounded to integers Q = round(W / resolution) (resolution 0.01 bit), so the null distribution of a
  window's score S = Σ_j Q[j, X_j], X_j i.i.d. ~ bg, is computed exactly by dynamic programming over the
  integer scores (a convolution of L per-column distributions), and a window is a hit when its p-value
  P(S >= s) is below the threshold (1e-4 by default), i.e. when s >= the smallest such integer score;
- both strands: the minus strand is scanned with the reverse-complemented matrix (same integer scores as
  the forward matrix on the reverse complement). The background is the reference's base composition made
  strand-symmetric (A = T, C = G), so both strands share one null distribution and one threshold.
A motif whose best possible score is not significant (short motifs at small p-values) can never hit; it is
dropped and listed. Windows that contain a base other than A/C/G/T are not scored.

The scan is one integer-valued conv1d per motif length (float32 sums of integers below 2^24 are exact),
so the vectorised scan and a per-window loop give identical hit sets.

Metrics (motif_metrics): hits per kb of scanned A/C/G/T sequence for every motif (both strands counted, so
a site matching on both strands counts twice, in samples and reference alike), the Spearman rank
correlation of the per-motif hit rates of samples vs reference, and the Jensen–Shannon divergence (bits)
between the two motif spectra (hit counts normalised over motifs).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from dnadiff.errors import DnadiffError
from dnadiff.eval.dna_metrics import _concat, encode, js_divergence, kmer_counts
from dnadiff.logs import progress_bar

JASPAR_RELEASE = "JASPAR2024"  # pinned (pyjaspar 4.0 ships 2014–2026): a newer package must not change the numbers
PVALUE = 1e-4
PSEUDOCOUNT = 0.1
RESOLUTION = 0.01  # bits per integer score step
_CHUNK = 1 << 15  # window starts scanned per conv call


@dataclasses.dataclass(frozen=True)
class Motif:
    """A position frequency matrix: counts (L, 4) over A, C, G, T."""

    id: str
    name: str
    counts: np.ndarray

    @property
    def length(self) -> int:
        return int(self.counts.shape[0])


def motif_from_consensus(seq: str, id: str = "", name: str = "", count: float = 20.0) -> Motif:
    """A motif whose columns are `count` of one base each (a hand-made PWM for tests and spike-ins)."""
    codes = encode(seq.upper())
    if (codes < 0).any() or not len(codes):
        raise DnadiffError(f"motif {seq!r}: only A/C/G/T")
    counts = np.zeros((len(codes), 4))
    counts[np.arange(len(codes)), codes] = count
    return Motif(id or seq, name or seq, counts)


def load_jaspar(release: str = JASPAR_RELEASE, collection: str = "CORE", tax_group: str = "vertebrates",
                ids: Sequence[str] | None = None) -> list[Motif]:
    """JASPAR matrices from the SQLite database that pyjaspar installs (no network): the latest version of
    every matrix of `collection` and `tax_group`, or exactly the matrix ids `ids` (e.g. MA0139.2)."""
    try:
        from pyjaspar import jaspardb
    except ImportError:
        raise DnadiffError("JASPAR motifs need the pyjaspar package: "
                           "pip install pyjaspar (or use --no-motifs)") from None
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # pyjaspar prints the releases it knows on a bad name
        db = jaspardb(release=release)
    if getattr(db, "conn", None) is None:
        raise DnadiffError(f"JASPAR release {release!r} is not in this pyjaspar; it has {', '.join(db.get_releases())}")
    if ids:
        import warnings

        found = []
        for mid in ids:
            with warnings.catch_warnings():  # Biopython warns before returning None for an unknown id
                warnings.simplefilter("ignore")
                m = db.fetch_motif_by_id(mid)
            if m is None:
                raise DnadiffError(f"{release}: no matrix {mid!r}")
            found.append(m)
    else:
        found = db.fetch_motifs(collection=collection, tax_group=[tax_group])
        if not found:
            raise DnadiffError(f"JASPAR {release}: no matrices in collection {collection!r}, tax group {tax_group!r}")
    out = []
    for m in found:
        counts = np.array([m.counts[b] for b in "ACGT"], dtype=np.float64).T  # (L, 4)
        out.append(Motif(str(m.matrix_id), str(m.name), counts))
    return out


# ---- PWMs and their exact null distribution ------------------------------------------------------------
def background_of(reference: Sequence[str]) -> np.ndarray:
    """Strand-symmetric base composition (A, C, G, T) of the reference, with one pseudo-count per base."""
    n = kmer_counts(reference, 1) + 1.0
    n = (n + n[::-1]) / 2  # A <-> T, C <-> G: both strands are scanned
    return n / n.sum()


def log_odds(counts: np.ndarray, background: np.ndarray, pseudocount: float = PSEUDOCOUNT) -> np.ndarray:
    """W (L, 4) in bits: log2(p / bg), p = (f + a·bg) / (1 + a) with f the column frequencies (FIMO's
    --motif-pseudo convention)."""
    counts = np.asarray(counts, dtype=np.float64)
    bg = np.asarray(background, dtype=np.float64)
    total = counts.sum(axis=1, keepdims=True)
    if (total <= 0).any():
        raise DnadiffError("motif: a column without counts")
    p = (counts / total + pseudocount * bg) / (1.0 + pseudocount)
    with np.errstate(divide="ignore"):
        return np.log2(p / bg)


def integer_matrix(weights: np.ndarray, resolution: float = RESOLUTION) -> np.ndarray:
    """Scores rounded to integer steps of `resolution` bits (Int64[L, 4])."""
    if not np.isfinite(weights).all():
        raise DnadiffError("motif: a zero probability (use a pseudocount > 0)")
    return np.rint(weights / resolution).astype(np.int64)


def score_distribution(q: np.ndarray, background: np.ndarray) -> tuple[int, np.ndarray]:
    """(lowest score, pmf) of S = Σ_j q[j, X_j] with X_j i.i.d. ~ background: pmf[s - lowest] = P(S = s).

    Dynamic programming over the integer scores: the distribution after column j is the previous one
    shifted by q[j, b] and weighted by bg[b], summed over b."""
    q = np.asarray(q, dtype=np.int64)
    bg = np.asarray(background, dtype=np.float64)
    lows = q.min(axis=1)
    span = int((q.max(axis=1) - lows).sum())
    pmf = np.zeros(span + 1)
    pmf[0] = 1.0
    top = 0  # highest reachable offset so far
    for j in range(q.shape[0]):
        new = np.zeros_like(pmf)
        width = int(q[j].max() - lows[j])
        for b in range(4):
            d = int(q[j, b] - lows[j])
            new[d : d + top + 1] += bg[b] * pmf[: top + 1]
        pmf, top = new, top + width
    return int(lows.sum()), pmf


def score_threshold(q: np.ndarray, background: np.ndarray, pvalue: float = PVALUE) -> int | None:
    """Smallest attainable score s with P(S >= s) < pvalue (a hit: score >= s); None when even the best
    score is not that rare."""
    low, pmf = score_distribution(q, background)
    tail = np.cumsum(pmf[::-1])[::-1]  # tail[i] = P(S >= low + i)
    ok = np.flatnonzero((tail < pvalue) & (pmf > 0))
    return int(low + ok[0]) if ok.size else None


# ---- the scan -----------------------------------------------------------------------------------------
class MotifScanner:
    """Hit counts of a fixed motif set (thresholds fixed by one background) on both strands.

    scan(seqs) -> (hits Int64[n, M], bases Int64[n]); results are cached per sequence, so the samples, the
    reference and the real-vs-real floor's subsets of it are each scanned once."""

    def __init__(self, motifs: Sequence[Motif], background: np.ndarray, pvalue: float = PVALUE,
                 pseudocount: float = PSEUDOCOUNT, resolution: float = RESOLUTION):
        if not 0 < pvalue < 1:
            raise DnadiffError(f"motif p-value must be in (0, 1), got {pvalue}")
        if pseudocount <= 0:
            raise DnadiffError(f"motif pseudocount must be positive, got {pseudocount}")
        self.background = np.asarray(background, dtype=np.float64)
        self.pvalue, self.pseudocount, self.resolution = pvalue, pseudocount, resolution
        self.motifs, self.matrices, self.thresholds, self.dropped = [], [], [], []
        for m in motifs:
            q = integer_matrix(log_odds(m.counts, self.background, pseudocount), resolution)
            t = score_threshold(q, self.background, pvalue)
            if t is None:
                self.dropped.append(m.id)
                continue
            self.motifs.append(m)
            self.matrices.append(q)
            self.thresholds.append(t)
        self._groups = []  # per motif length: (motif indices, conv weight (2M, 4, L) float32, bias (2M,))
        import torch

        lengths = np.array([q.shape[0] for q in self.matrices], dtype=np.int64)
        for L in np.unique(lengths):
            idx = np.flatnonzero(lengths == L)
            fwd = np.stack([self.matrices[i].T for i in idx])  # (M, 4, L)
            rc = fwd[:, ::-1, ::-1]  # complement (A<->T, C<->G: reversed base order) and reversed positions
            w = torch.from_numpy(np.concatenate([fwd, rc]).astype(np.float32))
            # bias 0.5 - threshold: a window is a hit iff its conv output is > 0 (scores are integers)
            bias = 0.5 - np.array([self.thresholds[i] for i in idx] * 2, dtype=np.float32)
            self._groups.append((idx, w, torch.from_numpy(bias)))
        self._cache: dict[str, np.ndarray] = {}

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.motifs]

    def _scan_codes(self, codes: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
        """Hit counts (n, M) of the concatenated, -1-separated codes (owner: sequence of each position)."""
        import torch

        M = len(self.motifs)
        hits = np.zeros((n, M), dtype=np.int64)
        if not M or codes.size == 0:
            return hits
        bad = np.concatenate([[0], np.cumsum(codes < 0)])
        lmax = max(w.shape[-1] for _, w, _ in self._groups)
        onehot = np.zeros((4, codes.size + lmax), dtype=np.float32)  # the tail pads the last chunk's windows
        ok = codes >= 0
        onehot[codes[ok], np.flatnonzero(ok)] = 1.0
        onehot = torch.from_numpy(onehot)
        for start in range(0, codes.size, _CHUNK):
            stop = min(start + _CHUNK, codes.size)
            x = onehot[:, start : stop + lmax - 1][None]  # (1, 4, C + lmax - 1)
            for idx, w, bias in self._groups:
                L = w.shape[-1]
                with torch.no_grad():
                    scores = torch.nn.functional.conv1d(x[..., : stop - start + L - 1], w, bias)[0]  # (2M, C)
                    ch, at = (scores > 0).nonzero(as_tuple=True)  # hits are rare: test validity on them only
                ch, pos = ch.numpy(), at.numpy() + start
                ok = pos + L <= codes.size
                ch, pos = ch[ok], pos[ok]
                ok = (bad[pos + L] - bad[pos]) == 0  # no separator or non-ACGT base inside the window
                if ok.any():
                    np.add.at(hits, (owner[pos[ok]], idx[ch[ok] % idx.size]), 1)
        return hits

    def scan(
        self, seqs: Sequence[str], progress: bool = False, desc: str = "motif scan"
    ) -> tuple[np.ndarray, np.ndarray]:
        """(hits Int64[n, M], scanned A/C/G/T bases Int64[n]) of each sequence, both strands."""
        seqs = [str(s).upper() for s in seqs]
        todo = list(dict.fromkeys(s for s in seqs if s not in self._cache))
        if todo:
            step = max(1, (4 * _CHUNK) // max(1, int(np.mean([len(s) for s in todo]))))
            # the project's bar: a plain line every few seconds in a log file, not one carriage-return line
            with progress_bar(total=len(todo), desc=desc, unit="seq", disable=not progress) as bar:
                for i in range(0, len(todo), step):
                    part = todo[i : i + step]
                    codes, starts = _concat(part)
                    owner = np.repeat(np.arange(len(part)), np.diff(starts))
                    for s, row in zip(part, self._scan_codes(codes, owner, len(part))):
                        self._cache[s] = row
                    bar.update(len(part))
        hits = np.stack([self._cache[s] for s in seqs]) if seqs else np.zeros((0, len(self.motifs)), dtype=np.int64)
        bases = np.array([int((encode(s) >= 0).sum()) for s in seqs], dtype=np.int64)
        return hits, bases


# ---- metrics -----------------------------------------------------------------------------------------
def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (ties get average ranks); NaN when either side is constant."""
    from scipy.stats import rankdata

    ra, rb = rankdata(a), rankdata(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def motif_metrics(scanner: MotifScanner, samples: Sequence[str], reference: Sequence[str], *,
                  per_motif: bool = True, progress: bool = False) -> dict:
    """Per-motif hit rates (per kb, both strands), their Spearman correlation samples vs reference, and the
    motif-spectrum JS divergence (bits)."""
    hs, bs = scanner.scan(samples, progress, "motif scan (samples)")
    hr, br = scanner.scan(reference, progress, "motif scan (reference)")
    cs, cr = hs.sum(axis=0), hr.sum(axis=0)  # (M,) pooled hits
    rs = cs / max(bs.sum(), 1) * 1000.0
    rr = cr / max(br.sum(), 1) * 1000.0
    res = {
        "num_motifs": len(scanner.motifs),
        "hits_per_kb_samples": float(cs.sum() / max(bs.sum(), 1) * 1000.0),
        "hits_per_kb_reference": float(cr.sum() / max(br.sum(), 1) * 1000.0),
        "spearman": spearman(rs, rr),
        "js": js_divergence(cs, cr),
    }
    if per_motif:
        res["per_motif"] = [
            {"id": m.id, "name": m.name, "samples_per_kb": float(a), "reference_per_kb": float(b)}
            for m, a, b in zip(scanner.motifs, rs, rr)
        ]
    return res


def scanner_settings(scanner: MotifScanner, source: str) -> dict:
    """What the motif numbers depend on (for the JSON)."""
    return {
        "source": source, "num_motifs": len(scanner.motifs), "dropped_unreachable": list(scanner.dropped),
        "pvalue": scanner.pvalue, "pseudocount": scanner.pseudocount, "resolution_bits": scanner.resolution,
        "background": dict(zip("ACGT", (float(x) for x in scanner.background))),
        "scan": "dnadiff's own vectorised scan (FIMO-style exact p-values over integer scores), both strands",
    }
