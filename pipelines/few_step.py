"""Quality against network calls (issue 36 §3): masked vs uniform-noise diffusion, distilled or not, and
ReMDM remasking, each sampled at 4, 8, 16, 32, 64, 128 and L network calls, on DNA and on text.

    DNADIFF_DATA=/path/to/shared/data python pipelines/few_step.py --scale cpu --threads 1
    python pipelines/few_step.py --scale tiny        # in-repo fixtures, tiny sizes: a real table (tests)
    python pipelines/few_step.py --scale cpu --dry-run   # every family at tiny sizes in a temp folder; no table

Families (one column of calls each; calls = sampler steps, the network calls counted from the samples'
NFE per sequence, recorded beside each cell):
  MDLM                      the masked model, ancestral sampler (+ a noise-removal call for a sequence still
                            masked after the last step: NFE per sequence is K or K + 1)
  MDLM + SDTT               `dnadiff distill` of that model (self-distillation through time), ancestral
  UDLM                      the uniform-noise model (objective=udlm), its `udlm` sampler (exactly K calls)
  UDLM + DUO distillation   `dnadiff distill` of that model (DUO's discrete consistency distillation), `udlm`
  MDLM + ReMDM              the MDLM model sampled with ReMDM remasking (`remdm`, schedule and eta below)
DNA (human chr22 windows as in pipelines/sample_quality.py: $DNADIFF_DATA/hg19_chr22_subset; --scale tiny:
the chr22 sample bundled in the package): the sample metrics of `dnadiff metrics` (k-mer JS k=3 and 6, 3-mer
Pearson, JASPAR motif hit-rate Spearman, GC Wasserstein-1) against the test split's windows, beside the
real-vs-real floor (valid windows scored the same way) and Markov rows (k=5 and the best k on valid, fitted on
train: sample_quality.fit_markov), and each DNA row's discriminator AUROC ± SE (p) (issue 46, pipelines/judging.py:
its seeds' samples pooled vs as many held-out test windows; the real row is the floor; ~15 CPU-s a row).
Text (fortunes, owt-style 128-token blocks, BOS fixed at position 0; tiny:
tests/data/text/fortunes): generative perplexity of the samples under dnadiff's own AR judge (a causal DiT of
text/cpu_fortunes_owt_ar trained here on the same corpus: exact NLL of every token after the BOS; not GPT-2,
not comparable with published gen PPL), with the mean per-sample unigram entropy beside it (low entropy is
repetition, not quality), and real test text under the same judge. Each cell: mean ± range (max - min) over
the seeds; wall time per 1,000 sequences from the samples' statistics (machine load in the header).

Settings chosen on validation (sampling seed 1000, never a reported seed; DNA scored against the valid
split's windows, text by the judge with an entropy guard: the lowest gen PPL among settings whose entropy is
at least 95% of real validation text's):
  ReMDM: schedule x eta over REMDM_GRID (cap / rescale), at SELECT_CALLS calls;
  distillation: the student's step count (rounds = log2(teacher steps / K)) over the scale's grid, the
  student kept being the best at 8 calls (DNA: highest 3-mer Pearson; text: the guarded gen PPL).
"Reaches its own L-call quality": the smallest call count whose mean headline metric (DNA: 3-mer Pearson,
text: gen PPL) is no worse than the L-call mean minus the L-call cell's seed range (the rule in the md).

Cost (--scale cpu, one core; per-call figures measured here at load ~9 on 2 cores, CPU time: a tiny-Caduceus
call on 64 x 128 bp 0.27 s, the 64-wide 2-block text DiT ~0.3 s (from the tiny scale's 1 ms per 32-token
sequence-call), `dnadiff metrics` with every JASPAR motif 4.9 s a cell): 5 models trained 5 min each (25 min:
DNA MDLM and UDLM, text MDLM, UDLM, AR judge); 2 Markov fits (~3 min); 8 distillations (2 families x 2 domains x
2 students, teacher 64 steps, 30 updates a round, 4 rollouts: ~9 min); validation grids (~2 min); DNA sampling,
5 families x 3 seeds x 252 calls (4+8+...+128, L = 128 coincides with 128): ~17 min, and its ~100 metric cells
~8 min; text sampling ~19 min and judging ~2 min: about 85 CPU-minutes (say 70-110: the per-call figures came
from a loaded machine). Training budgets are wall-clock minutes (train.max_minutes): on a loaded machine a
model gets fewer steps; --budget-clock cpu counts each training process's CPU minutes instead.
--scale tiny: ~40 s CPU (37 s measured, 19 min wall at load 9).
Models, students and sample files are kept across reruns while their command and (for samples) the model's
content fingerprint are unchanged.
Writes results/few_step_cpu.{md,json} and results/few_step_cpu.png (--scale tiny: WORK/few_step_tiny.*).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import common
import dhs_benchmark
import judging
import sample_quality as sq
from few_step_report import (
    FAMILIES,
    HEADLINE,
    domain_table,  # noqa: F401  (tests/test_judging.py: few_step.domain_table)
    plot,
    render,
)
from few_step_samples import dna_score, draw, real_text, stamped, text_score

REPO = Path(__file__).resolve().parent.parent
REMDM_GRID = [{"schedule": "cap", "eta": 0.01}, {"schedule": "cap", "eta": 0.04},
              {"schedule": "rescale", "eta": 0.02}, {"schedule": "rescale", "eta": 0.1}]
VALID_SEED = 1000
DISC_SEED = 4600  # the discriminator's held-out test windows (issue 46): a stream apart from every sampling seed
GEN_TEXT = ["model.overrides.hidden_size=64", "model.overrides.n_heads=2", "model.overrides.n_blocks=2",
            "model.overrides.adaln_dim=32"]  # the text generators: small enough to sample 64 x 128 at 252 calls
SCALES = {
    # text_seeds: text cells measured ~3 s a call (10x the docstring's estimate): one seed at this scale
    "cpu": {"length": 128, "num": 64, "seeds": [0, 1, 2], "text_seeds": [0], "calls": [4, 8, 16, 32, 64, 128],
            "select_calls": 16,
            "train_minutes": 5.0, "train": ["train.max_steps=100000"], "reference_windows": 1000, "max_order": 8,
            "metrics": [], "vocab": 2048, "teacher_steps": 64, "student_grid": [4, 16], "round_updates": 30,
            "distill_batch": 4, "pool_size": 64, "lr": 1e-3, "remdm_grid": REMDM_GRID,
            "results": "results/few_step_cpu"},
    "tiny": {"length": 32, "num": 8, "seeds": [0, 1], "calls": [4, 8], "select_calls": 4, "train_minutes": None,
             "train": ["train.max_steps=3", "train.batch_size=4", "train.val_every=3", "train.ckpt_every=3",
                       "train.val_batches=1", "train.warmup_steps=0", "train.progress=false"],
             "reference_windows": 64, "max_order": 3, "metrics": ["--motif-ids", "MA0139.2,MA0079.5,MA0106.3"],
             "vocab": 300, "teacher_steps": 8, "student_grid": [2, 4], "round_updates": 1, "distill_batch": 2,
             "pool_size": 4, "lr": 1e-3, "remdm_grid": REMDM_GRID[1:3], "results": None},
}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=sorted(SCALES), default="cpu")
    ap.add_argument("--dry-run", action="store_true", help="every family at tiny sizes in a temp folder; no table")
    ap.add_argument("--domains", default="dna,text", help="dna, text or both (default dna,text)")
    ap.add_argument("--shared", default=os.environ.get("DNADIFF_DATA") or str(REPO.parent / "shared" / "data"))
    ap.add_argument("--train-minutes", type=float, default=None, help="wall budget of each model (cpu: 5)")
    ap.add_argument("--budget-clock", choices=["wall", "cpu"], default="wall",
                    help="what --train-minutes counts: wall-clock minutes or the training process's "
                    "CPU minutes (train.budget_clock)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work-dir", default=None, help="models, students, samples (default runs/few_step_<scale>)")
    ap.add_argument("--results", default=None, help="results stem (default results/few_step_cpu; "
                    "tiny: WORK/few_step_tiny)")
    args = ap.parse_args(argv)
    args.domain_list = [d.strip() for d in args.domains.split(",") if d.strip()]
    if not args.domain_list or set(args.domain_list) - {"dna", "text"}:
        ap.error(f"--domains {args.domains!r}: choose dna, text or dna,text")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return common.main_with_dry_run(run, args, __file__, argv, "few_step")


# ----------------------------------------------------------------------------- models and students


def train_model(work: Path, key: str, config: str, over: list[str], threads: int, log) -> tuple[str, dict]:
    run_dir = work / "models" / key
    argv = ["train", config, *over, "--run-dir", str(run_dir), "--threads", str(threads), "--overwrite", "-q"]
    info = stamped(run_dir, {"command": argv}, lambda: dhs_benchmark.dnadiff(argv, log), log)
    return str(run_dir / "model"), info


def distill(work: Path, key: str, teacher: str, steps: int, size: dict, threads: int, log) -> tuple[str, dict]:
    from dnadiff.eval import fingerprint

    out = work / "students" / f"{key}_K{steps}"
    argv = ["distill", teacher, "--steps", steps, "--teacher-steps", size["teacher_steps"], "--round-updates",
            size["round_updates"], "--batch-size", size["distill_batch"], "--length", size["length"],
            "--lr", size["lr"], "--pool-size", size["pool_size"], "--out", out, "--threads", threads, "--overwrite",
            "-q"]
    argv = [str(a) for a in argv]
    stamp = {"command": argv, "teacher": fingerprint(teacher)}
    info = stamped(out, stamp, lambda: dhs_benchmark.dnadiff(argv, log), log)
    return str(out), info


def text_overrides(args, work: Path, size: dict, dry: bool) -> list[str]:
    root = REPO / "tests" / "data" if args.scale == "tiny" or dry else Path(args.shared)
    from dnadiff.errors import DnadiffError

    if not (root / "text" / "fortunes" / "train.jsonl").is_file():
        raise DnadiffError(f"--shared {args.shared}: no text/fortunes/train.jsonl (set DNADIFF_DATA)")
    return [f"data.root={root}", f"tokenizer.path={work / 'tokenizers' / 'gpt2-like'}",
            f"tokenizer.train_vocab_size={size['vocab']}", f"data.text.cache_dir={work / 'text_cache'}",
            f"data.seq_len={size['length']}", f"sample.length={size['length']}"]


def budget(size: dict, minutes: float | None, clock: str = "wall") -> list[str]:
    # clock "cpu": the run stops on this process's CPU time, so a loaded machine gives the same steps
    if not minutes:
        return list(size["train"])
    return [*size["train"], f"train.max_minutes={minutes:g}", *(["train.budget_clock=cpu"] if clock == "cpu" else [])]


# ----------------------------------------------------------------------------- samples


class Domain:
    """One domain's models and how a cell is sampled and scored (`split`: valid for choices, test for the table)."""

    def __init__(self, name: str, work: Path, size: dict, log, data: dict | None = None, judge: str | None = None,
                 markov: str | None = None):
        self.name, self.work, self.size, self.log = name, work, size, log
        self.data, self.judge, self.markov = data, judge, markov
        self.models: dict[str, str] = {}

    def cell(self, folder: Path, model_key: str, sampler: str | None, calls: int | None, options: dict, seed: int,
             split: str) -> dict:
        model_dir = self.models[model_key]
        path = folder / f"seed{seed}.{'fa' if self.name == 'dna' else 'json'}"
        stats = draw(model_dir, path, self.name, self.size, seed, sampler, calls, options, self.log)
        if self.name == "dna":
            return {"stats": stats, "metrics": dna_score(path, self.data, split, self.size, self.markov)}
        return {"stats": stats, "metrics": text_score(json.loads(path.read_text()), self.judge)}

    def real(self, seed: int, split: str) -> dict[str, float]:
        """The floor: real held-out sequences (DNA: valid windows vs the test reference; text: test blocks)."""
        folder = self.work / "samples" / self.name / "real"
        folder.mkdir(parents=True, exist_ok=True)
        if self.name == "dna":
            source = "valid" if split == "test" else "test"
            fa = folder / f"{source}_seed{seed}_n{self.size['num']}_L{self.size['length']}.fa"
            if not fa.is_file():  # the same windows for the same seed and sizes: cut once
                sq.write_fasta(fa, sq.real_windows(self.data, source, self.size["length"], self.size["num"], seed))
            return dna_score(fa, self.data, split, self.size, self.markov)
        return text_score(real_text(self.judge, split, self.size["num"], seed), self.judge)

    def better(self, a: dict, b: dict) -> bool:
        """Validation choice: is the metrics dict `a` better than `b`? (DNA: 3-mer Pearson; text: gen PPL among
        settings whose entropy passes the guard, else the higher entropy)."""
        if b is None:
            return True
        if self.name == "dna":
            return a["3-mer Pearson r"] > b["3-mer Pearson r"]
        ok_a, ok_b = a["entropy"] >= 0.95 * self.real_entropy, b["entropy"] >= 0.95 * self.real_entropy
        if ok_a != ok_b:
            return ok_a
        return a["gen_ppl"] < b["gen_ppl"] if ok_a else a["entropy"] > b["entropy"]


# ----------------------------------------------------------------------------- the run


def prepare_dna(args, work: Path, size: dict, minutes, dry: bool, log) -> tuple[Domain, list]:
    """DNA: the Markov fits, the MDLM and UDLM models (tiny Caduceus, experiments/tiny_dna_mdlm)."""
    fasta, bed = sq.genome_files(argparse.Namespace(quick=args.scale == "tiny", shared=args.shared), dry)
    data = {"fasta": fasta, "bed": bed}
    data_over = [f"data.fasta={fasta}", f"data.bed={bed}", f"data.seq_len={size['length']}"]
    k5 = min(5, size["max_order"])
    markov5 = sq.fit_markov(work / "models", data_over, k5, size["max_order"], "markov_k5")
    best = sq.fit_markov(work / "models", data_over, -1, size["max_order"], "markov_best")
    best_k = json.loads((Path(best) / "metrics.json").read_text()).get("order")
    dom = Domain("dna", work, size, log, data=data, markov=best)
    dom.models.update(markov5=markov5, markov_best=best)
    trained = []
    for key, extra in (("mdlm", []), ("udlm", ["objective=udlm"])):
        over = [*extra, *data_over, f"sample.length={size['length']}", *budget(size, minutes, args.budget_clock)]
        dom.models[key], info = train_model(work, f"dna_{key}", "experiments/tiny_dna_mdlm", over, args.threads, log)
        trained.append({"domain": "dna", "model": key, **info})
    dom.markov_rows = [(f"Markov k={k5}", "markov5"), (f"Markov best k (k={best_k})", "markov_best")]
    return dom, trained


def prepare_text(args, work: Path, size: dict, minutes, dry: bool, log) -> tuple[Domain, list]:
    """Text: the MDLM and UDLM generators (small DiTs) and the AR judge (text/cpu_fortunes_owt_ar)."""
    base = text_overrides(args, work, size, dry)
    dom = Domain("text", work, {**size, "seeds": size.get("text_seeds", size["seeds"])}, log)
    trained = []
    for key, config, extra in (("judge", "text/cpu_fortunes_owt_ar", []),
                               ("mdlm", "text/cpu_fortunes_owt_mdlm", GEN_TEXT),
                               ("udlm", "text/cpu_fortunes_owt_mdlm", [*GEN_TEXT, "objective=udlm",
                                                                      "objective.pad_policy=visible"])):
        over = [*extra, *base, *budget(size, minutes, args.budget_clock)]
        dom.models[key], info = train_model(work, f"text_{key}", config, over, args.threads, log)
        trained.append({"domain": "text", "model": key, "config": config, **info})
    dom.judge = dom.models["judge"]
    dom.markov_rows = []
    return dom, trained


def choose(dom: Domain, log) -> dict:
    """The validation choices of one domain: ReMDM's schedule and eta, and each distilled family's student."""
    size, out = dom.size, dom.work / "samples" / dom.name / "valid"
    if dom.name == "text":
        dom.real_entropy = dom.real(VALID_SEED, "valid")["entropy"]
    grid, best = [], None
    for opts in size["remdm_grid"]:
        folder = out / "remdm" / "_".join(f"{k}{v}" for k, v in opts.items())
        m = dom.cell(folder, "mdlm", "remdm", size["select_calls"], opts, VALID_SEED, "valid")["metrics"]
        grid.append({"options": opts, "metrics": m})
        if dom.better(m, best and best["metrics"]):
            best = grid[-1]
    choices = {"remdm": {"calls": size["select_calls"], "grid": grid, "chosen": best["options"]}}
    log(f"{dom.name}: ReMDM {best['options']} chosen on validation")
    for fam, teacher in (("sdtt", "mdlm"), ("duo", "udlm")):
        grid, best = [], None
        calls = 8 if 8 in size["calls"] else size["calls"][0]
        for k in size["student_grid"]:
            key = f"{fam}_K{k}"
            dom.models[key], info = distill(dom.work, f"{dom.name}_{fam}", dom.models[teacher], k, size,
                                            dom.threads, log)
            sampler = "udlm" if fam == "duo" else "ancestral"
            m = dom.cell(out / key, key, sampler, calls, {}, VALID_SEED, "valid")["metrics"]
            grid.append({"student_steps": k, "rounds": int(math.log2(size["teacher_steps"] // k)), "distill": info,
                         "metrics": m})
            if dom.better(m, best and best["metrics"]):
                best = grid[-1]
        dom.models[fam] = dom.models[f"{fam}_K{best['student_steps']}"]
        choices[fam] = {"calls": calls, "grid": grid, "chosen": best["student_steps"]}
        log(f"{dom.name}: {fam} student K={best['student_steps']} chosen on validation")
    return choices


def summarize_cells(cells: list[dict]) -> dict:
    summary = sq.summarize([c["metrics"] for c in cells])
    nfe = [c["stats"].get("nfe_per_sequence") for c in cells]
    per_1k = [1000 * c["stats"]["wall_seconds"] / c["stats"]["num"] for c in cells if "wall_seconds" in c["stats"]]
    return {"summary": summary, "nfe_per_sequence": nfe,
            "nfe_per_sequence_min": min((c["stats"].get("nfe_per_sequence_min") or 0) for c in cells),
            "nfe_per_sequence_max": max((c["stats"].get("nfe_per_sequence_max") or 0) for c in cells),
            "steps_used": [c["stats"].get("steps_used") for c in cells],
            "wall_seconds_per_1000": sum(per_1k) / len(per_1k) if per_1k else None,
            "cpu_seconds_per_1000": sum(1000 * c["stats"]["cpu_seconds"] / c["stats"]["num"]
                                        for c in cells) / len(cells)}


def run_domain(dom: Domain, choices: dict, log) -> dict:
    """Every family x call count (seeds of the scale, scored on the test split), the floor and Markov rows."""
    size = dom.size
    calls = sorted(set(size["calls"]) | {size["length"]})
    rows = []
    for key, label, model_key, sampler in FAMILIES:
        opts = choices["remdm"]["chosen"] if key == "remdm" else {}
        for k in calls:
            folder = dom.work / "samples" / dom.name / key / f"calls{k}"
            cells = [dom.cell(folder, model_key, sampler, k, opts, s, "test") for s in size["seeds"]]
            rows.append({"family": key, "label": label, "calls": k, "model": dom.models[model_key], "sampler": sampler,
                         "options": opts, **summarize_cells(cells)})
        log(f"{dom.name}: {label} done")
    refs = [{"label": "real (floor: valid windows vs test)" if dom.name == "dna" else "real test text",
             "summary": sq.summarize([dom.real(s, "test") for s in size["seeds"]])}]
    for label, key in dom.markov_rows:
        folder = dom.work / "samples" / dom.name / key
        cells = [dom.cell(folder, key, None, None, {}, s, "test") for s in size["seeds"]]
        refs.append({"label": label, "model": dom.models[key], **summarize_cells(cells)})
    if dom.name == "dna":
        judge_dna_rows(dom, refs, rows)
    return {"calls": calls, "rows": rows, "references": refs, "first_reach": first_reach(dom.name, rows, calls)}


def judge_dna_rows(dom: Domain, refs: list[dict], rows: list[dict], settings=None) -> None:
    """Issue 46: each DNA row's seeds pooled vs as many held-out test windows; the real row (valid) the floor."""
    size, base, seeds = dom.size, dom.work / "samples" / "dna", [f"seed{s}.fa" for s in dom.size["seeds"]]
    sets = [(refs[0], [base / "real" / f"valid_seed{s}_n{size['num']}_L{size['length']}.fa" for s in size["seeds"]])]
    sets += [(r, [base / key / n for n in seeds]) for r, (_, key) in zip(refs[1:], dom.markov_rows)]
    sets += [(r, [base / r["family"] / f"calls{r['calls']}" / n for n in seeds]) for r in rows]
    ref = sq.real_windows(dom.data, "test", size["length"], len(size["seeds"]) * size["num"], DISC_SEED)
    judging.judge_fastas(sets, ref, settings)


def first_reach(domain: str, rows: list[dict], calls: list[int]) -> dict:
    """Per family: the smallest call count whose mean headline metric is no worse than the L-call mean minus
    the L-call cell's seed range (higher-is-better: >= mean_L - range_L; lower: <= mean_L + range_L)."""
    metric, how = HEADLINE[domain]
    out = {}
    for key, *_ in FAMILIES:
        by = {r["calls"]: r["summary"].get(metric) for r in rows if r["family"] == key}
        last = by.get(calls[-1])
        if not last:
            continue
        reach = None
        for k in calls:
            v = by.get(k)
            if v and (v["mean"] >= last["mean"] - last["range"] if how == "higher"
                      else v["mean"] <= last["mean"] + last["range"]):
                reach = k
                break
        out[key] = {"calls": reach, "metric": metric, "l_mean": last["mean"], "l_range": last["range"]}
    return out


def run(args, command: str, dry: Path | None) -> int:
    import torch

    from dnadiff.machine import describe_machine, load_average

    size = dict(SCALES["tiny" if dry else args.scale])
    if dry:
        size.update(seeds=[0], calls=[4], student_grid=[4], remdm_grid=REMDM_GRID[:1])
    minutes = args.train_minutes if args.train_minutes is not None else size["train_minutes"]
    work = dry or Path(args.work_dir or REPO / "runs" / f"few_step_{args.scale}")
    work.mkdir(parents=True, exist_ok=True)
    stem = Path(args.results) if args.results else (REPO / size["results"] if size["results"] else
                                                   work / f"few_step_{args.scale}")
    torch.set_num_threads(args.threads)
    start, c0, load0 = time.time(), time.process_time(), load_average()

    def log(msg):
        print(f"[few_step {time.time() - start:7.0f}s] {msg}", flush=True)

    results, choices, trained = {}, {}, []
    for domain in args.domain_list:
        prep = prepare_dna if domain == "dna" else prepare_text
        dom, info = prep(args, work, size, minutes, dry is not None, log)
        dom.threads = args.threads
        trained += info
        choices[domain] = choose(dom, log)
        results[domain] = run_domain(dom, choices[domain], log)
    wall, cpu = time.time() - start, time.process_time() - c0
    text = render(command, wall, cpu, (load0, load_average()), size, results, choices, trained, stem, args.scale)
    if dry is not None:
        print(text)
        print(f"dry run: {sum(len(r['rows']) for r in results.values())} cells in {wall:.0f} s; no table written")
        return 0
    stem.parent.mkdir(parents=True, exist_ok=True)
    plot(Path(str(stem) + ".png"), results, size["length"])
    common.write_results(stem, {
        "command": command, "scale": args.scale, "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
        "machine": describe_machine(), "load_average": [load0, load_average()], "sizes": size, "trained": trained,
        "choices": choices, "results": results}, text)
    print(text)
    log(f"wrote {stem}.md, .json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
