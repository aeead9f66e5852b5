"""Backbone throughput: forward+backward tokens/s of every registered preset on CPU, and the paper-size
Mamba-family presets against mambapy's pure-PyTorch Mamba LM of the same width and depth.

    python benchmarks/backbones.py [--seq-len 1024] [--batch 2] [--threads 1] [--repeats 3]
                                   [--only dit:tiny,hyena] [--skip dit:small] [--out results.json]
    python benchmarks/backbones.py --no-registry --scan-impl chunked       # the comparison only
    python benchmarks/backbones.py --no-registry --scan-impl compiled

Registry: every preset, one warm-up step, then the median of `--repeats` timed steps of
`loss = logsumexp(logits).mean(); loss.backward()` on random DNA token ids (vocab 12), train mode
(dropout on, as in training).

Comparison (pip package `mambapy`, its parallel scan): Caduceus `dna-467k` (PS: RCPS, 4 scans per
layer: two directions x two strands) and `dna-467k-ph` (PH: 2 scans per layer), each against a mambapy
LM of d_model 118 x 4 layers (unidirectional: 1 scan per layer), and Mamba `dna-465k` (1 scan per
layer) against mambapy d_model 128 x 4 layers; d_state 16, expand 2, d_conv 4 on both sides. All six
models live in one process and are timed interleaved, round by round (one warm-up round, then
`--compare-repeats` rounds, default 7), and each reports its fastest step: load that comes and goes
on a shared machine hits every model alike and the minimum is the step undisturbed by it.
`--scan-impl` (auto | chunked | ref | compiled | cuda) goes into the dnadiff backbones' config
(`scan_impl`; a value they do not know is a one-line error). Default 1 thread (dnadiff/threads.py:
more threads on a busy machine are slower). Prints the machine and its load, a table, the JSON
(also to --out).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

import _common
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dnadiff.backbones import BACKBONES, build_backbone  # noqa: E402
from dnadiff.utils import format_table  # noqa: E402

VOCAB = 12


def time_fwd_bwd(model: torch.nn.Module, call: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                 repeats: int, warmup: bool = True) -> float:
    """Median seconds of one forward+backward step (after one untimed step when `warmup`)."""
    model.train()

    def step() -> None:
        model.zero_grad(set_to_none=True)
        out = call(x)
        out.float().logsumexp(-1).mean().backward()

    return _common.median_seconds(step, repeats, warmup)


def _selected(name: str, preset: str, only: list[str], skip: list[str]) -> bool:
    def match(spec: str) -> bool:
        n, _, p = spec.partition(":")
        return n == name and (not p or p == preset)

    return (not only or any(match(s) for s in only)) and not any(match(s) for s in skip)


def scan_kwargs(name: str, scan_impl: str) -> dict:
    """{"scan_impl": ...} for the backbones with a selective scan (their config has the field)."""
    fields = getattr(BACKBONES.get(name), "Config", None)
    has = fields is not None and "scan_impl" in getattr(fields, "__dataclass_fields__", {})
    return {"scan_impl": scan_impl} if has else {}


def bench_registry(args: argparse.Namespace) -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(0)
    x = torch.randint(7, 11, (args.batch, args.seq_len), generator=g)  # A/C/G/T ids
    t = torch.rand(args.batch, generator=g)
    for name in BACKBONES.names():
        if not BACKBONES.get(name).neural:  # the Markov baseline has no forward/backward to time
            continue
        for preset in sorted(BACKBONES.get(name).PRESETS):
            if not _selected(name, preset, args.only, args.skip):
                continue
            torch.manual_seed(0)
            try:
                model = build_backbone(name, preset=preset, vocab_size=VOCAB,
                                       **scan_kwargs(name, args.scan_impl.split(",")[0]))
                sec = time_fwd_bwd(model, lambda ids: model(ids, t), x, args.repeats)
            except Exception as exc:  # e.g. a preset whose maximum length is below --seq-len
                msg = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
                rows.append({"model": f"{name}:{preset}", "error": msg})
                print(f"{name}:{preset}: skipped ({msg})", file=sys.stderr, flush=True)
                continue
            rows.append(_row(f"{name}:{preset}", model, sec, args))
            print(_fmt(rows[-1]), file=sys.stderr, flush=True)
    return rows


# (label, backbone, preset, selective scans per layer): each is raced against a mambapy LM of its own
# d_model and n_layer (1 scan per layer); Caduceus runs one scan per direction (x2) and, PS, per strand (x2)
COMPARED = [("caduceus:dna-467k (PS)", "caduceus", "dna-467k", 4),
            ("caduceus:dna-467k-ph (PH)", "caduceus", "dna-467k-ph", 2),
            ("mamba:dna-465k", "mamba", "dna-465k", 1)]


class MambapyLM(torch.nn.Module):
    """mambapy's Mamba LM: embedding, its `Mamba` stack of residual blocks, RMSNorm, linear head,
    as `mambapy.lm.LM` builds it (that module also imports its Mamba-2, which needs einops)."""

    def __init__(self, d_model: int, n_layer: int, vocab_size: int = 16):
        super().__init__()
        from mambapy.mamba import Mamba, MambaConfig, RMSNorm

        cfg = MambaConfig(d_model=d_model, n_layers=n_layer, d_state=16, expand_factor=2, d_conv=4, bias=False,
                          conv_bias=True, pscan=True)
        self.embedding = torch.nn.Embedding(vocab_size, d_model)
        self.mamba = Mamba(cfg)
        self.norm_f = RMSNorm(d_model, cfg.rms_norm_eps)
        self.lm_head = torch.nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm_f(self.mamba(self.embedding(ids))))


def bench_vs_mambapy(args: argparse.Namespace) -> list[dict]:
    """dnadiff's paper-size Mamba-family presets against mambapy LMs of the same width and depth,
    interleaved in this process, the fastest of `--compare-repeats` steps each."""
    from tqdm.auto import tqdm

    try:
        import mambapy.mamba  # noqa: F401
    except ImportError:
        print("mambapy is not installed (pip install mambapy): comparison skipped", file=sys.stderr)
        return []
    g = torch.Generator().manual_seed(0)
    x = torch.randint(7, 11, (args.batch, args.seq_len), generator=g)
    entries = []  # (label, model, call, peer label)
    peers: dict[tuple[int, int], str] = {}
    scans = {}
    impls = args.scan_impl.split(",")
    impl_of: dict[str, str] = {}
    for label, name, preset, per_layer in COMPARED:
        for impl in impls:  # several: the same weights with each scan, in the same rounds
            tagged = label if len(impls) == 1 else f"{label} [{impl}]"
            scans[tagged], impl_of[tagged] = per_layer, impl
            torch.manual_seed(0)
            ours = build_backbone(name, preset=preset, vocab_size=VOCAB, scan_impl=impl)
            d, n = ours.config.d_model, ours.config.n_layer
            peer = f"mambapy LM d{d} x{n} (unidirectional)"
            entries.append((tagged, ours, ours, peer))
        if (d, n) not in peers:
            torch.manual_seed(0)
            lm = MambapyLM(d, n)
            peers[(d, n)] = peer
            scans[peer] = 1
            entries.append((peer, lm, lm, None))
    times: dict[str, list[float]] = {label: [] for label, *_ in entries}
    with tqdm(total=len(entries) * (args.compare_repeats + 1), desc="fwd+bwd vs mambapy", unit="step") as bar:
        for round_ in range(args.compare_repeats + 1):  # round 0: warm-up
            for label, model, call, _ in entries:
                sec = time_fwd_bwd(model, call, x, repeats=1, warmup=False)
                if round_ > 0:
                    times[label].append(sec)
                bar.update()
    rows = []
    for label, model, _, peer in entries:
        row = _row(label, model, min(times[label]), args)
        row["scan_impl"] = impl_of[label] if peer is not None else "mambapy pscan"
        row["scans_per_layer"] = scans[label]
        rows.append(row)
    best = {r["model"]: r["seconds"] for r in rows}
    for (label, _, _, peer), row in zip(entries, rows):
        if peer is not None:
            row["vs"] = peer
            row["speedup_vs_mambapy"] = round(best[peer] / row["seconds"], 2)
    return rows


def _row(label: str, model: torch.nn.Module, sec: float, args: argparse.Namespace) -> dict:
    tokens = args.batch * args.seq_len
    return {"model": label, "parameters": sum(p.numel() for p in model.parameters()),
            "batch": args.batch, "seq_len": args.seq_len, "seconds": round(sec, 4),
            "tokens_per_s": round(tokens / sec, 1), "threads": torch.get_num_threads()}


def _fmt(r: dict) -> str:
    if "error" in r:
        return f"{r['model']:<58} skipped: {r['error']}"
    return f"{r['model']:<58} {r['parameters']:>12,} {r['seconds']:>9.3f} s {r['tokens_per_s']:>11,.0f} tok/s"


def main(argv: list[str] | None = None) -> int:
    from dnadiff.errors import DnadiffError
    from dnadiff.machine import describe_machine, load_average

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3, help="registry: timed steps, median (default 3)")
    ap.add_argument("--compare-repeats", type=int, default=7,
                    help="comparison: interleaved timed rounds, fastest kept (default 7)")
    ap.add_argument("--scan-impl", default="auto", help="selective scan of the dnadiff backbones: "
                    "auto | chunked | ref | compiled | cuda (default auto); the comparison takes a comma list "
                    "(e.g. chunked,compiled: before and after, interleaved in the same rounds)")
    ap.add_argument("--only", default="", help="comma list of name or name:preset to run (default: all)")
    ap.add_argument("--skip", default="", help="comma list of name or name:preset to leave out")
    ap.add_argument("--no-registry", action="store_true", help="only the comparison with mambapy")
    ap.add_argument("--no-compare", action="store_true", help="skip the comparison with mambapy")
    ap.add_argument("--out", default=None, help="write the JSON rows here")
    args = ap.parse_args(argv)
    args.only = [s for s in args.only.split(",") if s]
    args.skip = [s for s in args.skip.split(",") if s]
    if min(args.threads, args.repeats, args.compare_repeats, args.batch, args.seq_len) < 1:
        ap.error("--threads, --repeats, --compare-repeats, --batch and --seq-len must be positive")
    torch.set_num_threads(args.threads)
    print(describe_machine(), file=sys.stderr)
    print(f"start: {load_average()}", file=sys.stderr)

    try:
        rows = [] if args.no_registry else bench_registry(args)
        compare = [] if args.no_compare else bench_vs_mambapy(args)
    except DnadiffError as exc:  # e.g. a --scan-impl the backbones do not know
        print(f"error: --scan-impl {args.scan_impl}: {exc}", file=sys.stderr)
        return 2
    text = [f"\nforward+backward, B={args.batch}, L={args.seq_len}, scan_impl {args.scan_impl}; {describe_machine()}"]
    if rows:
        text += [f"registry: median of {args.repeats}", f"{'model':<58} {'params':>12} {'step':>11} {'throughput':>17}"]
        text += [_fmt(r) for r in rows]
    if compare:
        text += [f"\nvs mambapy: interleaved in one process, fastest of {args.compare_repeats} rounds",
                 format_table(compare, ["model", "parameters", "scans_per_layer", "scan_impl", "seconds",
                                        "tokens_per_s", "speedup_vs_mambapy"])]
    return _common.finish(__file__, argv, args.out, "\n".join(text), {"registry": rows, "vs_mambapy": compare})


if __name__ == "__main__":
    sys.exit(main())
