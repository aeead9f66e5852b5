"""Does generated DNA look like the real thing? Distribution-level metrics against a reference.

    from dnadiff.eval.dna_metrics import dna_metrics
    res = dna_metrics(samples, reference)      # lists of strings (case-insensitive)

Metrics (all on A/C/G/T only; a k-mer containing any other letter is skipped):
- kmer_js[k], k = 1..kmax: Jensen–Shannon divergence, base 2 (in [0, 1]), between the pooled
  k-mer frequency spectra of samples and reference (d3-dna and UDLM report this family).
- kmer_pearson: Pearson correlation between the pooled 3-mer frequency vectors (64 entries) of samples
  and reference, the "3-mer Pearson corr" of DRAKES (Wang et al., ICLR 2025, arXiv 2410.13643); 1 = same
  spectrum up to scale.
- gc: per-sequence GC fraction; the distance between the two GC distributions as Wasserstein-1
  (mean absolute difference of quantile functions) and the two-sample KS statistic.
- kmer_entropy: per-sample Shannon entropy (bits) of its own k-mer distribution (k = entropy_k),
  mean ± std, beside the same figure for the reference sequences (low = repetitive / collapsed).
- markov_ppl: perplexity of the samples under an order-k Markov model fitted on the reference,
  P(b | c) = (n(c, b) + 1) / (n(c) + 4) (add-one / Laplace smoothing). The first k bases of a
  sequence use the order-j model with j = bases available (all fitted on the reference with the
  same smoothing). Reported per base: exp(mean negative log-likelihood).
- memorisation: longest exact match of each sample to the reference (both strands by default),
  and the share of samples with a match >= match_threshold (50 bp) — found with a rolling-hash
  index of reference m-mers and a per-sample binary search on m (exact up to 64-bit hash
  collisions), fast enough for megabases of reference.
- extras: callables name -> fn(samples, reference, floor) -> dict (the command adds JASPAR motifs,
  eval/motifs.py, and an in-house Fréchet distance, eval/encoders.py), run on the samples and the floor.
- discriminator (eval/discriminator.py, when given settings): a classifier two-sample test (Lopez-Paz &
  Oquab, ICLR 2017) of the samples against held-out reference sequences, with a CNN and a k-mer LR:
  AUROC ± SE (0.5 = indistinguishable), accuracy, exact binomial p-value, and the real-vs-real floor_auroc.
- floor ("real vs real"): the same metrics for a held-out set of reference sequences of the
  samples' count (or windows of the samples' length cut from longer reference records) against
  the remaining reference, when the reference is big enough (>= 2x the samples). It is the value
  a perfect generator would get.
"""

from __future__ import annotations

import inspect
import math
from typing import Callable, Mapping, Sequence

import numpy as np

from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.dna import BASES, reverse_complement_str

_CODE = np.full(256, -1, dtype=np.int8)
for _i, _b in enumerate(BASES):  # the tokenizer's 2-bit code order
    _CODE[ord(_b)] = _i
    _CODE[ord(_b.lower())] = _i


def encode(seq: str) -> np.ndarray:
    """int8 array: A0 C1 G2 T3, anything else -1."""
    return _CODE[np.frombuffer(seq.encode("ascii", "replace"), dtype=np.uint8)]


reverse_complement = reverse_complement_str  # the tokenizer's complement table


# ---- k-mer spectra ------------------------------------------------------------------------------
def kmer_codes(codes: np.ndarray, k: int) -> np.ndarray:
    """Base-4 codes of every valid k-mer of one encoded sequence (windows with -1 dropped)."""
    n = codes.shape[0] - k + 1
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    valid = codes >= 0
    bad = np.concatenate([[0], np.cumsum(~valid)])
    ok = (bad[k:] - bad[:-k]) == 0  # (n,)
    c = np.where(valid, codes, 0).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    for j in range(k):
        out = out * 4 + c[j : j + n]
    return out[ok]


def kmer_counts(seqs: Sequence[str], k: int) -> np.ndarray:
    """Pooled k-mer counts Float64[4^k] over all sequences."""
    counts = np.zeros(4**k, dtype=np.float64)
    for s in seqs:
        counts += np.bincount(kmer_codes(encode(s), k), minlength=4**k)
    return counts


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen–Shannon divergence in bits (base 2) of two count/probability vectors; 0 iff p = q.
    scipy gives the JS distance, its square root."""
    from scipy.spatial.distance import jensenshannon

    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.sum() <= 0 or q.sum() <= 0:
        return float("nan")
    return max(0.0, float(jensenshannon(p, q, base=2)) ** 2)


def kmer_pearson(samples: Sequence[str], reference: Sequence[str], k: int = 3) -> float:
    """Pearson correlation of the pooled k-mer counts (4^k entries) of samples and reference (DRAKES,
    Wang et al., ICLR 2025, with k = 3); NaN when one spectrum is constant."""
    a, b = kmer_counts(samples, k), kmer_counts(reference, k)
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


# ---- GC content -----------------------------------------------------------------------------------
def gc_content(seqs: Sequence[str]) -> np.ndarray:
    """GC fraction of each sequence among its A/C/G/T bases (NaN when it has none)."""
    out = np.empty(len(seqs), dtype=np.float64)
    for i, s in enumerate(seqs):
        c = encode(s)
        n = int((c >= 0).sum())
        out[i] = float(((c == 1) | (c == 2)).sum()) / n if n else math.nan
    return out


def wasserstein1(a: np.ndarray, b: np.ndarray) -> float:
    """W1 between two 1-D empirical distributions: ∫ |F_a(x) - F_b(x)| dx (NaNs dropped)."""
    from scipy.stats import wasserstein_distance

    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    return float(wasserstein_distance(a, b)) if a.size and b.size else float("nan")


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov–Smirnov statistic sup |F_a - F_b| (NaNs dropped)."""
    from scipy.stats import ks_2samp

    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    return float(ks_2samp(a, b).statistic) if a.size and b.size else float("nan")


# ---- per-sample k-mer entropy ---------------------------------------------------------------------
def kmer_entropy(seq: str, k: int = 3) -> float:
    """Shannon entropy (bits) of the k-mer distribution within one sequence (max 2k)."""
    c = np.bincount(kmer_codes(encode(seq), k), minlength=4**k).astype(np.float64)
    if c.sum() == 0:
        return float("nan")
    p = c[c > 0] / c.sum()
    return float(-(p * np.log2(p)).sum())


# ---- order-k Markov oracle ------------------------------------------------------------------------
class MarkovModel:
    """Order-k Markov chain over A/C/G/T with add-one smoothing, plus orders 0..k-1 for the first
    bases of each sequence: P(b | c) = (n(c, b) + 1) / (n(c) + 4)."""

    def __init__(self, reference: Sequence[str], order: int = 5):
        if order < 0:
            raise DnadiffError(f"markov order must be >= 0, got {order}")
        self.order = int(order)
        self.log_probs = []  # order j -> Float64[4^j, 4] natural-log conditionals
        for j in range(self.order + 1):
            counts = kmer_counts(reference, j + 1).reshape(4**j, 4)
            self.log_probs.append(np.log((counts + 1.0) / (counts.sum(axis=1, keepdims=True) + 4.0)))

    def nll(self, seq: str) -> tuple[float, int]:
        """(total negative log-likelihood in nats, number of scored bases) of one sequence.

        Bases that are not A/C/G/T are not scored, and a context never spans one of them."""
        codes = encode(seq)
        total, count = 0.0, 0
        # split at invalid letters: each clean run is scored like its own sequence
        runs = np.split(codes, np.flatnonzero(codes < 0))
        for run in runs:
            run = run[run >= 0].astype(np.int64)
            n = run.size
            for i in range(min(self.order, n)):  # the first bases: shorter contexts
                ctx = 0
                for b in run[:i]:
                    ctx = ctx * 4 + int(b)
                total -= self.log_probs[i][ctx, run[i]]
                count += 1
            if n > self.order:
                k = self.order
                ctx = np.zeros(n - k, dtype=np.int64)
                for j in range(k):
                    ctx = ctx * 4 + run[j : j + n - k]
                total -= float(self.log_probs[k][ctx, run[k:]].sum())
                count += n - k
        return total, count

    def perplexity(self, seqs: Sequence[str]) -> float:
        tot, cnt = 0.0, 0
        for s in seqs:
            a, b = self.nll(s)
            tot, cnt = tot + a, cnt + b
        return float(math.exp(tot / cnt)) if cnt else float("nan")


# ---- memorisation: longest exact match --------------------------------------------------------------
_MOD = 1 << 64
_B = 0x9E3779B97F4A7C15  # odd, so invertible mod 2^64
_B_INV = _B
for _ in range(6):  # Newton iteration for the inverse mod 2^64
    _B_INV = (_B_INV * (2 - _B * _B_INV)) % _MOD


class HashedSeq:
    """Position-independent 64-bit polynomial hashes of any window of a (concatenated) sequence.

    hash(i, m) = Σ_{d<m} v[i+d] B^d = (S[i+m] - S[i]) · B^{-i}  (mod 2^64),
    S[k] = Σ_{j<k} v[j] B^j (numpy uint64 arithmetic wraps mod 2^64). Letters are 1..4; windows that
    contain a non-ACGT letter or a record separator are invalid."""

    def __init__(self, codes: np.ndarray):
        n = codes.shape[0]
        self.n = n
        values = (codes.astype(np.int64) + 1).astype(np.uint64)
        with np.errstate(over="ignore"):
            pw = np.full(n, _B, dtype=np.uint64)
            pw[0] = 1
            pw = np.cumprod(pw, dtype=np.uint64)  # B^j
            inv = np.full(n + 1, _B_INV, dtype=np.uint64)
            inv[0] = 1
            self.inv = np.cumprod(inv, dtype=np.uint64)  # B^{-i}
            self.S = np.concatenate([[np.uint64(0)], np.cumsum(values * pw, dtype=np.uint64)])
        self.bad = np.concatenate([[0], np.cumsum(codes < 0)])

    def windows(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """(hashes of all windows of length m, valid mask), both of length n - m + 1."""
        k = self.n - m + 1
        if k <= 0:
            return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=bool)
        with np.errstate(over="ignore"):
            h = (self.S[m : m + k] - self.S[:k]) * self.inv[:k]
        return h, (self.bad[m : m + k] - self.bad[:k]) == 0


def _concat(seqs: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Encoded sequences joined with -1 separators, and each sequence's start offset."""
    parts, starts, pos = [], [], 0
    for s in seqs:
        c = encode(s)
        parts.append(c)
        parts.append(np.array([-1], dtype=np.int8))
        starts.append(pos)
        pos += c.size + 1
    codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int8)
    return codes, np.array(starts + [pos], dtype=np.int64)


def longest_matches(samples: Sequence[str], reference: Sequence[str], both_strands: bool = True) -> np.ndarray:
    """Length of the longest substring of each sample that occurs exactly in the reference.

    A galloping search (m = 16, 32, 64, ... shared by all samples) brackets each answer, then a
    per-sample binary search in lockstep refines it; every probe length m costs one pass (hash +
    sort) over the reference, and the probes are shared by the samples whose answers agree."""
    ref = list(reference) + ([reverse_complement(r) for r in reference] if both_strands else [])
    ref_h = HashedSeq(_concat(ref)[0])
    codes, starts = _concat(samples)
    smp_h = HashedSeq(codes)
    owner = np.repeat(np.arange(len(samples)), np.diff(starts))  # sample id of every position
    n = len(samples)

    def probe(m: int, ids: np.ndarray) -> np.ndarray:
        """Bool[n]: sample i in ids has an m-mer present in the reference."""
        found = np.zeros(n, dtype=bool)
        ref_w, ref_ok = ref_h.windows(m)
        table = np.sort(ref_w[ref_ok])  # (np.unique is much slower; duplicates are harmless)
        s_w, s_ok = smp_h.windows(m)
        who = owner[: s_w.size]
        want = np.zeros(n, dtype=bool)
        want[ids] = True
        sel = s_ok & want[who]
        if table.size and sel.any():
            q = s_w[sel]
            at = np.minimum(np.searchsorted(table, q), table.size - 1)
            found[who[sel][table[at] == q]] = True
        return found

    length = np.array([int((encode(s) >= 0).sum()) for s in samples], dtype=np.int64)
    lo = np.zeros(n, dtype=np.int64)  # a match of length lo exists
    hi = length.copy()  # no match longer than hi
    alive, m = np.flatnonzero(hi >= 16), 16
    while alive.size:
        found = probe(m, alive)
        lo[alive[found[alive]]] = m
        miss = alive[~found[alive]]
        hi[miss] = m - 1
        alive = alive[found[alive] & (length[alive] >= 2 * m)]
        m *= 2
    while True:
        todo = np.flatnonzero(lo < hi)
        if todo.size == 0:
            return lo
        mid = (lo + hi + 1) // 2
        for m in np.unique(mid[todo]):
            ids = todo[mid[todo] == m]
            found = probe(int(m), ids)
            lo[ids] = np.where(found[ids], m, lo[ids])
            hi[ids] = np.where(found[ids], hi[ids], m - 1)


# ---- the suite ----------------------------------------------------------------------------------------
def _clean(seqs: Sequence[str], what: str) -> list[str]:
    out = [str(s).upper() for s in seqs]
    if not out:
        raise DnadiffError(f"{what}: no sequences")
    if not any((encode(s) >= 0).any() for s in out):
        raise DnadiffError(f"{what}: no A/C/G/T bases")
    return out


def compare(
    samples: Sequence[str],
    reference: Sequence[str],
    *,
    kmax: int = 6,
    markov_order: int = 5,
    entropy_k: int = 3,
    match_threshold: int = 50,
    both_strands: bool = True,
    memorisation: bool = True,
    extras: Mapping[str, Callable[..., dict]] | None = None,
    is_floor: bool = False,
) -> dict:
    """All metrics of one sample set against one reference set (no floor)."""
    res: dict = {"num_samples": len(samples), "num_reference": len(reference)}
    res["mean_length"] = float(np.mean([len(s) for s in samples]))
    res["kmer_js"] = {str(k): js_divergence(kmer_counts(samples, k), kmer_counts(reference, k))
                      for k in range(1, kmax + 1)}
    res["kmer_pearson"] = {"k": 3, "r": kmer_pearson(samples, reference, 3)}
    gs, gr = gc_content(samples), gc_content(reference)
    res["gc"] = {
        "samples_mean": float(np.nanmean(gs)),
        "reference_mean": float(np.nanmean(gr)),
        "wasserstein1": wasserstein1(gs, gr),
        "ks": ks_statistic(gs, gr),
    }
    es = np.array([kmer_entropy(s, entropy_k) for s in samples])
    res["kmer_entropy"] = {"k": entropy_k, "samples_mean": float(np.nanmean(es)), "samples_std": float(np.nanstd(es))}
    model = MarkovModel(reference, markov_order)
    res["markov_ppl"] = {"order": markov_order, "samples": model.perplexity(samples)}
    if memorisation:
        lm = longest_matches(samples, reference, both_strands)
        res["memorisation"] = {
            "longest_match_max": int(lm.max()),
            "longest_match_mean": float(lm.mean()),
            "longest_match_median": float(np.median(lm)),
            f"share_ge_{match_threshold}bp": float((lm >= match_threshold).mean()),
            "threshold": match_threshold,
            "both_strands": both_strands,
        }
    for name, fn in (extras or {}).items():
        res[name] = fn(samples, reference, is_floor)
    return res


def _floor_split(samples: Sequence[str], reference: Sequence[str], rng: np.random.Generator):
    """(held-out real set like the samples, rest of the reference) or None when too small."""
    n = len(samples)
    ref = list(reference)
    if len(ref) >= 2 * n:
        idx = rng.permutation(len(ref))
        return [ref[i] for i in idx[:n]], [ref[i] for i in idx[n:]]
    # long records: cut windows of the samples' median length
    w = int(np.median([len(s) for s in samples]))
    windows = [r[i : i + w] for r in ref for i in range(0, len(r) - w + 1, w)]
    if w > 0 and len(windows) >= 2 * n:
        idx = rng.permutation(len(windows))
        return [windows[i] for i in idx[:n]], [windows[i] for i in idx[n:]]
    return None


SETTINGS = ("kmax", "markov_order", "entropy_k", "match_threshold", "both_strands")  # compare's, recorded


def compare_settings(given: Mapping[str, object]) -> dict:
    """`given` (a subset of SETTINGS) completed with `compare`'s defaults, the one place they are written."""
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        raise TypeError(f"dna_metrics() got unexpected keyword arguments {unknown} (settings: {', '.join(SETTINGS)})")
    defaults = inspect.signature(compare).parameters
    return {k: given[k] if k in given else defaults[k].default for k in SETTINGS}


def dna_metrics(
    samples: Sequence[str],
    reference: Sequence[str],
    *,
    floor: bool = True,
    seed: int = 0,
    extras: Mapping[str, Callable[..., dict]] | None = None,
    discriminator: Callable[[list[str], list[str]], dict] | None = None,
    **settings,
) -> dict:
    """Metrics of `samples` against `reference` (lists of DNA strings), with the real-vs-real floor.

    `settings`: any of SETTINGS (kmax, markov_order, entropy_k, match_threshold, both_strands), with
    `compare`'s defaults, for the samples and the floor alike; recorded under "settings".
    `extras`: more metrics, name -> fn(samples, reference, is_floor) -> dict, stored under that name.
    `discriminator`: None, or fn(samples, reference) -> dict stored as "discriminator" (the command passes
    eval/discriminator.discriminator_test with its settings bound; imported there, not here: no import cycle).
    Returns {"samples": {...}, "reference_stats": {...}, "floor": {...} | None, "settings": {...}}."""
    samples = _clean(samples, "samples")
    reference = _clean(reference, "reference")
    opts = compare_settings(settings)
    if opts["kmax"] < 1 or opts["kmax"] > 12:
        raise DnadiffError(f"kmax must be in 1..12, got {opts['kmax']}")
    out = {"samples": compare(samples, reference, **opts, extras=extras)}
    er = np.array([kmer_entropy(s, opts["entropy_k"]) for s in reference])
    out["reference_stats"] = {
        "kmer_entropy_mean": float(np.nanmean(er)),
        "gc_mean": float(np.nanmean(gc_content(reference))),
        "total_bases": int(sum(len(r) for r in reference)),
    }
    out["floor"] = None
    if floor:
        split = _floor_split(samples, reference, np.random.default_rng(seed))
        if split is not None:
            held, rest = split
            out["floor"] = compare(held, rest, **opts, extras=extras, is_floor=True)
    if discriminator is not None:
        out["discriminator"] = discriminator(samples, reference)
    out["settings"] = dict(opts, floor=floor, seed=seed)
    return out


def summary_rows(res: dict) -> list[dict]:
    """Rows (metric, samples, real-vs-real floor) for a readable table."""
    s, f = res["samples"], res.get("floor") or {}

    def get(d, *keys):
        for k in keys:
            if not isinstance(d, dict) or k not in d:
                return ""
            d = d[k]
        return d

    rows = [{"metric": f"kmer JS k={k} (bits)", "samples": v, "floor": get(f, "kmer_js", k)}
            for k, v in s["kmer_js"].items()]
    if "kmer_pearson" in s:
        rows.append({"metric": f"{s['kmer_pearson']['k']}-mer Pearson r", "samples": s["kmer_pearson"]["r"],
                     "floor": get(f, "kmer_pearson", "r")})
    rows += [
        {"metric": "GC mean", "samples": s["gc"]["samples_mean"], "floor": get(f, "gc", "samples_mean")},
        {"metric": "GC Wasserstein-1", "samples": s["gc"]["wasserstein1"], "floor": get(f, "gc", "wasserstein1")},
        {"metric": "GC KS", "samples": s["gc"]["ks"], "floor": get(f, "gc", "ks")},
        {
            "metric": f"{s['kmer_entropy']['k']}-mer entropy (bits)",
            "samples": s["kmer_entropy"]["samples_mean"],
            "floor": get(f, "kmer_entropy", "samples_mean"),
        },
        {"metric": f"Markov-{s['markov_ppl']['order']} perplexity", "samples": s["markov_ppl"]["samples"],
         "floor": get(f, "markov_ppl", "samples")},
    ]
    if "memorisation" in s:
        m, fm = s["memorisation"], f.get("memorisation", {})
        key = f"share_ge_{m['threshold']}bp"
        rows += [
            {"metric": "longest match (max)", "samples": m["longest_match_max"],
             "floor": fm.get("longest_match_max", "")},
            {"metric": "longest match (median)", "samples": m["longest_match_median"],
             "floor": fm.get("longest_match_median", "")},
            {"metric": f"share with >= {m['threshold']}-bp match", "samples": m[key], "floor": fm.get(key, "")},
        ]
    if "motifs" in s:
        n = s["motifs"]["num_motifs"]
        rows += [
            {"metric": f"motif hits/kb ({n} JASPAR; reference {s['motifs']['hits_per_kb_reference']:.4g})",
             "samples": s["motifs"]["hits_per_kb_samples"], "floor": get(f, "motifs", "hits_per_kb_samples")},
            {"metric": "motif hit-rate Spearman", "samples": s["motifs"]["spearman"],
             "floor": get(f, "motifs", "spearman")},
            {"metric": "motif spectrum JS (bits)", "samples": s["motifs"]["js"], "floor": get(f, "motifs", "js")},
        ]
    if "frechet" in s:
        rows.append({"metric": "Frechet distance (in-house embedder; not SFID/FBD)",
                     "samples": s["frechet"]["distance"],
                     "floor": get(f, "frechet", "distance")})
    d = res.get("discriminator") or {}
    for name, label in (("cnn", "CNN"), ("kmer_lr", "k-mer LR")):  # eval/discriminator.py: AUROC, SE, p per judge
        if d.get(name):
            rows += [{"metric": f"discriminator {label} {what}", "samples": d[name][key],
                      "floor": d[name].get(f"floor_{key}", "")}
                     for key, what in (("auroc", "AUROC (0.5 = indistinguishable)"), ("std_error", "AUROC SE"),
                                       ("p_value", "p-value (binomial, accuracy)"))]
    c = res.get("classifier")
    if c:
        rows.append({"metric": f"held-out classifier accuracy (n={c['num_samples']})", "samples": c["accuracy"],
                     "floor": ""})
        rows.append({"metric": "held-out classifier mean p(class)", "samples": c["mean_probability"], "floor": ""})
    return rows
