"""The cells of pipelines/few_step.py: one cell's samples drawn (kept across reruns while the command and the
model are unchanged) and scored, DNA by `dnadiff metrics` against a split's windows, text under the AR judge."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import common
import sample_quality as sq

REPO = Path(__file__).resolve().parent.parent


def stamped(out: Path, stamp: dict, make, log) -> dict:
    """`make()` unless OUT.done.json holds the same stamp (a model, student or sample file kept across reruns)."""
    return common.stamped(out.parent / (out.name + ".done.json"), stamp, make, log, os.path.relpath(out, REPO))


_LOADED: dict[str, object] = {}


def load(model_dir: str):
    import dnadiff

    if model_dir not in _LOADED:
        _LOADED[model_dir] = dnadiff.load(model_dir)
    return _LOADED[model_dir]


def draw(model_dir: str, path: Path, domain: str, size: dict, seed: int, sampler: str | None, calls: int | None,
         options: dict, log) -> dict:
    """The samples of one cell (DNA: FASTA; text: token ids as JSON) and their statistics (the sample JSON of
    `dnadiff sample`, plus CPU seconds), kept across reruns while the command and the model are unchanged."""
    from dnadiff.eval import fingerprint

    argv = ["sample", model_dir, "--num", size["num"], "--length", size["length"], "--seed", seed,
            *(["--sampler", sampler, "--steps", calls] if sampler else []),
            *[a for k, v in options.items() for a in ("--option", f"{k}={v}")]]
    argv = [str(a) for a in argv] + (["(BOS fixed at position 0)"] if domain == "text" else [])

    def make() -> dict:
        import torch

        import dnadiff
        from dnadiff.data import format_fasta
        from dnadiff.sampling import sample_records
        from dnadiff.utils import atomic_write

        model = load(model_dir)
        template = None
        if domain == "text":  # every training block starts with BOS (pipelines/text_lm.py's samples)
            template = torch.full((size["num"], size["length"]), model.tokenizer.mask_id, dtype=torch.long)
            template[:, 0] = model.tokenizer.bos_id
        c0 = time.process_time()
        res = dnadiff.sample(model, size["num"], size["length"], sampler=sampler, steps=calls, seed=seed,
                             template=template, **options)
        stats = {"model": model_dir, **res.stats(), "options": options, "cpu_seconds": time.process_time() - c0}
        path.parent.mkdir(parents=True, exist_ok=True)
        if domain == "dna":
            atomic_write(path, format_fasta(sample_records(res, model.decode(res.x))))
        else:
            atomic_write(path, json.dumps(res.x.tolist()))
        return stats

    return stamped(path, {"command": argv, "model": fingerprint(model_dir)}, make, log)


def dna_score(fa: Path, data: dict, split: str, size: dict, markov: str) -> dict[str, float]:
    """`dnadiff metrics FA` against the split's windows (sample_quality's reading of metrics.json)."""
    from dnadiff.utils import atomic_write

    out = fa.parent / (fa.stem + f"_metrics_{split}")
    argv = ["metrics", "-q", str(fa), "--reference", data["fasta"], "--bed", data["bed"], "--split", split,
            "--max-reference-windows", str(size["reference_windows"]), "--no-floor", "--no-plots", "--force",
            "--oracle", markov, "--out", str(out), *size["metrics"]]
    done, res = out / "argv.json", out / "metrics.json"  # kept while the samples and the command are unchanged
    if not (done.is_file() and json.loads(done.read_text()) == argv and res.stat().st_mtime >= fa.stat().st_mtime):
        done.unlink(missing_ok=True)
        sq.cli(argv)
        atomic_write(done, json.dumps(argv))
    return sq.metric_values(json.loads(res.read_text()))


def text_score(ids, judge_dir: str) -> dict[str, float]:
    """Generative perplexity under the AR judge: exp(Σ NLL / Σ scored tokens) over the set (every token after
    the BOS, which is context), and the mean per-sample unigram entropy (genppl.unigram_entropy) of the tokens
    that are not special."""
    import torch

    from dnadiff.eval import unigram_entropy

    judge = load(judge_dir)
    x = torch.as_tensor(ids, dtype=torch.long)
    nll = tokens = 0.0
    with torch.no_grad():
        for i in range(0, len(x), 16):
            out = judge.nll(x[i:i + 16])
            nll += float(out.nll.sum())
            tokens += float(out.num_tokens.sum())
    tok = judge.tokenizer
    special = {tok.bos_id, tok.eos_id, tok.pad_id, tok.mask_id}
    ent = [unigram_entropy([t for t in row if t not in special]) for row in x.tolist()]
    return {"gen_ppl": math.exp(nll / tokens), "entropy": sum(ent) / len(ent), "scored_tokens": int(tokens)}


def real_text(judge_dir: str, split: str, num: int, seed: int) -> list[list[int]]:
    """num random blocks of a split, tokenized as the models saw them."""
    import numpy as np

    from dnadiff.data import build_text_datasets

    judge = load(judge_dir)
    ds = build_text_datasets(judge.config.data, judge.tokenizer)[split]
    idx = np.random.default_rng(seed).choice(len(ds), size=min(num, len(ds)), replace=False)
    return [ds[int(i)]["input_ids"].tolist() for i in sorted(idx)]
