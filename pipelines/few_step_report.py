"""The page of pipelines/few_step.py (issue 36 §3): per domain a table of quality against network calls, the
call count at which each family first reaches its own L-call quality, and the quality-vs-calls PNG."""

from __future__ import annotations

from pathlib import Path

import judging

FAMILIES = [  # key, label, model, sampler
    ("mdlm", "MDLM", "mdlm", "ancestral"),
    ("sdtt", "MDLM + SDTT", "sdtt", "ancestral"),
    ("udlm", "UDLM", "udlm", "udlm"),
    ("duo", "UDLM + DUO distillation", "duo", "udlm"),
    ("remdm", "MDLM + ReMDM", "mdlm", "remdm"),
]


DNA_KEYS = [("kmer JS k=3 (bits)", "k-mer JS k=3"), ("kmer JS k=6 (bits)", "k-mer JS k=6"),
            ("3-mer Pearson r", "3-mer Pearson"), ("motif hit-rate Spearman", "motif Spearman"),
            ("GC Wasserstein-1", "GC W1")]


TEXT_KEYS = [("gen_ppl", "gen PPL (AR judge)"), ("entropy", "unigram entropy (nats)")]


HEADLINE = {"dna": ("3-mer Pearson r", "higher"), "text": ("gen_ppl", "lower")}


def _cell(summary: dict, metric: str) -> str:
    return f"{summary[metric]['mean']:.4g} ± {summary[metric]['range']:.2g}" if metric in summary else ""


def _nfe(row: dict) -> str:
    nfe = [v for v in row.get("nfe_per_sequence", []) if v is not None]
    return f"{sum(nfe) / len(nfe):.2f} [{row['nfe_per_sequence_min']}–{row['nfe_per_sequence_max']}]" if nfe else ""


def domain_table(domain: str, res: dict, length: int) -> str:
    from dnadiff.utils import markdown_table

    keys = DNA_KEYS if domain == "dna" else TEXT_KEYS
    lines = []
    for r in [*res["references"], *res["rows"]]:
        calls = "" if "calls" not in r else (f"L={r['calls']}" if r["calls"] == length else str(r["calls"]))
        per_1k = r.get("wall_seconds_per_1000")
        lines.append({"row": r["label"], "calls": calls, "NFE per sequence [min–max]": _nfe(r),
                      **{name: _cell(r["summary"], m) for m, name in keys},
                      **(judging.disc_cells(r) if domain == "dna" else {}),
                      "wall s / 1,000 seqs": f"{per_1k:.1f}" if per_1k is not None else "",
                      "CPU s / 1,000 seqs": f"{r['cpu_seconds_per_1000']:.1f}" if "cpu_seconds_per_1000" in r else ""})
    return markdown_table(lines)


def reach_lines(domain: str, res: dict, length: int) -> list[str]:
    metric, how = HEADLINE[domain]
    rule = "≥ mean_L − range_L" if how == "higher" else "≤ mean_L + range_L"
    out = [f"First reaches its own L-call quality ({metric}: the smallest call count whose mean is {rule}, "
           "range = max − min over the seeds of the L-call cell):"]
    for key, label, *_ in FAMILIES:
        fr = res["first_reach"].get(key)
        if fr:
            out.append(f"- {label}: {fr['calls']} calls (L={length}: {fr['l_mean']:.4g} ± {fr['l_range']:.2g})")
    if domain == "dna":
        by = {(r["family"], r["calls"]): r["summary"].get(metric, {}).get("mean") for r in res["rows"]}
        better = [k for k in res["calls"] if None not in (by.get(("udlm", k)), by.get(("mdlm", k)))
                  and by[("udlm", k)] > by[("mdlm", k)]]
        out.append(f"- uniform vs masking ({metric}, means): UDLM above MDLM at {better or 'no'} call counts of "
                   f"{res['calls']}")
    return out


def plot(path: Path, results: dict, length: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dnadiff.utils import atomic_write

    domains = list(results)
    fig, axes = plt.subplots(1, len(domains), figsize=(6 * len(domains), 4.2), squeeze=False)
    for ax, domain in zip(axes[0], domains):
        res, (metric, _) = results[domain], HEADLINE[domain]
        for key, label, *_ in FAMILIES:
            pts = [(r["calls"], r["summary"][metric]) for r in res["rows"]
                   if r["family"] == key and metric in r["summary"]]
            if pts:
                ax.errorbar([p[0] for p in pts], [p[1]["mean"] for p in pts], yerr=[p[1]["range"] / 2 for p in pts],
                            marker="o", capsize=3, label=label)
        for i, ref in enumerate(res["references"]):
            if metric in ref["summary"]:
                ax.axhline(ref["summary"][metric]["mean"], ls="--", color=f"C{5 + i}", label=ref["label"])
        ax.set_xscale("log", base=2)
        ax.set_xticks(res["calls"], [str(k) for k in res["calls"]])
        ax.set_xlabel(f"network calls per sequence (L = {length})")
        ax.set_ylabel("3-mer Pearson (test windows)" if domain == "dna" else "gen PPL under dnadiff's AR judge")
        if domain == "text":
            ax.set_yscale("log")
        ax.set_title(f"{domain.upper()}: quality vs network calls (bars: seed range)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buf.getvalue())


def render(command: str, wall: float, cpu: float, load: tuple, size: dict, results: dict, choices: dict,
           trained: list, stem: Path, scale: str) -> str:
    from dnadiff.machine import describe_machine

    md = [f"# Quality against network calls ({scale} scale; issue 36 §3)", "",
          f"- command: `{command}`",
          f"- wall time: {wall / 60:.1f} min, CPU time of this process: {cpu / 60:.1f} min; machine: "
          f"{describe_machine()}; load average at start / end: {load[0]} / {load[1]}",
          f"- {len(size['seeds'])} seeds (sampling seeds {size['seeds']}; text: "
          f"{size.get('text_seeds', size['seeds'])}) x {size['num']} sequences of "
          f"{size['length']} tokens per cell; calls = sampler steps K (L = {size['length']}); NFE per sequence "
          "as recorded by the sampler (mean over seeds [min–max over sequences]): masked samplers add a "
          "noise-removal call for a sequence still masked after the last step and stop early once nothing is "
          "masked; the udlm sampler makes exactly K",
          "- cells: mean ± range (max − min) over the seeds; wall and CPU seconds per 1,000 sequences from the "
          "samples' statistics (this process's CPU time around the sampling call); on a loaded machine wall time "
          "runs far above CPU time",
          f"- distillation: `dnadiff distill` with teacher steps {size['teacher_steps']}, {size['round_updates']} "
          f"updates a round, {size['distill_batch']} rollouts (SDTT) / pool {size['pool_size']} (DUO) , lr "
          f"{size['lr']:g}; the student's K (rounds) chosen on validation among {size['student_grid']}",
          f"- ReMDM: schedule and eta chosen on validation among {size['remdm_grid']} at {size['select_calls']} calls",
          "- validation: sampling seed 1000; DNA: highest 3-mer Pearson against the valid split's windows; text: "
          "the lowest gen PPL among settings whose mean unigram entropy is ≥ 95% of real validation text's "
          "(else the highest entropy)"]
    for t in trained:
        md.append(f"- model {t['domain']} {t['model']}: `{t['command']}` ({t.get('wall_s')} s wall, "
                  f"{t.get('cpu_s')} s CPU when trained)")
    for domain, res in results.items():
        ch = choices[domain]
        md += ["", f"## {domain.upper()}" + (" (human chr22 windows; reference: the test split)" if domain == "dna"
                                            else " (fortunes; generative perplexity under dnadiff's own AR judge, "
                                                 "not GPT-2)"), "",
               f"Chosen on validation: ReMDM {ch['remdm']['chosen']}; SDTT student K = {ch['sdtt']['chosen']}; "
               f"DUO student K = {ch['duo']['chosen']}.", "", domain_table(domain, res, size["length"]), "",
               *reach_lines(domain, res, size["length"])]
        if domain == "dna":
            md += ["", judging.disc_note(), judging.floor_line(res["references"][0], "valid windows vs test windows")]
    md += ["", f"Plot: {stem.name}.png"]
    return "\n".join(md) + "\n"
