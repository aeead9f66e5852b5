"""Text language modelling (MDLM tab. 1/2, tab. 5, tab. 11) as a runnable recipe.

    # CPU, offline, on the real fortunes corpus with locally trained tokenizers (<= 30 min):
    python pipelines/text_lm.py --scale cpu
    # GPU, the paper's rows (needs LM1B / OpenWebText, bert-base-uncased / gpt2 / gpt2-large locally):
    python pipelines/text_lm.py --scale paper --setting owt --rows mdlm ar --zeroshot-root data/zeroshot
    # every setting x row of a scale: config, model, one step, eval, samples on a tiny made-up corpus
    python pipelines/text_lm.py --scale paper --dry-run
    # re-render the table of a finished run from its JSON (no training)
    python pipelines/text_lm.py --from-json results/text_lm_cpu.json

For each setting (LM1B-style: sentences padded to L; OWT-style: documents wrapped into L-token
blocks) and each row (mdlm, ar, sedd) it trains with `dnadiff.training.train`, then
  * test perplexity: exp(bound / tokens) for diffusion rows (one t per sequence, `--mc` rounds,
    a fixed seed), exact NLL for AR (tab. 1/2);
  * the discrete-T sweep of tab. 11 on the MDLM model: the same model evaluated with the
    discrete-time bound at T = 10 ... 1000 and in continuous time (∞), with common random numbers;
  * OWT-style: samples (ancestral, semi-AR longer than the training length with L' = L/4 as in
    tab. 5's 2048/512, AR, and with `--rows ... ssdlm` tab. 5's SSD-LM row: the ssdlm objective's model
    decoded by its own semi-AR sampler at the same length, blocks of 25 tokens, `--ssdlm-steps` per block,
    reading at most L - 25 finished tokens), seconds per sequence, generative perplexity under a causal LM
    (`gpt2-large` on GPU; on CPU a small GPT-2 trained here on the same corpus) with the first-EOS
    mask, and unigram entropy;
  * zero-shot perplexity (tab. 3) on local copies under `--zeroshot-root` (sets absent are skipped).
Results: results/text_lm_<scale>.json and .md (command, wall time, machine). `--scale gpu` is the
old name of `--scale paper` (the other pipelines' name), still accepted.

--dry-run runs every setting of the scale (paper: lm1b and owt) and every row (mdlm, ar, sedd) on a
small corpus it writes itself, with tokenizers trained on it (bert-like for LM1B-style settings,
gpt2-like for OWT-style ones, as at cpu scale): 32-token items, one training step of batch 2, a
2-item test bound (and the T sweep), and for OWT-style settings 2 samples of each kind scored by
a one-step local GPT-2. At paper scale each row's model is first built at its configured size on
PyTorch's meta device (no memory, no time) to count its parameters (with the dry-run tokenizer's
vocabulary), then a shrunken copy (DiT 64 wide, 1 block) is trained: a DiT-small step costs
seconds on a CPU. Nothing is written outside a temporary folder.
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
import torch
from text_lm_report import write_results
from text_lm_samples import log, sample_eval, test_blocks

from dnadiff.config import RunConfig, replace
from dnadiff.config_options import load_config
from dnadiff.errors import DnadiffError
from dnadiff.machine import machine_info

REPO = Path(__file__).resolve().parent.parent

# the full corpus
FORTUNES = Path(os.environ.get("DNADIFF_DATA") or REPO.parent / "shared" / "data") / "text" / "fortunes"
T_SWEEP = (10, 20, 50, 100, 200, 500, 1000, None)  # None = continuous time (tab. 11 "∞")


def pick_threads(requested: int | None) -> int:
    """Oversubscribed cores make OpenMP spin: on a busy machine one thread is several times faster."""
    if requested:
        return requested
    cores = os.cpu_count() or 1
    return 1 if os.getloadavg()[0] > cores else min(cores, 8)


# ----------------------------------------------------------------------------- training


def train_row(config: str, overrides: list[str], out_dir: Path, resume: bool) -> dict:
    from dnadiff.training import train

    cfg = load_config(RunConfig, config, overrides + [f"out_dir={out_dir}"])
    start = time.time()
    run_dir = out_dir / cfg.name
    done = (run_dir / "model" / "model.safetensors").is_file()
    if resume and done:
        log(f"{cfg.name}: model exists, reusing {run_dir / 'model'}")
        metrics = json.loads((run_dir / "model" / "metrics.json").read_text())
    else:
        log(f"{cfg.name}: training {cfg.train.max_steps} steps (batch {cfg.train.batch_size}, L {cfg.data.seq_len})")
        metrics = train(cfg, overwrite=True).metrics
    return {"config": config, "name": cfg.name, "model_dir": str(run_dir / "model"), "train_metrics": metrics,
            "train_seconds": round(time.time() - start, 1)}


# ----------------------------------------------------------------------------- evaluation


@torch.no_grad()
def bound_ppl(model, objective, ds, n: int, batch_size: int, seed: int, mc: int) -> dict:
    """exp(Σ bound / Σ tokens) over the first n items; `mc` time draws per sequence (fixed seed)."""
    model.backbone.eval()
    gen = torch.Generator(device=model.device).manual_seed(seed)
    total, tokens = 0.0, 0.0
    for _ in range(mc):
        for s in range(0, n, batch_size):
            items = [ds[i] for i in range(s, min(n, s + batch_size))]
            x0 = torch.stack([it["input_ids"] for it in items]).to(model.device)  # (B, L)
            am = torch.stack([it["attention_mask"] for it in items]).to(model.device)  # (B, L)
            out = objective.loss(model.denoiser, x0, am, generator=gen)
            total += float(out.nll.sum())
            tokens += float(out.num_tokens.sum())
    nll = total / tokens
    return {"ppl": math.exp(nll), "nats_per_token": nll, "tokens": int(tokens / mc), "sequences": n, "mc": mc,
            "pad_policy": getattr(objective, "pad_policy", None)}  # diffusion rows: how pads were treated


def evaluate_row(row: dict, args, sweep: bool) -> dict:
    import dnadiff
    from dnadiff.model import build_objective_for

    model = dnadiff.load(row["model_dir"], map_location=args.device)
    ds, n = test_blocks(model, model.config.data, "test", args.max_eval_items)
    mc = 1 if model.config.objective.name == "ar" else args.mc
    res = {"test": bound_ppl(model, model.objective, ds, n, args.eval_batch, args.seed, mc)}
    log(f"{row['name']}: test ppl {res['test']['ppl']:.2f} ({res['test']['tokens']} tokens)")
    if sweep and args.t_sweep:
        table = []
        for T in T_SWEEP:
            _, obj = build_objective_for(replace(model.config, **{"objective.T": T}), model.tokenizer)
            r = bound_ppl(model, obj, ds, n, args.eval_batch, args.seed, args.mc)  # same seed: common numbers
            table.append({"T": "inf" if T is None else T, "ppl": r["ppl"], "nats_per_token": r["nats_per_token"]})
            log(f"{row['name']}: T={table[-1]['T']}: ppl {r['ppl']:.2f}")
        res["t_sweep"] = table
    return res


# ----------------------------------------------------------------------------- dry run

# the rows' settings unchanged except the corpus, its tokenizers, the sizes and the steps
DRY_RUN = ["data.seq_len=32", "data.num_workers=0", "data.text.dataset=local", "data.text.max_docs=null",
           "train.max_steps=1", "train.batch_size=2", "train.accumulate=1", "train.val_every=100000",
           "train.ckpt_every=100000", "train.val_batches=1", "train.progress=false", "train.threads=1"]
# paper scale: the row's DiT at its size is only built (meta device) and counted; this copy trains
DRY_RUN_SHRINK = ["model.overrides.hidden_size=64", "model.overrides.n_heads=2", "model.overrides.n_blocks=1",
                  "model.overrides.adaln_dim=32"]
DRY_WORDS = ("the a one every old new small large red blue green quick slow cat dog bird fish tree house river "
             "hill road city town man woman child friend sees finds likes takes makes gives keeps wants runs "
             "walks sleeps sings reads writes and but or because when while near under over into from with "
             "today tomorrow always never often again").split()


def prepare_dry_run(out_dir: Path) -> list[str]:
    """A small corpus of made-up sentences (train/valid/test.jsonl) and both tokenizer kinds trained on it."""
    import random

    from dnadiff.data import train_tokenizer

    rng = random.Random(0)
    corpus = out_dir / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 300), ("valid", 20), ("test", 20)):
        docs = [" ".join(rng.choice(DRY_WORDS) for _ in range(rng.randint(4, 40))).capitalize() + "."
                for _ in range(n)]
        (corpus / f"{split}.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    for kind in ("bert-like", "gpt2-like"):
        train_tokenizer([corpus / "train.jsonl"], out_dir / "tokenizers" / kind, kind=kind, vocab_size=300,
                        min_frequency=1)
    return [f"data.text.path={corpus}", f"data.text.cache_dir={out_dir / 'cache'}"]


def count_parameters(config: str, overrides: list[str]) -> int:
    """Parameters of a row's backbone at its configured size, built on the meta device (no memory)."""
    from dnadiff.tokenizers import build_tokenizer
    from dnadiff.training import build_backbone_for

    cfg = load_config(RunConfig, config, overrides)
    with torch.device("meta"):
        _, backbone = build_backbone_for(cfg, build_tokenizer(cfg.tokenizer.kind, cfg.tokenizer.path))
    return sum(p.numel() for p in backbone.parameters())


def dry_run_args(args) -> None:
    """Evaluation and sampling sizes of the dry run (the code paths of a full run, tiny sizes)."""
    args.max_eval_items, args.mc, args.eval_batch = 2, 1, 2
    args.num_samples, args.sample_batch, args.sample_steps, args.ssdlm_steps = 2, 2, 2, 2
    args.scorer_steps, args.scorer_seconds = 1, 120.0
    args.threads = args.threads or 1


# ----------------------------------------------------------------------------- settings


# the block-diffusion rows train the paper's way: the bidirectional DiT on x_t ⊕ x_0 with the block-causal mask
# (the *_bd3lm configs without `_attn` are dnadiff's causal-stream variant; docs/references.md "Block diffusion")
CPU_CONFIG_OF = {"bd3lm": "bd3lm_attn", "bd3lm16": "bd3lm_attn16"}


def settings_for(args) -> list[dict]:
    if args.scale == "cpu":
        cpu = {r: CPU_CONFIG_OF.get(r, r) for r in args.rows}
        return [
            {"setting": "lm1b_style", "rows": {r: f"text/cpu_fortunes_{c}" for r, c in cpu.items() if r != "ssdlm"},
             "samples": False,
             "tokenizer": "bert-like", "t_sweep": False},
            {"setting": "owt_style", "rows": {r: f"text/cpu_fortunes_owt_{c}" for r, c in cpu.items()}, "samples": True,
             "tokenizer": "gpt2-like", "t_sweep": True},
        ]
    # the dry run covers both paper settings, with the local tokenizer of the matching kind
    return [{"setting": st, "rows": {r: f"text/{st}_{r}" for r in args.rows if st == "owt" or r != "ssdlm"},
             "samples": st == "owt",
             "tokenizer": ({"lm1b": "bert-like", "owt": "gpt2-like"}[st] if args.dry_run else None), "t_sweep": True}
            for st in (("lm1b", "owt") if args.dry_run else (args.setting,))]


def prepare_cpu(args, out_dir: Path) -> list[str]:
    from dnadiff.data import train_tokenizer

    train_file = FORTUNES / "train.jsonl"
    if not train_file.is_file():
        raise DnadiffError(f"{train_file}: the fortunes corpus is missing")
    tok_root = out_dir / "tokenizers"
    for kind in ("bert-like", "gpt2-like"):
        train_tokenizer([train_file], tok_root / kind, kind=kind, vocab_size=args.vocab_size)
    log(f"tokenizers ready under {tok_root}")
    return [f"data.text.path={FORTUNES}", f"data.text.cache_dir={out_dir / 'cache'}"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", choices=("cpu", "paper", "gpu"), default="cpu",
                   help="cpu (fortunes, tiny DiTs) or paper (LM1B/OWT, DiT small); gpu = old name of paper")
    p.add_argument("--setting", choices=("lm1b", "owt"), default="owt", help="paper scale: which table")
    p.add_argument("--rows", nargs="+", default=["mdlm", "ar"],
                   choices=("mdlm", "ar", "sedd", "ssdlm", "bd3lm", "bd3lm16"),  # bd3lm: block diffusion, B = 4 / 16
                   help="ssdlm: tab. 5's SSD-LM row (OWT-style setting only: samples, no bound); bd3lm, bd3lm16: block "
                        "diffusion rows, B = 4 / 16 (cpu scale; the bidirectional DiT, the paper's x_t + x_0 layout)")
    p.add_argument("--steps", type=int, default=None, help="override train.max_steps of every row")
    p.add_argument("--set", nargs="*", default=[], help="extra key=value config overrides for every row")
    p.add_argument("--vocab-size", type=int, default=2048, help="cpu: size of the locally trained tokenizers")
    p.add_argument("--mc", type=int, default=2, help="time draws per test sequence for diffusion bounds")
    p.add_argument("--no-t-sweep", dest="t_sweep", action="store_false")
    p.add_argument("--max-eval-items", type=int, default=None)
    p.add_argument("--eval-batch", type=int, default=32)
    p.add_argument("--num-samples", type=int, default=16)
    p.add_argument("--sample-batch", type=int, default=16)
    p.add_argument("--sample-steps", type=int, default=None,
                   help="sampler steps (default 64 on cpu, 1000 at paper scale)")
    p.add_argument("--semi-ar-mult", type=int, default=2, help="semi-AR length = this x training length (tab. 5: 2)")
    p.add_argument("--ssdlm-steps", type=int, default=None,
                   help="SSD-LM sampler steps per 25-token block (default 100 on cpu, 1000 at paper scale: tab. 5)")
    p.add_argument("--scorer", default="gpt2-large", help="paper scale: HF causal LM for generative perplexity")
    p.add_argument("--scorer-steps", type=int, default=300, help="cpu: steps of the locally trained GPT-2 scorer")
    p.add_argument("--scorer-seconds", type=float, default=600.0, help="cpu: safety time limit for the scorer")
    p.add_argument("--zeroshot-root", default=None)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=None, help="runs folder (default runs/text_<scale>)")
    common.add_common_options(
        p, threads=None, threads_help="CPU threads (default: 1 on a busy machine, else up to 8)",
        results_help="results base path (default results/text_lm_<scale>)",
        resume_help="reuse trained model directories",
        dry_run_help="every setting and row: config, model, one step, eval and samples on a tiny corpus; no table",
        from_json="re-render the .md of a finished run from its JSON (no training)")
    args = p.parse_args(argv)
    args.scale = "paper" if args.scale == "gpu" else args.scale
    command = common.command_line(__file__, argv)
    if args.from_json:
        try:
            payload = common.read_results_json(args.from_json, "text_lm")
            payload["table_rendered_by"] = command
            write_results(payload, Path(args.results) if args.results else Path(args.from_json).with_suffix(""))
        except (KeyError, TypeError, DnadiffError) as exc:
            print(f"error: {exc}" if isinstance(exc, DnadiffError) else
                  f"error: --from-json {args.from_json}: not a text_lm results JSON ({exc})", file=sys.stderr)
            return 2
        return 0
    if args.dry_run:
        import tempfile

        dry_run_args(args)
        args.rows = ["mdlm", "ar", "sedd", "ssdlm"]
        with tempfile.TemporaryDirectory(prefix="text_lm_dry_run_") as tmp:
            return _main(args, command, Path(tmp))
    return _main(args, command)


def _main(args, command: str, dry_root: Path | None = None) -> int:
    cwd = os.getcwd()
    try:
        return _run(args, command, dry_root)
    finally:
        os.chdir(cwd)  # _run works from the repository root


CPU_NOTES = [
    "fortunes (Debian `fortunes`, 2.4 MB) stands in for LM1B/OWT; tokenizers (bert-like WordPiece, "
    "gpt2-like byte-level BPE) are trained on its train split; numbers are not comparable to the paper's.",
    "Generative perplexity uses a small GPT-2 trained here on the same corpus for a fixed number of steps "
    "(gpt2-large is not available offline). Fortunes documents are short (~50 tokens), so the first-EOS "
    "figure covers only a sample's first document; the semi-AR sample shares its first window with the "
    "ancestral one (same seed), hence the whole-sample column.",
    "Diffusion test PPL is the NELBO bound with one time draw per sequence per round (--mc rounds, fixed "
    "seed); the T sweep reuses the same seed (common random numbers).",
]


def run_setting(st: dict, base: list[str], args, out_dir: Path, dry_root: Path | None) -> dict:
    """One setting (a tokenizer and its rows): every row trained and evaluated, then its samples and
    zero-shot scores where the setting asks for them."""
    entry = {"setting": st["setting"], "rows": {}}
    extra = ([f"tokenizer.path={out_dir / 'tokenizers' / st['tokenizer']}", "tokenizer.train=null"]  # built above
             if st["tokenizer"] else [])
    for r, config in st["rows"].items():
        over = base + extra + (DRY_RUN if dry_root else [])
        if dry_root and args.scale == "paper":
            params = count_parameters(config, over)
            log(f"{config}: {params:,} parameters at its configured size (vocabulary of the dry-run "
                "tokenizer); training a shrunken copy")
            over = over + DRY_RUN_SHRINK
        row = train_row(config, over, out_dir, args.resume and not dry_root)
        if dry_root and args.scale == "paper":
            row["parameters_full_size"] = params
        # ssdlm trains a denoising cross-entropy: no bound to report (its row is its samples)
        row["eval"] = {"test": None} if r == "ssdlm" else evaluate_row(row, args, sweep=(r == "mdlm" and st["t_sweep"]))
        entry["rows"][r] = row
    if st["samples"] and "mdlm" in entry["rows"]:
        entry["samples"] = sample_eval(entry["rows"], args, out_dir / st["setting"])
    if args.zeroshot_root and "mdlm" in entry["rows"]:
        import dnadiff
        from dnadiff.eval import zero_shot_eval

        m = dnadiff.load(entry["rows"]["mdlm"]["model_dir"], map_location=args.device)
        entry["zeroshot"] = zero_shot_eval(m, args.zeroshot_root, seq_len=m.config.data.seq_len, log=log)
    return entry


def _run(args, command: str, dry_root: Path | None) -> int:
    import transformers

    transformers.logging.set_verbosity_error()  # long documents are never fed to a model whole
    if args.sample_steps is None:
        args.sample_steps = 64 if args.scale == "cpu" else 1000
    if args.ssdlm_steps is None:
        args.ssdlm_steps = 100 if args.scale == "cpu" else 1000
    threads = pick_threads(args.threads)
    torch.set_num_threads(threads)
    os.chdir(REPO)  # configs name paths relative to the repository root
    out_dir = dry_root or Path(args.out_dir or f"runs/text_{args.scale}").resolve()
    start = time.time()
    payload = {"scale": args.scale, "command": command,
               "machine": machine_info(), "settings": [], "notes": [], "num_samples": args.num_samples}
    try:
        base = prepare_dry_run(out_dir) if dry_root else prepare_cpu(args, out_dir) if args.scale == "cpu" else []
        base += [f"train.max_steps={args.steps}"] if args.steps else []
        base += list(args.set)
        for st in settings_for(args):
            payload["settings"].append(run_setting(st, base, args, out_dir, dry_root))
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    payload["wall_seconds"] = time.time() - start
    if args.scale == "cpu":
        payload["notes"] += CPU_NOTES
    if dry_root:
        write_results(payload, dry_root / "text_lm_dry_run")  # the table code runs too; nothing is kept
        print((dry_root / "text_lm_dry_run.md").read_text())
        log(f"dry run ({args.scale}): {sum(len(st['rows']) for st in payload['settings'])} rows trained one step "
            f"and evaluated in {payload['wall_seconds']:.0f} s; no table written")
        return 0
    write_results(payload, Path(args.results or f"results/text_lm_{args.scale}"))
    log(f"done in {payload['wall_seconds']:.0f} s -> {args.results or f'results/text_lm_{args.scale}'}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
