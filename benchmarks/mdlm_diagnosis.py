"""Why an MDLM's samples are worse than its likelihood (issue 33, section 1): measurements, not guesses.

    DNADIFF_DATA=/path/to/shared/data python benchmarks/mdlm_diagnosis.py \
        --mdlm RUN/mdlm/model --checkpoint RUN/mdlm/checkpoints/last.ckpt \
        --markov RUN/markov_best/model --ar RUN/mamba_ar/model \
        --checks gap,copy,samples --out-dir results/mdlm_diagnosis_parts

Checks (--checks, comma-separated; each writes OUT_DIR/CHECK.json):
- gap: per-window bits/base on --windows N-free valid windows of the MDLM's length: the MDLM bound (K
  stratified t-samples, and K_big on the low-entropy windows: is the Monte-Carlo estimate the problem),
  the Markov chain (exact) and the AR (exact), binned by the window's chain bits/base (its "entropy"
  under the chain): is the MDLM's deficit in the low-entropy (repeat) windows? With it the masked-token
  cross-entropy CE(t) at fixed mask rates t, per bin: for the log-linear schedule the continuous bound
  per base is ∫_0^1 CE(t) dt (MDLM eq. 10 with weight 1/t and E[#masked] = tL), so the curve shows at
  which mask rates the bits are lost.
- copy: one position in 16 masked (every other base visible, the masked ones 16 apart): the MDLM's
  cross-entropy there vs the Markov chain's exact conditional given both sides,
  p(x_i | rest) ∝ Π_{j=i}^{i+k} p(x_j | x_{j-k..j-1}) (the chain's factors that read x_i), per bin. If
  the MDLM cannot predict a base of a repeat with 15 visible bases on each side as well as a k-mer chain,
  the model is at fault, not the bound.
- samples: sample sets (--variants, names of VARIANTS) and their metrics against N-free valid windows
  of the same length (dnadiff.eval.dna_metrics.compare), GC and 3-mer JS by position bin along the
  sample, the Markov chain's and the MDLM's own bits/base on 128-bp crops of the samples at the start,
  middle and end, and for MDLM variants the sampler's first-step (all masked) and last-step base
  distributions at the masked positions vs the real base composition.

Windows: the MDLM config's valid split tiled at its seq_len, --windows evenly spread (as
pipelines/cpu_hour.py), only those with every position scored (no N, no [PAD] tail).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

LN2 = math.log(2.0)
BASES = "ACGT"
# name -> how a sample set is drawn: model (mdlm | markov | ar), length, num, and the sampler's settings
VARIANTS = {
    "mdlm_L128_s64": {"model": "mdlm", "length": 128, "num": 128, "steps": 64},
    "mdlm_L128_s128": {"model": "mdlm", "length": 128, "num": 128, "steps": 128},
    "mdlm_L1024_s64": {"model": "mdlm", "length": 1024, "num": 32, "steps": 64},
    "mdlm_L1024_s1024": {"model": "mdlm", "length": 1024, "num": 8, "steps": 1024},
    "mdlm_L1024_s64_raw": {"model": "mdlm", "length": 1024, "num": 32, "steps": 64, "weights": "raw"},
    "mdlm_L1024_s64_f32": {"model": "mdlm", "length": 1024, "num": 32, "steps": 64, "float32_draws": True},
    "mdlm_L1024_semiar128": {"model": "mdlm", "length": 1024, "num": 32, "steps": 64, "sampler": "semi_ar",
                             "options": {"window": 128, "stride": 64}},
    "markov_L128": {"model": "markov", "length": 128, "num": 128},
    "markov_L1024": {"model": "markov", "length": 1024, "num": 32},
    "ar_L1024": {"model": "ar", "length": 1024, "num": 32},
}
CE_TIMES = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.98)


# ---------------------------------------------------------------- windows and per-window scores
def valid_windows(model, n: int):
    """(ids Long[W, L], mask Long[W, L]) of the N-free, fully scored windows among n evenly spread."""
    import torch

    from dnadiff.data import build_split_dataset

    data = build_split_dataset(model.config, model.tokenizer, "valid")
    idx = sorted(set(int(i) for i in np.linspace(0, len(data) - 1, min(n, len(data))).round().astype(int)))
    items = [data[i] for i in idx]
    ids = torch.stack([torch.as_tensor(it["input_ids"]) for it in items]).long()
    mask = torch.stack([torch.as_tensor(it["attention_mask"]) for it in items]).long()
    full = mask.bool().all(dim=1)
    return ids[full], mask[full]


def per_window_bits(model, ids, mask, t_samples: int = 1, seed: int = 0, batch: int = 32) -> np.ndarray:
    """Bits/base of each window: the exact NLL (AR, Markov) or the MDLM bound with K stratified t-samples."""
    import torch

    from dnadiff.eval.perplexity import evaluate_bound

    diffusion = bool(getattr(model.objective, "needs_time", False))
    k = t_samples if diffusion else 1
    gen = torch.Generator().manual_seed(seed)
    model.backbone.eval()
    batches = [(ids[s : s + batch], mask[s : s + batch]) for s in range(0, len(ids), batch)]
    res = evaluate_bound(model.denoiser, model.objective, batches, num_samples=k, generator=gen,
                         stratify_repeats=diffusion and k > 1, per_sequence=True)
    nats, tok = np.asarray(res["sequence_nats"]), np.asarray(res["sequence_tokens"])
    return nats / np.maximum(tok, 1) / LN2


def entropy_bins(chain_bits: np.ndarray, edges=(1.3, 1.6, 1.8, 1.9, 2.0)) -> list[tuple[str, np.ndarray]]:
    """Windows grouped by the chain's bits/base: < e0, [e0, e1), ..., >= e_last."""
    lo = [-np.inf, *edges]
    hi = [*edges, np.inf]
    out = []
    for a, b in zip(lo, hi):
        name = f"< {b:g}" if a == -np.inf else (f">= {a:g}" if b == np.inf else f"[{a:g}, {b:g})")
        out.append((name, (chain_bits >= a) & (chain_bits < b)))
    return out


def mean_se(d: np.ndarray) -> dict:
    n = int(d.size)
    se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    return {"mean": float(d.mean()) if n else float("nan"), "se": se, "n": n}


def ce_curve(model, ids, mask, times=CE_TIMES, repeats: int = 2, seed: int = 0, batch: int = 64) -> np.ndarray:
    """Float[W, len(times), 2]: per window the summed masked-token cross-entropy (bits) and the masked count at
    each fixed mask rate t (the same draws for every window; SUBS: -log p_θ(x0 | x_t) at masked positions)."""
    import torch

    from dnadiff.diffusion.base import q_sample
    from dnadiff.diffusion.subs import subs_masked_nll

    obj, den = model.objective, model.denoiser
    out = np.zeros((len(ids), len(times), 2))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for s in range(0, len(ids), batch):
            x0, m = ids[s : s + batch], mask[s : s + batch]
            for j, t in enumerate(times):
                tt = torch.full((x0.shape[0],), float(t))
                for _ in range(repeats):
                    xt = q_sample(x0, tt, obj.schedule, obj.mask_id, m, gen)
                    nll = subs_masked_nll(den(xt, tt), x0, obj.mask_id)
                    hit = (xt == obj.mask_id) & m.bool()
                    out[s : s + batch, j, 0] += (nll * hit).sum(dim=1).double().numpy() / LN2
                    out[s : s + batch, j, 1] += hit.sum(dim=1).double().numpy()
    return out


# ---------------------------------------------------------------- the copy check
def chain_logp(chain_model, x):
    """Float[B, L] natural-log p(x_i | its chain context) of every position (the `ar` objective's layout)."""
    from dnadiff.diffusion.ar import ar_inputs

    bos = chain_model.objective.bos_id
    logits = chain_model.denoiser(ar_inputs(x, bos), None).float().log_softmax(dim=-1)
    return logits.gather(-1, x.unsqueeze(-1)).squeeze(-1)


def copy_check(mdlm, chain_model, ids, spacing: int = 16, batch: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Per window, summed bits at the masked positions (one in `spacing`, every offset once, so every position
    is scored once): (MDLM, chain's exact conditional given both sides). Float[W] each."""
    import torch

    from dnadiff.diffusion.subs import subs_masked_nll
    from dnadiff.tokenizers.dna import DNATokenizer

    k = chain_model.backbone.order
    if spacing <= k:
        raise ValueError(f"spacing {spacing} must exceed the chain order {k}")
    base_ids = torch.tensor([DNATokenizer.a_id, DNATokenizer.c_id, DNATokenizer.g_id, DNATokenizer.t_id])
    mask_id = mdlm.tokenizer.mask_id
    m_bits, c_bits = np.zeros(len(ids)), np.zeros(len(ids))
    L = ids.shape[1]
    with torch.no_grad():
        for s in range(0, len(ids), batch):
            x0 = ids[s : s + batch]
            for off in range(spacing):
                pos = torch.arange(off, L, spacing)
                xt = x0.clone()
                xt[:, pos] = mask_id
                t = torch.full((x0.shape[0],), 1.0 / spacing)
                nll = subs_masked_nll(mdlm.denoiser(xt, t), x0, mask_id)[:, pos]  # (B, P)
                m_bits[s : s + batch] += nll.sum(dim=1).double().numpy() / LN2
                # chain: score of each candidate base v at every masked position (their factors never overlap)
                scores = []
                for v in base_ids:
                    xv = x0.clone()
                    xv[:, pos] = v
                    lp = chain_logp(chain_model, xv)  # (B, L)
                    cs = torch.nn.functional.pad(lp, (1, 0)).cumsum(dim=1)  # cs[:, j] = sum lp[:, :j]
                    end = torch.clamp(pos + k + 1, max=L)
                    scores.append(cs[:, end] - cs[:, pos])  # (B, P): the factors j = i..i+k that read x_i
                scores = torch.stack(scores, dim=-1)  # (B, P, 4)
                true = (x0[:, pos, None] == base_ids).float().argmax(dim=-1)  # (B, P)
                lp_true = scores.gather(-1, true.unsqueeze(-1)).squeeze(-1) - scores.logsumexp(dim=-1)
                c_bits[s : s + batch] += (-lp_true).sum(dim=1).double().numpy() / LN2
    return m_bits / L, c_bits / L


# ---------------------------------------------------------------- sampling
class StepRecorder:
    """A guidance hook that changes nothing and keeps the base distribution p_θ(x0 | x_t) at the masked
    positions of the first and the last step of each sampler loop (A, C, G, T; summed over positions)."""

    def __init__(self):
        self.first = np.zeros(4)
        self.last = np.zeros(4)
        self.first_by_pos: list[np.ndarray] = []
        self._prev = None

    def __call__(self, state, logits):
        from dnadiff.diffusion.subs import subs_log_probs
        from dnadiff.tokenizers.dna import DNATokenizer

        ids = [DNATokenizer.a_id, DNATokenizer.c_id, DNATokenizer.g_id, DNATokenizer.t_id]
        p = subs_log_probs(logits.double(), state.x, state.mask_id).exp()[..., ids]  # (B, L, 4)
        masked = (state.x == state.mask_id).unsqueeze(-1).double()
        summed = (p * masked).sum(dim=(0, 1)).numpy()
        if state.step == 0:
            self.first += summed
            self.first_by_pos.append((p * masked).sum(dim=0).numpy())
            if self._prev is not None:
                self.last += self._prev
        self._prev = summed if bool(masked.any()) else self._prev
        return logits

    def close(self):
        if self._prev is not None:
            self.last += self._prev
            self._prev = None


def draw(models: dict, name: str, seed: int, max_num: int = 0) -> dict:
    """Sample one variant: {"seqs", "seconds", "recorder"}."""
    from dnadiff.model import SuppressTokens

    v = dict(VARIANTS[name])
    v["num"] = min(v["num"], max_num) if max_num else v["num"]
    model = models[v["model"]] if v.get("weights") != "raw" else models["mdlm_raw"]
    t0 = time.time()
    rec = None
    if v["model"] == "mdlm":
        opts = dict(v.get("options", {}))
        if v.get("float32_draws"):
            opts["float32_draws"] = True
        call_len = int(opts.get("window", v["length"]))  # ~8,192 tokens a call (the CPU default of dnadiff sample)
        smp = model.build_sampler(v.get("sampler", "ancestral"), v["steps"], batch_size=max(1, 8192 // call_len),
                                  **opts)
        rec = StepRecorder()
        target = smp.inner if hasattr(smp, "inner") else smp
        target.add_guidance(rec)
        model.backbone.eval()
        import torch

        with torch.no_grad():
            x = smp.generate(SuppressTokens(model.denoiser, model.banned_ids()), model.schedule,
                             model.tokenizer.mask_id, (v["num"], v["length"]), generator=seed)
        rec.close()
    else:
        x = model.generate(num=v["num"], length=v["length"], generator=seed)
    seqs = model.decode(x)
    return {"seqs": seqs, "seconds": time.time() - t0, "recorder": rec}


def positional(seqs: list[str], ref: list[str], bin_bp: int) -> dict:
    """GC and 3-mer JS (vs the reference's 3-mers of all positions) per position bin along the sequence."""
    from dnadiff.eval.dna_metrics import gc_content, js_divergence, kmer_counts

    L = min(len(s) for s in seqs)
    ref3 = kmer_counts(ref, 3)
    rows = []
    for a in range(0, L, bin_bp):
        part = [s[a : a + bin_bp] for s in seqs]
        rpart = [s[a : a + bin_bp] for s in ref]
        rows.append({"start": a, "gc": float(np.nanmean(gc_content(part))),
                     "gc_real": float(np.nanmean(gc_content(rpart))),
                     "js3": js_divergence(kmer_counts(part, 3), ref3)})
    return {"bin_bp": bin_bp, "bins": rows}


def cpg_ratio(seqs: list[str]) -> float:
    """CpG observed / expected (CG count / (C count * G count / length)), pooled: real human DNA is depleted."""
    cg = sum(s.count("CG") for s in seqs)
    c, g, n = sum(s.count("C") for s in seqs), sum(s.count("G") for s in seqs), sum(len(s) for s in seqs)
    return float(cg / max(c * g / max(n, 1), 1e-12))


def crop_bits(models: dict, seqs: list[str], t_samples: int, seed: int) -> dict:
    """MDLM bound and chain bits/base on 128-bp crops of the samples (start, middle, end)."""
    import torch

    mdlm, chain = models["mdlm"], models["markov"]
    w = mdlm.config.data.seq_len
    L = len(seqs[0])
    starts = sorted({0, max((L - w) // 2, 0), max(L - w, 0)})
    out = {}
    for a in starts:
        ids = torch.stack([torch.as_tensor(mdlm.tokenizer.encode(s[a : a + w])) for s in seqs]).long()
        ids = ids[:, -w:] if ids.shape[1] > w else ids
        mask = torch.ones_like(ids)
        out[str(a)] = {"mdlm_bound": float(per_window_bits(mdlm, ids, mask, t_samples, seed).mean()),
                       "chain": float(per_window_bits(chain, ids, mask).mean())}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mdlm", default=None)
    ap.add_argument("--checkpoint", default=None, help="the MDLM's training checkpoint (raw weights)")
    ap.add_argument("--markov", default=None)
    ap.add_argument("--ar", default=None)
    ap.add_argument("--checks", default="gap,copy,samples")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--windows", type=int, default=1000)
    ap.add_argument("--t-samples", type=int, default=16)
    ap.add_argument("--t-samples-big", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference-windows", type=int, default=1000)
    ap.add_argument("--out-dir", required=True, help="one JSON per check (and per sample variant)")
    ap.add_argument("--report", default=None, help="STEM: combine OUT_DIR into STEM.json and STEM_*.png, then exit")
    ap.add_argument("--save-samples", default=None, help="folder for the FASTA of every variant")
    ap.add_argument("--max-num", type=int, default=0, help="at most this many sequences per variant (0: the variant's)")
    args = ap.parse_args(argv)

    if not args.report and not (args.mdlm and args.markov):
        print("error: --mdlm and --markov are required (except with --report)", file=sys.stderr)
        return 2

    import torch

    from dnadiff.checkpoint import load
    from dnadiff.errors import DnadiffError
    from dnadiff.utils import write_json

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    out_dir = Path(args.out_dir)
    if args.report:
        report(out_dir, Path(args.report))
        return 0
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        models = {"mdlm": load(args.mdlm), "markov": load(args.markov)}
        if args.ar:
            models["ar"] = load(args.ar)
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    checks = [c for c in args.checks.split(",") if c]
    common = {"command": "python benchmarks/mdlm_diagnosis.py " + " ".join(argv or sys.argv[1:]),
              "threads": torch.get_num_threads()}
    if {"gap", "gap_ar", "copy"} & set(checks):
        ids, mask = valid_windows(models["mdlm"], args.windows)
        chain_bits = per_window_bits(models["markov"], ids, mask)
    if "gap" in checks:
        t0 = time.time()
        res = dict(common, windows=int(len(ids)), t_samples=args.t_samples)
        bits = {"chain": chain_bits, "mdlm": per_window_bits(models["mdlm"], ids, mask, args.t_samples, args.seed)}
        if "ar" in models:
            bits["ar"] = per_window_bits(models["ar"], ids, mask)
        ce = ce_curve(models["mdlm"], ids, mask, seed=args.seed)
        low = chain_bits < 1.3
        big = per_window_bits(models["mdlm"], ids[low], mask[low], args.t_samples_big, args.seed + 1)
        res["low_entropy_bound_more_t"] = {"windows": int(low.sum()), "k": args.t_samples_big,
                                           "mdlm_k_big": float(big.mean()),
                                           "mdlm_k": float(bits["mdlm"][low].mean())}
        res["bins"] = []
        for name, sel in [("all", np.ones_like(low)), *entropy_bins(chain_bits)]:
            row = {"bin": name, "n": int(sel.sum()), "share": float(sel.mean())}
            for k, b in bits.items():
                row[k] = float(b[sel].mean()) if sel.any() else float("nan")
            row["mdlm_minus_chain"] = mean_se(bits["mdlm"][sel] - chain_bits[sel])
            if "ar" in bits:
                row["ar_minus_chain"] = mean_se(bits["ar"][sel] - chain_bits[sel])
                row["mdlm_minus_ar"] = mean_se(bits["mdlm"][sel] - bits["ar"][sel])
            c = ce[sel].sum(axis=0)
            row["ce_by_t"] = {f"{t:g}": float(c[j, 0] / max(c[j, 1], 1)) for j, t in enumerate(CE_TIMES)}
            res["bins"].append(row)
        res["per_window"] = {k: [round(float(x), 5) for x in b] for k, b in bits.items()}
        res["seconds"] = round(time.time() - t0, 1)
        write_json(out_dir / "gap.json", res)
        print(json.dumps({k: v for k, v in res.items() if k != "per_window"}, indent=1))
    if "gap_ar" in checks:  # the AR's per-window bits added to an existing gap.json (same windows)
        res = json.loads((out_dir / "gap.json").read_text())
        ar_bits = per_window_bits(models["ar"], ids, mask)
        pw = {k: np.asarray(v) for k, v in res["per_window"].items()}
        if len(pw["chain"]) != len(ar_bits):
            raise SystemExit("error: gap.json holds other windows (rerun the gap check)")
        for row, (_, sel) in zip(res["bins"], [("all", np.ones(len(ar_bits), bool)), *entropy_bins(pw["chain"])]):
            row["ar"] = float(ar_bits[sel].mean()) if sel.any() else float("nan")
            row["ar_minus_chain"] = mean_se(ar_bits[sel] - pw["chain"][sel])
            row["mdlm_minus_ar"] = mean_se(pw["mdlm"][sel] - ar_bits[sel])
        res["per_window"]["ar"] = [round(float(x), 5) for x in ar_bits]
        res["command_ar"] = common["command"]
        write_json(out_dir / "gap.json", res)
        print(json.dumps({k: v for k, v in res.items() if k != "per_window"}, indent=1))
    if "copy" in checks:
        t0 = time.time()
        m_bits, c_bits = copy_check(models["mdlm"], models["markov"], ids)
        res = dict(common, windows=int(len(ids)), spacing=16, chain_order=models["markov"].backbone.order, bins=[])
        for name, sel in [("all", np.ones(len(ids), bool)), *entropy_bins(chain_bits)]:
            res["bins"].append({"bin": name, "n": int(sel.sum()), "mdlm": float(m_bits[sel].mean()),
                                "chain_both_sides": float(c_bits[sel].mean()),
                                "chain_left_only": float(chain_bits[sel].mean()),
                                "mdlm_minus_chain_both_sides": mean_se(m_bits[sel] - c_bits[sel])})
        res["seconds"] = round(time.time() - t0, 1)
        write_json(out_dir / "copy.json", res)
        print(json.dumps(res, indent=1))
    if "samples" in checks:
        run_samples(args, models, common, out_dir)
    if "first" in checks:  # every saved variant's first --max-num sequences (the same per-sequence seeds): paired sets
        first_n(args, models, common, out_dir)
    return 0


def first_n(args, models: dict, common: dict, out_dir: Path) -> None:
    """Metrics of the first --max-num sequences of each FASTA in --save-samples, so that variants drawn with
    different counts compare at the same size (small sets bias k-mer JS and Pearson)."""
    from dnadiff.data.datasets import genome_paths
    from dnadiff.data.fasta import genome_reference
    from dnadiff.eval.dna_metrics import compare
    from dnadiff.utils import write_json

    fasta, bed = genome_paths(models["mdlm"].config)
    refs: dict[int, list[str]] = {}
    res = dict(common, n=args.max_num, variants={})
    for fa in sorted(Path(args.save_samples).glob("*.fa")):
        seqs = [ln.strip() for ln in fa.read_text().splitlines() if ln and not ln.startswith(">")][: args.max_num]
        L = len(seqs[0])
        if L not in refs:
            refs[L] = genome_reference(fasta, bed, "valid", L, args.reference_windows)
        m = compare(seqs, refs[L], kmax=6, memorisation=False)
        res["variants"][fa.stem] = {"n": len(seqs), "length": L, "js3": m["kmer_js"]["3"], "js6": m["kmer_js"]["6"],
                                    "pearson3": m["kmer_pearson"]["r"], "gc": m["gc"]["samples_mean"],
                                    "gc_w1": m["gc"]["wasserstein1"], "cpg_obs_exp": cpg_ratio(seqs)}
    write_json(out_dir / f"first{args.max_num}.json", res)
    print(json.dumps(res["variants"], indent=1))


def run_samples(args, models: dict, common: dict, out_dir: Path) -> None:
    from dnadiff.data.datasets import genome_paths
    from dnadiff.data.fasta import genome_reference
    from dnadiff.eval.dna_metrics import compare
    from dnadiff.utils import write_json

    names = [n for n in args.variants.split(",") if n]
    bad = [n for n in names if n not in VARIANTS]
    if bad:
        raise SystemExit(f"error: --variants: unknown {', '.join(bad)} (known: {', '.join(VARIANTS)})")
    if any(VARIANTS[n].get("weights") == "raw" for n in names):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from ema_vs_raw import weight_sets

        from dnadiff.checkpoint import load

        raw = load(args.mdlm)
        raw.backbone.load_state_dict(weight_sets(args.checkpoint)["raw"])
        models["mdlm_raw"] = raw
    fasta, bed = genome_paths(models["mdlm"].config)
    refs: dict[int, list[str]] = {}
    train_ref = genome_reference(fasta, bed, "train", 1024, 2000)
    base_comp = np.array([sum(s.count(b) for s in train_ref) for b in BASES], float)
    for name in names:
        path = out_dir / f"samples_{name}.json"
        if path.exists():
            continue
        v = VARIANTS[name]
        L = v["length"]
        if L not in refs:
            refs[L] = genome_reference(fasta, bed, "valid", L, args.reference_windows)
        d = draw(models, name, args.seed, args.max_num)
        seqs = d["seqs"]
        if args.save_samples:
            Path(args.save_samples).mkdir(parents=True, exist_ok=True)
            with open(Path(args.save_samples) / f"{name}.fa", "w") as fh:
                fh.writelines(f">{name}_{i}\n{s}\n" for i, s in enumerate(seqs))
        t0 = time.time()
        met = compare(seqs, refs[L], kmax=6, memorisation=False)
        res = dict(common, variant=name, settings=v, sample_seconds=round(d["seconds"], 1), metrics=met,
                   positional=positional(seqs, refs[L], 64 if L > 128 else 32),
                   crops=crop_bits(models, seqs, 8, args.seed),
                   cpg_obs_exp={"samples": cpg_ratio(seqs), "real": cpg_ratio(refs[L])},
                   train_base_composition=dict(zip(BASES, (base_comp / base_comp.sum()).round(4).tolist())))
        rec = d["recorder"]
        if rec is not None:
            res["first_step"] = dict(zip(BASES, (rec.first / rec.first.sum()).round(4).tolist()))
            res["last_step"] = dict(zip(BASES, (rec.last / max(rec.last.sum(), 1e-12)).round(4).tolist()))
            if rec.first_by_pos:
                by = sum(rec.first_by_pos)  # (L, 4)
                gc_pos = (by[:, 1] + by[:, 2]) / by.sum(axis=1)
                res["first_step_gc_by_position"] = [round(float(g), 4) for g in gc_pos]
        res["real_crops"] = crop_bits(models, refs[L][: len(seqs)], 8, args.seed)
        res["metric_seconds"] = round(time.time() - t0, 1)
        write_json(path, res)
        m = met
        print(f"{name}: {d['seconds']:.0f} s sampling; JS3 {m['kmer_js']['3']:.4f} JS6 {m['kmer_js']['6']:.4f} "
              f"P3 {m['kmer_pearson']['r']:.4f} GC {m['gc']['samples_mean']:.4f} (real {m['gc']['reference_mean']:.4f})"
              f" W1 {m['gc']['wasserstein1']:.4f} H3 {m['kmer_entropy']['samples_mean']:.3f}"
              f" CpG o/e {res['cpg_obs_exp']['samples']:.3f} (real {res['cpg_obs_exp']['real']:.3f})", flush=True)


def report(parts: Path, stem: Path) -> None:
    """Combine OUT_DIR's check JSONs into STEM.json and draw STEM_gap.png (per-window gap and CE(t) by the
    chain's bits/base) and STEM_positional.png (GC and 3-mer JS by position along 1,024-bp samples)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dnadiff.utils import write_json

    out: dict = {}
    for name in ("gap", "copy"):
        if (parts / f"{name}.json").exists():
            out[name] = json.loads((parts / f"{name}.json").read_text())
    for p in sorted(parts.glob("first*.json")):
        out[p.stem] = json.loads(p.read_text())
    out["samples"] = {p.stem.removeprefix("samples_"): json.loads(p.read_text())
                      for p in sorted(parts.glob("samples_*.json"))}
    write_json(stem.with_suffix(".json"), out)
    if "gap" in out:
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        bins = [b for b in out["gap"]["bins"] if b["bin"] != "all" and b["n"] > 1]
        x = np.arange(len(bins))
        for key, lab, dx in (("mdlm_minus_chain", "MDLM bound − chain", -0.15), ("ar_minus_chain", "AR − chain", 0.15)):
            if key in bins[0]:
                ax[0].errorbar(x + dx, [b[key]["mean"] for b in bins], yerr=[2 * b[key]["se"] for b in bins],
                               fmt="o", capsize=3, label=lab)
        ax[0].axhline(0, color="k", lw=0.5)
        ax[0].set_xticks(x, [f"{b['bin']}\n({b['share']:.0%})" for b in bins], fontsize=8)
        ax[0].set_xlabel("window's Markov k=9 bits/base (share of windows)")
        ax[0].set_ylabel("bits/base vs the chain (± 2 SE)")
        ax[0].legend(fontsize=8)
        if "copy" in out:
            cb = [b for b in out["copy"]["bins"] if b["bin"] != "all" and b["n"] > 1]
            ax[0].errorbar(x, [b["mdlm_minus_chain_both_sides"]["mean"] for b in cb],
                           yerr=[2 * b["mdlm_minus_chain_both_sides"]["se"] for b in cb], fmt="s", capsize=3,
                           label="1-in-16 masked: MDLM − chain(both sides)")
            ax[0].legend(fontsize=7)
        for b in bins:
            ts = [float(t) for t in b["ce_by_t"]]
            ax[1].plot(ts, list(b["ce_by_t"].values()), "o-", ms=3, label=b["bin"])
        ax[1].set_xlabel("mask rate t")
        ax[1].set_ylabel("MDLM masked-token cross-entropy (bits)")
        ax[1].legend(fontsize=7, title="chain bits/base", title_fontsize=7)
        fig.tight_layout()
        fig.savefig(str(stem) + "_gap.png", dpi=120)
        plt.close(fig)
    long = {k: v for k, v in out["samples"].items() if v["settings"]["length"] >= 1024}
    if long:
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        for k, v in long.items():
            b = v["positional"]["bins"]
            ax[0].plot([r["start"] for r in b], [r["gc"] for r in b], "o-", ms=3, label=k)
            ax[1].plot([r["start"] for r in b], [r["js3"] for r in b], "o-", ms=3, label=k)
        b = next(iter(long.values()))["positional"]["bins"]
        ax[0].plot([r["start"] for r in b], [r["gc_real"] for r in b], "k--", label="real valid windows")
        for a in ax:
            a.axvline(128, color="grey", lw=0.5)
            a.set_xlabel("position along the sample (bp; bin start; grey: the MDLM's training length)")
        ax[0].set_ylabel("GC")
        ax[1].set_ylabel("3-mer JS vs real (bits, per 64-bp bin)")
        ax[0].legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(str(stem) + "_positional.png", dpi=120)
        plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
