"""One-command GPU check: what the CPU tests cannot show, on one CUDA device.

    python benchmarks/gpu_check.py                      # on the GPU machine (< 8 min on one H200)
    python benchmarks/gpu_check.py --device cpu --tiny  # the same checks, tiny, on the CPU (a test runs this)

Checks, each a row of results/gpu_check.{json,md} (pass = the numbers are within the stated bound):
  scan        pure-PyTorch chunked selective scan on the device vs the float64 sequential reference
              (forward and all input gradients, max |Δ|)
  train       bf16-mixed (GPU) / fp32 (CPU) training steps through `dnadiff.training.train`: tiny and
              paper-size Caduceus (dna-467k), DiT-small, HyenaDNA: tokens/s, peak memory, finite loss
  ddp1        the same code path with train.strategy=ddp train.devices=1: equals the plain run's weights
  fsdp1       GPU: train.strategy=fsdp, sharded checkpoint, --resume, export, dnadiff.load of the result;
              CPU: the one-line refusal (Lightning has no CPU FSDP)
  sampler     every registered sampler on the device with a device generator: same seed, same samples
  demo        `dnadiff demo` end to end (train.accelerator set to the device)
  kernels     with the `cuda` extra installed (mamba-ssm, causal-conv1d): the kernel path of the Mamba
              mixer (conv_impl/scan_impl=cuda) against the PyTorch path: Caduceus-PS at dna-467k width
              (236 channels) forward and every gradient, the cached AR step of a Mamba LM, and the
              fwd+bwd time of both paths in bf16; a row saying "not installed" otherwise
Nothing is downloaded; mamba-ssm is not needed (the pure-PyTorch scan is what is checked; the train
rows say whether the Mamba layers ran on the kernels).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _peak_mb(device: str) -> float:
    if device.startswith("cuda"):
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # process high-water mark (KB on Linux)


def check_scan(device: str, tiny: bool) -> dict:
    from dnadiff.backbones.scan import selective_scan_chunked, selective_scan_ref

    b, L, e, n = (2, 64, 8, 4) if tiny else (2, 1024, 128, 16)
    g = torch.Generator().manual_seed(0)
    ins = dict(u=torch.randn(b, L, e, generator=g), delta=torch.randn(b, L, e, generator=g) * 0.5,
               A=-torch.rand(e, n, generator=g) - 0.1, B=torch.randn(b, L, n, generator=g),
               C=torch.randn(b, L, n, generator=g), D=torch.randn(e, generator=g), z=torch.randn(b, L, e, generator=g),
               delta_bias=torch.randn(e, generator=g) * 0.1)
    dy = torch.randn(b, L, e, generator=g)

    def run(fn, dtype, dev):
        xs = {k: v.to(dev, dtype).requires_grad_() for k, v in ins.items()}
        y = fn(**xs, delta_softplus=True)
        (y * dy.to(dev, dtype)).sum().backward()
        return y.detach().double().cpu(), {k: v.grad.double().cpu() for k, v in xs.items()}

    y_ref, g_ref = run(selective_scan_ref, torch.float64, "cpu")
    y, gr = run(selective_scan_chunked, torch.float32, device)
    fwd = float((y - y_ref).abs().max())
    grad = max(float((gr[k] - g_ref[k]).abs().max() / (g_ref[k].abs().max() + 1e-12)) for k in ins)
    return {"check": "scan", "shape": f"B{b} L{L} E{e} N{n}", "fwd_max_abs": fwd, "grad_max_rel": grad,
            "pass": fwd < 1e-4 and grad < 1e-4}


def _train_cfg(out: Path, name: str, backbone: str, preset: str, device: str, steps: int, batch: int, seq_len: int,
               extra: list[str]):
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config

    accel = "gpu" if device.startswith("cuda") else "cpu"
    precision = "bf16-mixed" if accel == "gpu" else "32-true"
    return load_config(RunConfig, "experiments/tiny_dna_mdlm", [
        f"name={name}", f"out_dir={out}", f"model.backbone={backbone}", f"model.preset={preset}",
        f"train.accelerator={accel}", "train.devices=1", f"train.precision={precision}", f"train.max_steps={steps}",
        f"train.batch_size={batch}", f"data.seq_len={seq_len}", "train.val_every=1000000", "train.val_batches=1",
        f"train.ckpt_every={steps}", "train.progress=false", "train.warmup_steps=1", *extra])


KERNELS = ("causal_conv1d_fn", "causal_conv1d_update", "selective_scan_fn", "selective_state_update")


def _mamba_path(device: str) -> str:
    """What the Mamba layers run on this device with the default (auto) choice."""
    from dnadiff.backbones import kernels

    if not device.startswith("cuda"):
        return "pytorch"
    found = [k for k in KERNELS if kernels.kernel_available(k)]
    return "cuda kernels" if len(found) == len(KERNELS) else (
        "some kernels: " + ",".join(found) if found else "pytorch")


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-12))


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def check_kernels(device: str, tiny: bool) -> list[dict]:
    from dnadiff.backbones import build_backbone, kernels

    missing = [k for k in KERNELS if not kernels.kernel_available(k)]
    if missing:
        why = "; ".join(f"{k}: {kernels.import_problem(k)}" for k in missing if kernels.import_problem(k))
        return [{"check": "kernels", "case": "not installed", "missing": ",".join(missing),
                 "result": why or "the cuda extra is not installed: nothing to compare", "pass": True}]
    cuda, pure = dict(conv_impl="cuda", scan_impl="cuda"), dict(conv_impl="torch", scan_impl="chunked")
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 means fp32 here
    rows = []
    try:
        # Caduceus-PS at the paper's width: forward and every parameter gradient, fp32
        preset, (b, length) = ("tiny", (2, 64)) if tiny else ("dna-467k", (4, 1024))
        torch.manual_seed(0)
        fast = build_backbone("caduceus", preset, vocab_size=12, **cuda).to(device)
        ref = build_backbone("caduceus", preset, vocab_size=12, **pure).to(device)
        ref.load_state_dict(fast.state_dict())
        ids = torch.randint(7, 11, (b, length), generator=torch.Generator().manual_seed(1)).to(device)
        out_f, out_r = fast(ids), ref(ids)
        gy = torch.randn_like(out_r)
        grads_f = torch.autograd.grad(out_f, list(fast.parameters()), gy)
        grads_r = torch.autograd.grad(out_r, list(ref.parameters()), gy)
        fwd, grad = _rel(out_f, out_r), max(_rel(x, y) for x, y in zip(grads_f, grads_r))
        rows.append({"check": "kernels", "case": f"caduceus:{preset} fp32 B{b} L{length}", "fwd_max_rel": fwd,
                     "grad_max_rel": grad, "pass": fwd < 5e-4 and grad < 5e-3})  # a wrong layout is off by O(1)
        # cached AR decoding of a Mamba LM: causal_conv1d_update + selective_state_update
        torch.manual_seed(0)
        fast_lm = build_backbone("mamba", "tiny", vocab_size=12, **cuda).to(device).eval()
        ref_lm = build_backbone("mamba", "tiny", vocab_size=12, **pure).to(device).eval()
        ref_lm.load_state_dict(fast_lm.state_dict())
        x = ids[:2, :64]
        with torch.no_grad():
            logits = []
            for m in (fast_lm, ref_lm):
                cache = m.allocate_cache(x.shape[0], x.shape[1])
                logits.append(torch.stack([m.step(x[:, i], cache) for i in range(x.shape[1])], dim=1))
            full = ref_lm(x)
        step, vs_full = _rel(logits[0], logits[1]), _rel(logits[0], full)
        rows.append({"check": "kernels", "case": "mamba:tiny cached AR step, 64 tokens", "fwd_max_rel": step,
                     "vs_full_forward": vs_full, "pass": step < 1e-4 and vs_full < 1e-3})
        # time: fwd+bwd of both paths under bf16 autocast (training's precision)
        times = {}
        for name, model in (("kernels", fast), ("pytorch", ref)):
            runs = []
            for _ in range(2 if tiny else 7):
                _sync(device)
                t0 = time.perf_counter()
                with torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16):
                    loss = model(ids).float().square().mean()
                loss.backward()
                _sync(device)
                runs.append(time.perf_counter() - t0)
            times[name] = min(runs[1:] if len(runs) > 1 else runs)
        rows.append({"check": "kernels", "case": f"caduceus:{preset} bf16 fwd+bwd B{b} L{length}",
                     "kernels_ms": round(1e3 * times["kernels"], 2), "pytorch_ms": round(1e3 * times["pytorch"], 2),
                     "speedup": round(times["pytorch"] / times["kernels"], 2), "pass": True})
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    return rows


def check_train(device: str, tiny: bool, out: Path) -> list[dict]:
    from dnadiff.training import train

    models = [("caduceus", "tiny"), ("dit", "tiny"), ("hyena", "tiny")] if tiny else \
        [("caduceus", "tiny"), ("caduceus", "dna-467k"), ("dit", "small"), ("hyena", "tiny-1k")]
    steps, batch, seq_len = (3, 2, 64) if tiny else (30, 32, 1024)
    rows = []
    for backbone, preset in models:
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        cfg = _train_cfg(out, f"train_{backbone}_{preset}", backbone, preset, device, steps, batch, seq_len, [])
        t0 = time.perf_counter()
        res = train(cfg, overwrite=True)
        wall = time.perf_counter() - t0
        loss = res.metrics["train_loss_last"]
        rows.append({"check": "train", "model": f"{backbone}:{preset}", "precision": cfg.train.precision,
                     "mamba_layers": _mamba_path(device) if backbone == "caduceus" else "-",
                     "steps": res.metrics["steps"], "tokens_per_s": round(steps * batch * seq_len / wall, 1),
                     "peak_mb": _peak_mb(device), "loss": loss,
                     "pass": res.metrics["steps"] == steps and loss == loss and abs(loss) < 1e6})
    return rows


def _weights(model_dir: Path) -> dict:
    from dnadiff.weights import read_weights

    return read_weights(model_dir / "model.safetensors")


def check_ddp1(device: str, tiny: bool, out: Path) -> dict:
    from dnadiff.training import train

    steps = 3 if tiny else 10
    plain = train(_train_cfg(out, "ddp1_plain", "caduceus", "tiny", device, steps, 4, 128, []), overwrite=True)
    ddp = train(_train_cfg(out, "ddp1_ddp", "caduceus", "tiny", device, steps, 4, 128, ["train.strategy=ddp"]),
                overwrite=True)
    a, b = _weights(plain.model_dir), _weights(ddp.model_dir)
    diff = max(float((a[k].double() - b[k].double()).abs().max()) for k in a if a[k].numel())
    # bf16 autocast is deterministic per kernel choice; allow rounding-level drift on the GPU
    return {"check": "ddp1", "max_abs_weight_diff": diff, "pass": diff < (1e-6 if device == "cpu" else 1e-3)}


def nll_per_token(model, x: torch.Tensor) -> float:
    """Mean over the batch of the model's NLL (bound) per token, nats: `model.nll` gives a LossOutput."""
    out = model.nll(x)
    return float((out.nll / out.num_tokens).mean())


def check_fsdp1(device: str, tiny: bool, out: Path) -> dict:
    from dnadiff.errors import DnadiffError
    from dnadiff.training import train

    if not device.startswith("cuda"):
        cfg = _train_cfg(out, "fsdp_cpu", "caduceus", "tiny", device, 2, 2, 64, ["train.strategy=fsdp", "train.ema=0"])
        try:
            train(cfg, overwrite=True)
        except DnadiffError as exc:
            return {"check": "fsdp1", "result": f"refused on CPU: {exc}", "pass": "GPUs only" in str(exc)}
        return {"check": "fsdp1", "result": "ran on the CPU unexpectedly", "pass": False}
    import dnadiff

    extra = ["train.strategy=fsdp", "train.ema=0", "train.ckpt_every=2"]
    first = _train_cfg(out, "fsdp1", "caduceus", "dna-467k", device, 4, 8, 512, extra)
    train(first, overwrite=True)
    ckpt = out / "fsdp1" / "checkpoints" / "last.ckpt"
    sharded = ckpt.is_dir()
    more = _train_cfg(out, "fsdp1", "caduceus", "dna-467k", device, 6, 8, 512, extra)
    res = train(more, resume=True)
    model = dnadiff.load(res.model_dir)
    x = torch.randint(7, 11, (2, 64))
    nll = nll_per_token(model, x)
    return {"check": "fsdp1", "sharded_checkpoint": sharded, "steps_after_resume": res.metrics["steps"],
            "reloaded_nll": nll, "pass": sharded and res.metrics["steps"] == 6 and nll == nll}


def check_samplers(device: str, tiny: bool) -> list[dict]:
    from dnadiff.backbones import build_backbone
    from dnadiff.diffusion import OBJECTIVES, build_schedule
    from dnadiff.model import Denoiser, DiffusionModel
    from dnadiff.samplers import SAMPLERS, build_sampler

    torch.manual_seed(0)
    backbone = build_backbone("caduceus", preset="tiny", vocab_size=12).to(device).eval()
    denoiser = Denoiser(backbone)
    schedule = build_schedule("loglinear", eps=1e-3)
    shape = (2, 32) if tiny else (8, 1024)
    rows = []
    causal = Denoiser(build_backbone("mamba", preset="tiny", vocab_size=12).to(device).eval())
    steps = 8 if tiny else 128
    for name in SAMPLERS.names():
        noise = SAMPLERS.get(name).noise
        if name == "autoregressive":  # AR decoding needs a causal model (cached Mamba steps)
            sampler, den = build_sampler(name, first_token_ids=[7, 8, 9, 10]), causal
        elif noise == "uniform":  # udlm: uniform noise over the four bases
            sampler, den = build_sampler(name, steps=steps, data_ids=[7, 8, 9, 10]), denoiser
        elif noise == "block":  # block diffusion reads a causal network's stream (carried Mamba state)
            sampler, den = build_sampler(name, steps=steps), causal
        elif noise != "mask":  # continuous noise (plaid, ssdlm): the objective's own network around a tiny one
            objective = next(n for n in OBJECTIVES.names() if OBJECTIVES.get(n).noise == noise)
            sampler, den = None, continuous_model(objective, device)
        else:
            sampler, den = build_sampler(name, steps=steps), denoiser
        draws = []
        for _ in range(2):
            gen = torch.Generator(device=device).manual_seed(123)
            t0 = time.perf_counter()
            with torch.no_grad():
                if isinstance(den, DiffusionModel):  # through the model: its own network, schedule and sampler
                    x, sampler = den.generate(*shape, sampler=name, steps=steps, generator=gen, return_sampler=True)
                else:
                    x = sampler.generate(den, schedule, 3, shape, generator=gen)
            draws.append(x.cpu())
            wall = time.perf_counter() - t0
        same = torch.equal(draws[0], draws[1])
        filled = bool((draws[0] != 3).all())
        rows.append({"check": "sampler", "sampler": name, "same_seed_same_samples": same, "no_mask_left": filled,
                     "nfe": getattr(sampler, "last_nfe", None), "seconds": round(wall, 3), "pass": same and filled})
    return rows


def continuous_model(objective: str, device: str):
    """An untrained tiny model of a continuous-noise objective (configs/experiments/tiny_dna_OBJECTIVE.yaml):
    the objective's own network (plaid's embeddings and learned schedule) around the tiny backbone."""
    from dnadiff.config import RunConfig, load_config
    from dnadiff.model import DiffusionModel
    from dnadiff.modelio.model_dir import backbone_from_config
    from dnadiff.tokenizers import DNATokenizer

    torch.manual_seed(0)
    cfg = load_config(RunConfig, f"experiments/tiny_dna_{objective}", [])
    tok = DNATokenizer()
    net = backbone_from_config(cfg, tok.vocab_size).to(device).eval()  # with the objective's wrapper
    return DiffusionModel(cfg, net, tok)


def check_demo(device: str, tiny: bool, out: Path) -> dict:
    accel = "gpu" if device.startswith("cuda") else "cpu"
    cmd = [sys.executable, "-m", "dnadiff", "demo", "--out", str(out / "demo"), "--steps", "3" if tiny else "150",
           "--num-samples", "2", f"train.accelerator={accel}", "train.progress=false"]
    if tiny:
        cmd += ["train.batch_size=2", "train.val_batches=1", "sample.steps=4"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    return {"check": "demo", "returncode": proc.returncode, "seconds": round(time.perf_counter() - t0, 1),
            "tail": proc.stderr.strip().splitlines()[-1:] if proc.returncode else [], "pass": proc.returncode == 0}


CHECKS = ("scan", "kernels", "train", "ddp1", "fsdp1", "sampler", "demo")


def markdown(results: dict) -> str:
    from dnadiff.utils import markdown_table

    lines = [f"# GPU check: {results['machine']}", "", f"device {results['device']}, tiny={results['tiny']}, "
             f"wall {results['wall_s']} s, all pass: {results['all_pass']}; "
             f"{results.get('load_average', 'load not recorded')} at the end", ""]
    for kind in CHECKS:
        rows = [{k: v for k, v in r.items() if k != "check"} for r in results["checks"] if r["check"] == kind]
        if rows:
            columns = list(dict.fromkeys(k for r in rows for k in r))  # rows of one check may differ
            lines += [f"## {kind}", "", markdown_table(rows, columns), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--tiny", action="store_true", help="tiny sizes and few steps (the CPU test)")
    p.add_argument("--out", default=str(REPO / "results" / "gpu_check.json"), help="JSON output; the .md is beside it")
    p.add_argument("--checks", default=",".join(CHECKS),
                   help=f"comma-separated subset of {','.join(CHECKS)} (default: all)")
    args = p.parse_args(argv)
    chosen = [c.strip() for c in args.checks.split(",") if c.strip()]
    unknown = sorted(set(chosen) - set(CHECKS))
    if unknown:
        print(f"error: --checks: unknown {', '.join(unknown)} (choose from {','.join(CHECKS)})", file=sys.stderr)
        return 2
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda but torch sees no CUDA device (use --device cpu --tiny)", file=sys.stderr)
        return 2
    if args.device == "cpu":
        torch.set_num_threads(1)
    t0 = time.time()
    checks: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        work = Path(tmp)
        steps = {"scan": lambda: [check_scan(args.device, args.tiny)],
                 "kernels": lambda: check_kernels(args.device, args.tiny),
                 "train": lambda: check_train(args.device, args.tiny, work),
                 "ddp1": lambda: [check_ddp1(args.device, args.tiny, work)],
                 "fsdp1": lambda: [check_fsdp1(args.device, args.tiny, work)],
                 "sampler": lambda: check_samplers(args.device, args.tiny),
                 "demo": lambda: [check_demo(args.device, args.tiny, work)]}
        for name in chosen:
            rows = steps[name]()
            for row in rows:
                print(json.dumps(row), flush=True)
            checks += rows
    from dnadiff.machine import describe_machine, load_average

    results = {"device": args.device, "tiny": args.tiny, "checks_run": chosen, "machine": describe_machine(),
               "load_average": load_average(),
               "wall_s": round(time.time() - t0, 1), "all_pass": all(r["pass"] for r in checks), "checks": checks}
    from dnadiff.utils import atomic_write, portable_paths, write_json

    out = Path(args.out)
    write_json(out, portable_paths(results))
    atomic_write(out.with_suffix(".md"), portable_paths(markdown(results) + "\n"))
    print(f"wrote {out} and {out.with_suffix('.md')}; all pass: {results['all_pass']}")
    return 0 if results["all_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
