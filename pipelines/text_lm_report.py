"""The Markdown table of pipelines/text_lm.py, from its results JSON (also re-rendered by --from-json)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dnadiff.machine import describe_machine

REPO = Path(__file__).resolve().parent.parent


def machine_line(m: dict) -> str:
    """The machine of a payload: `machine_info()`'s dict, or the keys of JSONs written before it."""
    if "physical_cores" in m:
        return f"{describe_machine(m)}, {m['platform']}, load average at start {m['load_average']}"
    return (f"{m['platform']}, {m['cpu_count']} CPUs, torch {m['torch']} ({m['torch_threads']} threads), "
            f"GPU: {m['gpu']}, load average at start {m['load_average_at_start']}")


def args_num(payload: dict) -> str:
    return str(payload.get("num_samples", ""))


def write_results(payload: dict, base: Path) -> None:
    """BASE.json (text_lm's own JSON layout: indent 1, anything else as text) and BASE.md, with this machine's
    paths made repository-relative."""
    from dnadiff.utils import atomic_write, portable_paths

    base.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(base.with_suffix(".json"), portable_paths(json.dumps(payload, indent=1, default=str)))
    atomic_write(base.with_suffix(".md"), portable_paths(markdown(payload)))


def markdown(payload: dict) -> str:
    """The tables of a text_lm results JSON: each setting's rows, its T sweep, samples and zero-shot scores."""
    lines = [f"# Text language modelling ({payload['scale']})", "",
             f"Command: `{payload['command']}`  ", f"Wall time: {payload['wall_seconds']:.0f} s  ",
             f"Machine: {machine_line(payload['machine'])}", ""]
    if payload.get("table_rendered_by"):
        lines += [f"Table re-rendered without training from the JSON: `{payload['table_rendered_by']}`", ""]
    for st in payload["settings"]:
        lines += [f"## {st['setting']}", "", "| row | steps | train s | test PPL (bound for diffusion) | tokens "
                  "| pad policy |", "|---|---:|---:|---:|---:|---|"]
        for r, row in st["rows"].items():
            t = row["eval"]["test"]
            if t is None:  # ssdlm: a denoising loss, no likelihood
                lines.append(f"| {r} | {row['train_metrics'].get('steps')} | {row['train_seconds']:.0f} | "
                             "n/a (no likelihood bound) | - | - |")
                continue
            lines.append(f"| {r} | {row['train_metrics'].get('steps')} | {row['train_seconds']:.0f} | "
                         f"{t['ppl']:.2f} | {t['tokens']} | {t.get('pad_policy') or 'n/a (exact NLL)'} |")
        sweep = st["rows"].get("mdlm", {}).get("eval", {}).get("t_sweep")
        if sweep:
            lines += ["", "Discrete-T sweep of the MDLM model (tab. 11):", "",
                      "| T | " + " | ".join(str(s["T"]) for s in sweep) + " |",
                      "|---|" + "---:|" * len(sweep),
                      "| PPL | " + " | ".join(f"{s['ppl']:.2f}" for s in sweep) + " |"]
        if st.get("samples"):
            s = st["samples"]
            lines += ["", f"Samples ({args_num(payload)} per row, BOS fixed at position 0) scored by "
                      f"`{os.path.relpath(s['scorer'], REPO) if os.path.isabs(s['scorer']) else s['scorer']}` "
                      + (f"(GPT-2 4 x 128 trained here for {s['scorer_training']['steps']} steps); "
                         if "scorer_training" in s else "; ")
                      + "gen PPL up to and including the first EOS, and over the whole sample:", "",
                      "| samples | length | s/seq | gen PPL (first EOS) | entropy | tokens | gen PPL (whole) | entropy "
                      "| tokens |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for k, v in s.items():
                if isinstance(v, dict) and "gen_ppl" in v:
                    sps = f"{v['seconds_per_sequence']:.2f}" if "seconds_per_sequence" in v else ""
                    lines.append(f"| {k} | {v.get('length', '')} | {sps} | {v['gen_ppl']:.1f} | "
                                 f"{v['entropy_mean']:.2f} | {v['scored_tokens']} | {v['gen_ppl_whole']:.1f} | "
                                 f"{v['entropy_whole']:.2f} | {v['scored_tokens_whole']} |")
        if st.get("zeroshot"):
            lines += ["", "Zero-shot: " + ", ".join(
                f"{k}: {v['ppl']:.2f}" if "ppl" in v else f"{k}: skipped" for k, v in st["zeroshot"].items())]
        lines.append("")
    lines += ["Pad policy (diffusion rows, padded LM1B-style sentences): `reference` = pads masked by the forward "
              "process but only real tokens scored and counted (official MDLM, tab. 1); `score` = pads scored too "
              "(NELBO of the padded sequence); `visible` = pads never masked nor scored (can fall below the "
              "entropy).", ""]
    if payload.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in payload["notes"]]
    return "\n".join(lines) + "\n"
