"""The cost of one reward fine-tuning update against the cost of its own denoiser passes, and its peak memory.

    python benchmarks/reward_update_cost.py --threads 1                    # both methods, defaults, 2 updates
    python benchmarks/reward_update_cost.py --threads 1 --plain            # also without recomputation
    python benchmarks/reward_update_cost.py --threads 1 --out results/reward_update_cost

Each configuration (method × recompute) runs in a fresh child process, as `dnadiff design-finetune`'s
training step does (dnadiff/training/reward_loop.py): the tiny DNA config's Caduceus (`caduceus:tiny`,
d32 × 2, RCPS; untrained: the cost does not depend on the weights), the gc reward, length 128, 128
sampling steps, gradient through the last 50 (drakes), batch 16, groups of 8 (policy_gradient, dpo), AdamW;
dpo's pool of pretrained trajectories (16 here: an update's cost does not depend on its size) is drawn
before the updates, as the training loop does once per run.

Seconds per update are compared with the same number of plain denoiser passes at the same batch and
length: the child counts the denoiser calls of an update (a wrapper) in its forward pass, a call whose
output carries a graph as one forward + backward, a call without as one forward (the recomputation in the
backward pass is the overhead measured, not counted), and times plain passes of the same backbone:
reference = n_graph · t(forward + backward) + n_plain · t(forward).

Peak memory: the child's ru_maxrss (getrusage) and Linux's VmHWM at the end of the updates, and the rise
of VmHWM over the models built (reset before the first update); the target is the process's peak. The
child sets glibc's mmap threshold as `dnadiff design-finetune` does (reward_loop.return_freed_memory;
--glibc-default: not); the column `malloc` says which.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DEFAULTS = {"length": 128, "sample_steps": 128, "truncate_steps": 50, "batch_size": 16, "group_size": 8,
            "kl_weight": 0.1, "reward": "gc", "pool_size": 16}


def child(method: str, recompute: bool, updates: int, threads: int, s: dict, glibc_default: bool) -> dict:
    import torch

    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig, load_config
    from dnadiff.guidance.rewards import build_reward
    from dnadiff.machine import memory_kib, reset_peak_memory
    from dnadiff.model import DiffusionModel, SuppressTokens
    from dnadiff.reward_tuning import drakes_loss, make_grid, policy_gradient_loss, preference_loss, sample_groups
    from dnadiff.reward_tuning.preference import sample_pool
    from dnadiff.tokenizers import DNATokenizer
    from dnadiff.training.reward_loop import return_freed_memory

    torch.set_num_threads(threads)
    malloc = "glibc default" if glibc_default or not return_freed_memory() else "mmap >= 256 KiB"
    torch.manual_seed(0)
    L, B = int(s["length"]), int(s["batch_size"])
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"data.seq_len={L}", f"sample.length={L}"])
    tok = DNATokenizer()
    backbone = build_backbone(cfg.model.backbone, preset=cfg.model.preset, vocab_size=tok.vocab_size,
                              **cfg.model.overrides)
    pre_backbone = copy.deepcopy(backbone).requires_grad_(False).eval()
    model, pre_model = DiffusionModel(cfg, backbone, tok), DiffusionModel(cfg, pre_backbone, tok)
    banned = model.banned_ids()

    class Counted(torch.nn.Module):
        """The denoiser, counting its calls: graph (forward + backward) / plain forward / recomputed."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.counts = {"graph": 0, "plain": 0, "recomputed": 0}
            self.backward_phase = False

        def forward(self, x, t=None):
            out = self.inner(x, t)
            key = "recomputed" if self.backward_phase else ("graph" if out.requires_grad else "plain")
            self.counts[key] += 1
            return out

    den = Counted(SuppressTokens(model.denoiser, banned))
    pre = Counted(SuppressTokens(pre_model.denoiser, banned))
    grid = make_grid(model.schedule, int(s["sample_steps"]), eps=model.sampling_eps)
    reward = build_reward(s["reward"])
    opt = torch.optim.AdamW(backbone.parameters(), lr=1e-4, weight_decay=0.0)
    backbone.eval()
    x_init = torch.full((B, L), tok.mask_id, dtype=torch.long)
    pool = None
    if method == "dpo":  # its offline data, drawn once before training (not part of an update's cost)
        pool = sample_pool(pre, grid, tok.mask_id, L, tok.vocab_size, reward, int(s["pool_size"]), B,
                           generator=torch.Generator().manual_seed(99))
    load_start = [round(v, 2) for v in os.getloadavg()]
    rss_built = memory_kib("VmHWM")
    reset_peak_memory()
    seconds, counts = [], []
    for step in range(updates):
        gen = torch.Generator().manual_seed(step)
        for c in (den, pre):
            c.counts = dict.fromkeys(c.counts, 0)
            c.backward_phase = False
        start = time.perf_counter()
        if method == "drakes":
            out = drakes_loss(den, pre, reward.soft, grid, tok.mask_id, x_init, tok.vocab_size, s["kl_weight"],
                              truncate_steps=int(s["truncate_steps"]), generator=gen, recompute=recompute)
        elif method == "dpo":
            idx = torch.randint(len(pool), (B,), generator=gen)
            out = preference_loss(den, grid, tok.mask_id, pool, idx, s["kl_weight"], int(s["group_size"]),
                                  recompute=recompute)
        else:
            groups = sample_groups(den, grid, tok.mask_id, x_init, tok.vocab_size, reward, generator=gen)
            out = policy_gradient_loss(den, pre, grid, tok.mask_id, groups, s["kl_weight"], int(s["group_size"]),
                                       recompute=recompute)
        den.backward_phase = pre.backward_phase = True
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        seconds.append(time.perf_counter() - start)
        counts.append({"model": dict(den.counts), "pretrained": dict(pre.counts)})
        print(f"  {method} recompute={recompute} update {step}: {seconds[-1]:.1f} s {counts[-1]}", file=sys.stderr,
              flush=True)
    peak_kib = memory_kib("VmHWM")
    maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    # the reference: plain passes of the same backbone at the same batch and length
    x = torch.randint(7, 11, (B, L))
    t = torch.rand(B)
    for _ in range(2):
        den(x, t)
    reps = 5
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(reps):
            den(x, t)
    t_fwd = (time.perf_counter() - start) / reps
    start = time.perf_counter()
    for _ in range(reps):
        opt.zero_grad()
        den(x, t).float().logsumexp(-1).sum().backward()
    t_fb = (time.perf_counter() - start) / reps
    c = counts[-1]
    n_graph = c["model"]["graph"] + c["pretrained"]["graph"]
    n_plain = c["model"]["plain"] + c["pretrained"]["plain"]
    reference = n_graph * t_fb + n_plain * t_fwd
    per_update = min(seconds)  # the fastest: the least disturbed by other work on a shared machine
    return {"method": method, "recompute": recompute, "updates": updates, "seconds": [round(v, 2) for v in seconds],
            "seconds_per_update": round(per_update, 2), "counts": c, "t_forward_s": round(t_fwd, 4),
            "t_forward_backward_s": round(t_fb, 4), "reference_s": round(reference, 2),
            "ratio_to_reference": round(per_update / reference, 3),
            "peak_mib": round(peak_kib / 1024, 1) if peak_kib else None,
            "ru_maxrss_mib": round(maxrss_kib / 1024, 1),
            "peak_rise_mib": round((peak_kib - rss_built) / 1024, 1) if peak_kib and rss_built else None,
            "built_mib": round(rss_built / 1024, 1) if rss_built else None,
            "malloc": malloc, "load_start": load_start, "load_end": [round(v, 2) for v in os.getloadavg()]}


def format_md(result: dict) -> str:
    from dnadiff.utils import format_table

    rows = [{"method": r["method"], "recompute": r["recompute"], "s/update": r["seconds_per_update"],
             "reference_s": r["reference_s"], "ratio": r["ratio_to_reference"],
             "graph_passes": r["counts"]["model"]["graph"] + r["counts"]["pretrained"]["graph"],
             "plain_passes": r["counts"]["model"]["plain"] + r["counts"]["pretrained"]["plain"],
             "recomputed": r["counts"]["model"]["recomputed"] + r["counts"]["pretrained"]["recomputed"],
             "peak_MiB": r["peak_mib"], "ru_maxrss_MiB": r["ru_maxrss_mib"], "rise_MiB": r["peak_rise_mib"],
             "malloc": r.get("malloc", "glibc default"),
             "load_1min": "{}→{}".format(r["load_start"][0], r["load_end"][0]) if "load_start" in r else "(run's)"}
            for r in result["rows"]]
    s = result["settings"]
    return "\n".join([
        "# Cost of one reward fine-tuning update (caduceus:tiny)", "",
        "Command: " + "; then ".join(f"`{c}`" for c in result["commands"]) + "  ",
        f"Settings: length {s['length']}, {s['sample_steps']} sampling steps, gradient through the last "
        f"{s['truncate_steps']} (drakes), batch {s['batch_size']}, groups of {s['group_size']} (policy_gradient, dpo), "
        f"dpo pool {s['pool_size']}, "
        f"reward {s['reward']}, β = {s['kl_weight']}; {result['updates']} updates per configuration.  ",
        f"Machine: {result['machine']}; `uptime` before and after each command: "
        + "; ".join(f"{b} / {a}" for b, a in zip(result["uptime_before"], result["uptime_after"]))
        + f". Wall time {' + '.join(str(w) for w in result['wall_s'])} s.", "",
        "s/update: the fastest update; reference: the same number of plain denoiser passes "
        "(graph passes = forward + backward, plain = forward only, timed on the same backbone, batch and length); "
        "ratio = s/update ÷ reference (target ≤ 3). recomputed: forwards rerun in the backward pass. "
        "peak: the child's VmHWM (ru_maxrss alike), rise: its growth over the built models (target: peak ≤ 2048 MiB).",
        "", "```", format_table(rows), "```", ""])


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "n/a"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--updates", type=int, default=2)
    p.add_argument("--methods", default="drakes,policy_gradient,dpo")
    p.add_argument("--plain", action="store_true", help="also run without recomputation (more memory)")
    p.add_argument("--plain-updates", type=int, default=1)
    p.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    p.add_argument("--merge", action="store_true",
                   help="keep OUT.json's rows of other configurations (method, recompute) and add these")
    for key, value in DEFAULTS.items():
        p.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=value)
    p.add_argument("--glibc-default", action="store_true",
                   help="leave glibc's malloc as it is (the training loop sets mmap for >= 256 KiB)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    settings = {k: getattr(args, k) for k in DEFAULTS}
    if args.child:
        method, recompute, updates = args.child.split(":")
        print(json.dumps(child(method, recompute == "1", int(updates), args.threads, settings, args.glibc_default)))
        return

    from dnadiff.machine import describe_machine, machine_info
    from dnadiff.utils import atomic_write, write_json

    start, before = time.time(), uptime()
    rows = []
    configs = [(m, True, args.updates) for m in args.methods.split(",")]
    if args.plain:
        configs += [(m, False, args.plain_updates) for m in args.methods.split(",")]
    for method, recompute, updates in configs:
        argv = [sys.executable, os.path.abspath(__file__), "--child", f"{method}:{int(recompute)}:{updates}",
                "--threads", str(args.threads), *(["--glibc-default"] if args.glibc_default else [])]
        for key in DEFAULTS:
            argv += [f"--{key.replace('_', '-')}", str(settings[key])]
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=os.path.dirname(argv[1]) + "/..")
        sys.stderr.write(done.stderr)
        if done.returncode != 0:
            raise SystemExit(f"child {method} recompute={recompute} failed ({done.returncode})")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    command = "python benchmarks/reward_update_cost.py " + " ".join(sys.argv[1:])
    info = machine_info()
    info["torch_threads"] = args.threads
    result = {"commands": [command], "settings": settings, "updates": args.updates, "machine": describe_machine(info),
              "uptime_before": [before], "uptime_after": [uptime()], "wall_s": [round(time.time() - start, 1)],
              "rows": rows}
    if args.merge and args.out and os.path.exists(args.out + ".json"):
        with open(args.out + ".json") as fh:
            old = json.load(fh)
        if any(settings.get(k) != v for k, v in old["settings"].items()):  # keys added since: not compared
            raise SystemExit(f"--merge: {args.out}.json has other settings ({old['settings']})")
        new = {(r["method"], r["recompute"]) for r in rows}
        result["rows"] = [r for r in old["rows"] if (r["method"], r["recompute"]) not in new] + rows
        old.setdefault("commands", old.get("command"))  # files written before the merge option: one command
        for key in ("commands", "uptime_before", "uptime_after", "wall_s"):
            prev = old[key] if isinstance(old[key], list) else [old[key]]
            result[key] = prev + result[key]
    md = format_md(result)
    print(md)
    if args.out:
        write_json(args.out + ".json", result)
        atomic_write(args.out + ".md", md)


if __name__ == "__main__":
    main()
