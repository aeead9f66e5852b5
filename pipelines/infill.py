"""Infilling benchmark (issue 47 §1): the conditional NLL of hidden bases given the rest, per window, paired with
the Markov chain's exact conditional; and DHS sequences whose central span is filled in, judged.

    python pipelines/infill.py --threads 1                   # results/infill_cpu.{json,md,png}
    python pipelines/infill.py --dry-run                     # every row at toy sizes, tiny models; no table
    python pipelines/infill.py --combine A.json B.json       # one table of runs of one data set each (no scoring)

Data: chr22 test windows (genome + BED, test split, no N, the MDLM's training length) and DHS chr1 test
sequences (200 bp, `per_class` of each cell type). Masks (dnadiff.eval.infill_nll.hidden_mask): central spans of
8, 32 and 96 bp, and 15 % / 50 % of the bases at random (one draw per window, seed 0, the same for every model).
Rows, bits per hidden base (Σ nats / Σ hidden bases / ln 2) and `paired_markov` = the per-window difference from
the Markov row (mean ± SE over windows; eval/paired.py):
  markov        the order-k KN chain (k chosen on valid), exact p(x_H | x_V) by forward-backward (both flanks)
  mdlm_nelbo    the conditional NELBO (visible bases never masked), `nelbo_samples` draws per window
  mdlm_ordered  exact NLL of decoding the hidden bases left to right; mdlm_ordered_rc: the strand-averaged model
                (left out for an RC-equivariant Caduceus-PS, where it is mdlm_ordered)
  ar_left       the AR's NLL of the span given its left flank only (contiguous spans only)
  bd3_nelbo     block diffusion's conditional NELBO: each block's hidden bases given every block before it and the
                visible bases of its own block (the right flank beyond that block is not read; eval/infill_nll.py)
DHS models are class-conditional and scored with each sequence's own class (the Markov: its class's chain).
Samples (DHS, FILL_MASK): the span of each test sequence refilled by the conditional MDLM (first-hitting, own
class) and by the class's Markov chain (exact posterior draw); judged by the evaluation oracle (its argmax is the
sequence's own class: `class_kept`, real unfilled sequences as the reference row), JASPAR 2024 motif hits in the
span ± 10 bp (`motif_recall`: Σ min(hits filled, hits real) / Σ hits real, per sequence and motif) and the k-mer JS
(k = 3, 4) of the filled spans against the real spans.

Models (defaults: the earlier pipelines' folders): --chr22-mdlm / --chr22-ar (pipelines/cpu_hour.py), --chr22-markov
(fitted here on the train split when missing: seconds to minutes), --dhs-mdlm / --dhs-ar / --dhs-markov /
--dhs-oracle (pipelines/dhs_benchmark.py, dhs_oracles.py), --chr22-bd3 / --dhs-bd3 (pipelines/block_diffusion.py's
B = 4 model, dhs_benchmark.py's bd3 row). A missing chr22 MDLM or AR is trained here for --train-minutes (the
cpu-hour config, stated in the table); a missing block diffusion or DHS model drops its rows (stated).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import common
import numpy as np
import torch
from infill_report import FILL_MASK, MASKS, combine, markdown, plot

DEFAULTS = {"chr22_mdlm": "runs/cpu_hour/caduceus_mdlm/model", "chr22_ar": "runs/cpu_hour/mamba_ar/model",
            "chr22_bd3": "runs/block_diffusion/bd3lm4/model",
            "chr22_markov": "runs/infill/models/markov_chr22/model", "dhs_mdlm": "runs/dhs_benchmark/models/cfg/model",
            "dhs_ar": "runs/dhs_benchmark/models/ar/model", "dhs_bd3": "runs/dhs_benchmark/models/bd3/model",
            "dhs_markov": "runs/dhs_benchmark/models/markov/model", "dhs_oracle": "runs/dhs_oracles/eval_oracle"}
BD3_DRY = ("experiments/cpu_hour_mamba_bd3lm", ("objective.block_size=4",))  # a dry run's tiny bd3 model
SCALES = {"cpu": {"chr22_windows": 256, "per_class": 64, "nelbo_samples": 4, "batch": 64, "max_order": 10},
          "dry": {"chr22_windows": 4, "per_class": 2, "nelbo_samples": 1, "batch": 4, "max_order": 3}}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for key, default in DEFAULTS.items():
        p.add_argument("--" + key.replace("_", "-"), default=default, help=f"model directory (default {default}; "
                       "none: leave its rows out)")
    p.add_argument("--data", default="chr22,dhs", help="chr22, dhs or both (default)")
    p.add_argument("--train-minutes", type=float, default=10.0, help="budget of a chr22 model trained here")
    p.add_argument("--chr22-windows", type=int, default=None, help="chr22 test windows (default 256)")
    p.add_argument("--per-class", type=int, default=None, help="DHS test sequences per cell type (default 64)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--work", default="runs/infill", help="work folder (models fitted or trained here)")
    p.add_argument("--results", default="results/infill_cpu", help="results path without extension")
    p.add_argument("--note", default="", help="a line for the table's header (e.g. 'preliminary: 10-minute models')")
    p.add_argument("--dry-run", action="store_true", help="toy sizes and tiny models in a temporary folder; no table")
    p.add_argument("--combine", nargs="+", metavar="JSON", default=None,
                   help="no scoring: the rows of earlier runs (each of other data sets, same settings) in one table at "
                        "--results")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- models


def prepare_chr22(args, sc: dict, work: Path, dry: bool, log) -> tuple[dict, list[str], tuple[str, str]]:
    import sample_quality as sq

    from dnadiff.data_root import bundled_data_root, data_root

    root = Path(bundled_data_root()) / "chr22_sample" if dry else Path(data_root()) / "hg19_chr22_subset"
    fasta, bed = root / ("chr22_sample.fa.gz" if dry else "chr22.fa.gz"), root / "sequences.bed"
    over = [f"data.fasta={fasta}", f"data.bed={bed}"]
    models, notes = {}, []
    markov = Path(args.chr22_markov)
    if dry or not (markov / "config.json").is_file():
        markov = Path(sq.fit_markov(work / "models", over + ["data.seq_len=128"], -1, sc["max_order"], "markov_chr22"))
        notes.append(f"chr22 Markov: fitted here (order chosen on valid among 0..{sc['max_order']})")
    models["markov"] = str(markov)
    for key, name in (("mdlm", "caduceus_mdlm"), ("ar", "mamba_ar")):
        given = Path(getattr(args, f"chr22_{key}"))
        if str(given) == "none" or (not dry and (given / "config.json").is_file()):  # none: rows left out
            models.update({} if str(given) == "none" else {key: str(given)})
            continue
        models[key] = sq.train_model(work / "models", name, over, args.train_minutes, dry)
        notes.append(f"chr22 {key}: trained here for at most {args.train_minutes:g} min ({sq.TRAINED[name]})")
    given = Path(args.chr22_bd3)  # block diffusion (pipelines/block_diffusion.py's model): used where it exists
    if dry:
        models["bd3"] = sq.train_model(work / "models", "bd3lm4", over, args.train_minutes, True, *BD3_DRY)
    elif (given / "config.json").is_file():
        models["bd3"] = str(given)
    elif str(given) != "none":
        notes.append(f"chr22 bd3: {given} missing (pipelines/block_diffusion.py trains it), its rows left out")
    return models, notes, (str(fasta), str(bed))


def prepare_dhs(args, work: Path, dry: bool, log) -> tuple[dict, list[str]]:
    if dry:
        import dhs_benchmark as bench
        import dhs_oracles

        scale = {"train": {"markov": ["model.overrides.max_order=3"], "*": bench.SHORT_STEP}}
        models = {key: bench.train_row(row, work, scale, args.threads, True, log)["model"]
                  for key, row in (("mdlm", "cfg"), ("ar", "ar"), ("bd3", "bd3"), ("markov", "markov"))}
        role, config, half, name = dhs_oracles.ORACLES[1]
        dhs_oracles.train_oracle(role, config, half, name, work / "oracles",
                                 [*dhs_oracles.SCALES["tiny"]["overrides"], "train.lr_grid=[0.005]"], args.threads, log)
        return {**models, "oracle": str(work / "oracles" / name)}, ["DHS: tiny models trained one step (dry run)"]
    models, notes = {}, []
    for key in ("mdlm", "ar", "bd3", "markov", "oracle"):
        path = Path(getattr(args, f"dhs_{key}"))
        found = (path / ("classifier.json" if key == "oracle" else "config.json")).is_file()
        models.update({key: str(path)} if found else {})
        why = f"--dhs-{key} none" if str(path) == "none" else f"{path} missing"
        notes += [] if found else [f"DHS {key}: {why}, its rows left out"]
    return models, notes


# ----------------------------------------------------------------------------- scoring


def class_ids(model, labels: np.ndarray | None):
    """Long[N] class ids of the model for the DHS labels (by name), or None (unconditional data/model)."""
    from dnadiff.data import CELL_TYPES

    names = list(getattr(model.config.model, "class_names", []) or [])
    if labels is None or not names:
        return None
    return torch.tensor([names.index(CELL_TYPES[int(y)]) for y in labels])


def score_windows(ids: torch.Tensor, labels, models: dict, mask: str, sc: dict, log) -> dict[str, dict]:
    """{row: {"sequence_nats", "sequence_tokens"}} of every model on the windows under one mask."""
    import dnadiff
    import dnadiff.eval as ev
    from dnadiff.data import CELL_TYPES
    from dnadiff.samplers import rc_symmetric

    hidden = ev.hidden_mask(mask, ids >= 7, torch.Generator().manual_seed(0))  # A C G T ids are 7..10
    out: dict[str, dict] = {}

    def add(row, nats, n):
        out.setdefault(row, {"sequence_nats": [], "sequence_tokens": []})
        out[row]["sequence_nats"] += nats.tolist()
        out[row]["sequence_tokens"] += n.tolist()

    loaded = {k: dnadiff.load(v) for k, v in models.items() if k in ("markov", "mdlm", "ar", "bd3")}
    tables = {}  # class name (None: the one chain) -> its probability tables, built once
    gen = torch.Generator().manual_seed(1)
    for s in range(0, len(ids), sc["batch"]):
        x, h = ids[s : s + sc["batch"]], hidden[s : s + sc["batch"]]
        lab = None if labels is None else labels[s : s + sc["batch"]]
        with torch.no_grad():
            if "markov" in loaded:
                m = loaded["markov"]
                keys = [None] * len(x) if lab is None or not m.config.model.class_names else [
                    CELL_TYPES[int(y)] for y in lab]
                for k in set(keys) - set(tables):
                    tables[k] = ev.chain_tables(ev.model_chain(m, k))
                nats = torch.cat([ev.markov_conditional_nll(tables[k], x[i : i + 1], h[i : i + 1])[0]
                                  for i, k in enumerate(keys)])
                add("markov", nats, h.sum(1).double())
            if "mdlm" in loaded:
                m = loaded["mdlm"]
                den = m.make_denoiser(labels=class_ids(m, lab))
                add("mdlm_nelbo", *ev.conditional_nelbo(den, m.objective, x, h, sc["nelbo_samples"], gen))
                add("mdlm_ordered", *ev.ordered_conditional_nll(den, x, h, m.tokenizer.mask_id))
                if not getattr(m.backbone.config, "rcps", False):  # an RC-equivariant (PS) model: the same numbers
                    both = rc_symmetric(den, m.tokenizer.complement_map(), mask_id=m.tokenizer.mask_id)
                    add("mdlm_ordered_rc", *ev.ordered_conditional_nll(both, x, h, m.tokenizer.mask_id))
            if "bd3" in loaded:  # each block's hidden bases given the blocks before it and its own visible bases
                m = loaded["bd3"]
                den = m.make_denoiser(labels=class_ids(m, lab))
                add("bd3_nelbo", *ev.conditional_nelbo(den, m.objective, x, h, sc["nelbo_samples"], gen))
            if "ar" in loaded and mask in ev.CONTIGUOUS_MASKS:
                m = loaded["ar"]
                add("ar_left", *ev.ar_left_nll(m.make_denoiser(labels=class_ids(m, lab)), m.objective, x, h))
    return out


def rows_of(data: str, mask: str, scored: dict[str, dict]) -> list[dict]:
    from dnadiff.eval import paired_difference

    rows = []
    for model, res in scored.items():
        nats, tok = np.array(res["sequence_nats"]), np.array(res["sequence_tokens"])
        d = paired_difference(res, scored["markov"]) if model != "markov" and len(nats) > 1 else None
        rows.append({"data": data, "mask": mask, "model": model, "windows": len(nats), "hidden_bases": int(tok.sum()),
                     "bits_per_hidden_base": float(nats.sum() / tok.sum() / math.log(2)),
                     "paired_markov": None if d is None else {"mean": d["mean"], "std_error": d["std_error"]}})
    return rows


def fill_samples(seqs: list[str], labels: np.ndarray, models: dict, mask: str, log) -> list[dict]:
    """Refill the span of DHS sequences (MDLM: first-hitting with the own class; Markov: exact posterior), judged."""
    import dnadiff
    import dnadiff.eval as ev
    from dnadiff.data import CELL_TYPES
    from dnadiff.tokenizers import DNATokenizer

    tok = DNATokenizer()
    ids = torch.tensor([tok.encode(s) for s in seqs])
    hidden = ev.hidden_mask(mask, ids >= 7)
    cols = torch.nonzero(hidden.any(0)).flatten()
    a, b = int(cols.min()), int(cols.max()) + 1
    fills = {"real (unfilled)": seqs}
    if "mdlm" in models:
        m = dnadiff.load(models["mdlm"])
        out = []
        for cell in sorted(set(labels.tolist())):
            rows = np.flatnonzero(labels == cell)
            tmpl = torch.where(hidden[rows], torch.full_like(ids[rows], tok.mask_id), ids[rows])
            label = CELL_TYPES[int(cell)] if m.config.model.class_names else None
            x = m.generate(len(rows), ids.shape[1], sampler="first_hitting", template=tmpl,
                           generator=torch.Generator().manual_seed(int(cell)), label=label)
            out += list(zip(rows.tolist(), m.decode(x)))
        fills["MDLM fill (own class)"] = [s for _, s in sorted(out)]
    if "markov" in models:
        m = dnadiff.load(models["markov"])
        rng = np.random.default_rng(0)
        filled = []
        for s, y, h in zip(seqs, labels, hidden.numpy()):
            chain = ev.model_chain(m, CELL_TYPES[int(y)] if m.config.model.class_names else None)
            codes = np.array(["ACGT".index(c) if c in "ACGT" else -1 for c in s])
            filled.append("".join("ACGTN"[c] for c in ev.sample_hidden(chain, codes, h, rng)[0]))
        fills["Markov fill (own class)"] = filled
    oracle = ev.load_oracle(models["oracle"])[0] if "oracle" in models else None
    scanner = ev.MotifScanner(ev.load_jaspar(), ev.background_of(seqs))
    lo, hi = max(0, a - 10), b + 10
    real_hits, _ = scanner.scan([s[lo:hi] for s in seqs])
    rows = []
    for name, got in fills.items():
        row = {"row": name, "n": len(got)}
        if oracle is not None:
            kept = ev.predict_proba(oracle, got).argmax(axis=1) == labels
            row.update(class_kept=float(kept.mean()), class_kept_se=float(kept.std() / math.sqrt(len(kept))))
        hits, _ = scanner.scan([s[lo:hi] for s in got])
        row["motif_recall"] = float(np.minimum(hits, real_hits).sum() / max(real_hits.sum(), 1))
        for k in (3, 4):
            row[f"span_js_k{k}"] = ev.js_divergence(ev.kmer_counts([s[a:b] for s in got], k),
                                                    ev.kmer_counts([s[a:b] for s in seqs], k))
        rows.append(row)
        log(f"  fill {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items() if isinstance(v, float)))
    return rows


# ----------------------------------------------------------------------------- the run


def chr22_windows(models: dict, files: tuple[str, str], n: int) -> torch.Tensor:
    import dnadiff
    from dnadiff.data import genome_reference
    from dnadiff.tokenizers import DNATokenizer

    key = next((k for k in ("mdlm", "bd3", "ar") if k in models), None)  # the MDLM's training window, else ...
    if key is None:
        from dnadiff.errors import DnadiffError

        raise DnadiffError("chr22: no neural model (--chr22-mdlm, --chr22-bd3, --chr22-ar) to take the window from")
    length = int(dnadiff.load(models[key]).config.data.seq_len)
    seqs = genome_reference(files[0], files[1], "test", length, n)
    tok = DNATokenizer()
    return torch.tensor([tok.encode(s) for s in seqs])


def dhs_test(per_class: int) -> tuple[list[str], np.ndarray]:
    from dnadiff.data import load_dhs

    table = load_dhs()
    rows = table.indices("test")
    seqs, labels = table.sequences("test"), table.labels[rows]
    rng = np.random.default_rng(0)
    keep = sorted(i for c in np.unique(labels) for i in rng.permutation(np.flatnonzero(labels == c))[:per_class])
    return [seqs[i] for i in keep], labels[keep].astype(np.int64)


def run(args: argparse.Namespace, command: str, dry: Path | None) -> int:
    from dnadiff.errors import DnadiffError
    from dnadiff.machine import load_average
    from dnadiff.threads import apply_threads
    from dnadiff.tokenizers import DNATokenizer

    data_sets = [d.strip() for d in args.data.split(",") if d.strip()]
    if not data_sets or set(data_sets) - {"chr22", "dhs"}:
        raise DnadiffError(f"--data {args.data!r}: expected chr22, dhs or chr22,dhs")
    sc = dict(SCALES["dry" if dry else "cpu"])
    for key in ("chr22_windows", "per_class"):
        if getattr(args, key) is not None:
            if getattr(args, key) < 2:
                raise DnadiffError(f"--{key.replace('_', '-')} must be >= 2 (a paired SE needs two windows)")
            sc[key] = getattr(args, key)
    apply_threads(args.threads)
    work = dry if dry is not None else Path(args.work)
    t0, load_before = time.time(), load_average()

    def log(msg):
        print(f"[{time.time() - t0:6.0f}s] {msg}", flush=True)

    rows, fills, notes, used = [], [], [], {}
    if "chr22" in data_sets:
        models, more, files = prepare_chr22(args, sc, work, dry is not None, log)
        notes += more
        used["chr22"] = models
        ids = chr22_windows(models, files, sc["chr22_windows"])
        for mask in MASKS:
            log(f"chr22 {mask}: {len(ids)} windows of {ids.shape[1]} bp")
            rows += rows_of("chr22", mask, score_windows(ids, None, models, mask, sc, log))
    if "dhs" in data_sets:
        if dry is not None:  # the 300-row fixture as the DHS table
            import dhs_oracles

            os.environ["DNADIFF_CACHE"] = str(dhs_oracles._tiny_cache(work))
        models, more = prepare_dhs(args, work, dry is not None, log)
        notes += more
        used["dhs"] = models
        seqs, labels = dhs_test(sc["per_class"])
        tok = DNATokenizer()
        ids = torch.tensor([tok.encode(s) for s in seqs])
        if "markov" in models:
            for mask in MASKS:
                log(f"dhs {mask}: {len(ids)} test sequences")
                rows += rows_of("dhs", mask, score_windows(ids, labels, models, mask, sc, log))
        fills = fill_samples(seqs, labels, models, FILL_MASK, log)
    for r in rows:
        p = r["paired_markov"]
        log(f"{r['data']} {r['mask']} {r['model']}: {r['bits_per_hidden_base']:.4f} bits/hidden base"
            + ("" if p is None else f" ({p['mean']:+.4f} ± {p['std_error']:.4f} vs Markov)"))
    if dry is not None:
        print(f"dry run: {len(rows)} rows, {len(fills)} fill rows ({time.time() - t0:.0f} s); no table written")
        return 0
    stem = Path(args.results)
    common.write_report(stem, {
        "command": command, "note": args.note, "settings": sc, "models": used, "notes": notes, "rows": rows,
        "fill_samples": fills, "wall_s": round(time.time() - t0, 1), "threads": args.threads,
        "load_before": load_before, **common.stamp("load_after")}, markdown, plot)
    print(f"wrote {stem}.md, .json and .png")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.combine:
        from dnadiff.errors import DnadiffError

        try:
            return combine(args.combine, Path(args.results), args.note, common.command_line(__file__, argv))
        except DnadiffError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return common.main_with_dry_run(run, args, __file__, argv, "infill")


if __name__ == "__main__":
    sys.exit(main())
