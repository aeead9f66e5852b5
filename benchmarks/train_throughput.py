"""Training throughput in tokens/s: one optimizer step of the real model and objective, per preset,
thread count and selective-scan implementation.

    python benchmarks/train_throughput.py                                  # tiny, dna-467k, dna-465k; 1 and 2 threads
    python benchmarks/train_throughput.py --scan-impl chunked --repeats 5 --out before.json
    python benchmarks/train_throughput.py --scan-impl compiled --out after.json

A step is what `dnadiff train` does per batch, without Lightning: the objective's loss through the
denoiser (MDLM, eq. 10 of Sahoo et al. 2024, for the bidirectional Caduceus presets; the AR
likelihood for the causal Mamba preset, its use in the paper's tab. 6), backward, gradient clipping
at 1.0 and an AdamW step, in train mode, on random A/C/G/T windows of `--seq-len` (default 1024).
`--scan-impl` goes into the backbone config as `scan_impl` (auto | chunked | ref | compiled | cuda);
a value the backbones do not know is a one-line error. Cells (model x threads) are interleaved:
after one warm-up step each, every round times one step of every cell, so a change of the machine's
load hits all cells alike. Reports the median and the best step time over `--repeats` rounds and
tokens/s = batch x seq_len / step time. Prints the machine and its load; JSON to --out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import _common
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dnadiff.errors import DnadiffError  # noqa: E402
from dnadiff.machine import describe_machine, load_average  # noqa: E402
from dnadiff.utils import format_table  # noqa: E402

MODELS = "caduceus:tiny,caduceus:dna-467k,mamba:dna-465k"
SCAN_IMPLS = ("auto", "chunked", "ref", "compiled", "cuda")


def build_model(spec: str, scan_impl: str, seq_len: int, device: str):
    """(DiffusionModel, optimizer) for `name:preset`: the tiny DNA run config with that backbone;
    the objective is `ar` for a causal backbone, else the config's MDLM."""
    from dnadiff.backbones import BACKBONES, build_backbone
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.model import DiffusionModel
    from dnadiff.tokenizers import DNATokenizer

    name, _, preset = spec.partition(":")
    if name not in BACKBONES:
        raise DnadiffError(f"--models: unknown backbone {name!r} (known: {', '.join(BACKBONES.names())})")
    causal = bool(getattr(BACKBONES.get(name), "is_causal", False))
    overrides = [f"model.backbone={name}", f"model.preset={preset}", f"data.seq_len={seq_len}"]
    if causal:
        overrides += ["objective.name=ar"]
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", overrides)
    tok = DNATokenizer()
    torch.manual_seed(0)
    backbone = build_backbone(name, preset=preset or None, vocab_size=tok.vocab_size, scan_impl=scan_impl)
    model = DiffusionModel(cfg, backbone.to(device), tok)
    backbone.train()
    opt = torch.optim.AdamW(backbone.parameters(), lr=cfg.train.lr, betas=tuple(cfg.train.betas),
                            weight_decay=cfg.train.weight_decay)
    return model, opt


def train_step(model, opt, x0: torch.Tensor, generator: torch.Generator) -> float:
    """One step: loss, backward, clip, AdamW; the loss (a float, which also waits for a GPU)."""
    opt.zero_grad(set_to_none=True)
    out = model.objective.loss(model.denoiser, x0, None, generator=generator)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.backbone.parameters(), 1.0)
    opt.step()
    return float(out.loss)


def main(argv: list[str] | None = None) -> int:
    from tqdm.auto import tqdm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=MODELS, help=f"comma list of backbone:preset (default {MODELS})")
    ap.add_argument("--threads", default="1,2", help="comma list of torch thread counts (default 1,2)")
    ap.add_argument("--scan-impl", default="auto", help=f"selective scan: {' | '.join(SCAN_IMPLS)} (default auto)")
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="timed rounds (default 3)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None, help="write the JSON here")
    args = ap.parse_args(argv)
    try:
        threads = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        ap.error(f"--threads: a comma list of positive counts, got {args.threads!r}")
    if not threads or min(threads) < 1 or args.repeats < 1 or args.batch < 1 or args.seq_len < 1:
        ap.error("--threads, --repeats, --batch and --seq-len must be positive")
    specs = [s.strip() for s in args.models.split(",") if s.strip()]

    print(describe_machine(), file=sys.stderr)
    print(f"start: {load_average()}", file=sys.stderr)
    models = {}
    try:
        for spec in specs:
            models[spec] = build_model(spec, args.scan_impl, args.seq_len, args.device)
    except DnadiffError as exc:
        print(f"error: --scan-impl {args.scan_impl} / {spec}: {exc}", file=sys.stderr)
        return 2
    g = torch.Generator().manual_seed(0)
    x0 = torch.randint(7, 11, (args.batch, args.seq_len), generator=g).to(args.device)  # A/C/G/T ids
    cells = [(spec, n) for spec in specs for n in threads]
    times: dict[tuple[str, int], list[float]] = {c: [] for c in cells}
    try:
        with tqdm(total=len(cells) * (args.repeats + 1), desc="train steps", unit="step") as bar:
            for round_ in range(args.repeats + 1):  # round 0: warm-up, not timed
                for spec, n in cells:
                    torch.set_num_threads(n)
                    model, opt = models[spec]
                    t0 = time.perf_counter()
                    train_step(model, opt, x0, g)
                    if round_ > 0:
                        times[(spec, n)].append(time.perf_counter() - t0)
                    bar.update()
    except RuntimeError as exc:  # e.g. --scan-impl cuda without the kernels
        print(f"error: --scan-impl {args.scan_impl}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    tokens = args.batch * args.seq_len
    rows = []
    for spec, n in cells:
        ts = times[(spec, n)]
        med, best = statistics.median(ts), min(ts)
        rows.append({"model": spec, "parameters": sum(p.numel() for p in models[spec][0].backbone.parameters()),
                     "objective": models[spec][0].config.objective.name, "threads": n, "scan_impl": args.scan_impl,
                     "step_median_s": round(med, 4), "step_min_s": round(best, 4),
                     "tokens_per_s": round(tokens / med), "tokens_per_s_best": round(tokens / best)})
    title = (f"\ntraining step (loss + backward + clip + AdamW), B={args.batch}, L={args.seq_len}, scan_impl "
             f"{args.scan_impl}, {args.device}, {args.repeats} interleaved rounds; {describe_machine()}")
    return _common.finish(__file__, argv, args.out, title + "\n" + format_table(rows),
                          {"batch": args.batch, "seq_len": args.seq_len, "rows": rows})


if __name__ == "__main__":
    sys.exit(main())
