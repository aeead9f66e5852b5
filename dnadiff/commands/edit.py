"""`dnadiff edit MODEL --in SEQS.fa --reward SPEC --max-edits M`: change at most M bases of each input sequence
to raise a reward while staying natural (FASTA with the edit list per record, a TSV of the edits, a JSON)."""

from __future__ import annotations

import argparse

from dnadiff.errors import DnadiffError

METHODS = ("remask", "greedy", "markov", "ledidi")
LEDIDI_STEPS = 200  # default optimisation steps of --method ledidi (Ledidi's own: 1,000 with early stopping)
HELP = "edit native sequences with at most M base changes each to raise a reward (classifier, GC, motif)"
DESCRIPTION = """Edit sequences toward a goal with at most --max-edits base changes each.

  dnadiff edit runs/dhs_mdlm/model --in gm12878.fa --reward classifier:runs/oracles/reward_classifier \
--target HepG2 --max-edits 8 --method remask --out edited.fa
  dnadiff edit runs/dhs_cond_mdlm/model --in seqs.fa --reward classifier:DIR --target HepG2 --class HepG2 \
--guidance 1 --max-edits 16 --out edited.fa
  dnadiff edit MODEL --in seqs.fa --reward gc:0.5 --max-edits 4 --method greedy --out edited.fa
  dnadiff edit MODEL --in seqs.fa --reward gc:0.5 --max-edits 32 --method greedy --also-at 4,8,16 --out m32.fa
  dnadiff edit runs/dhs_markov/model --in seqs.fa --reward motif:TGACTCA --class HepG2 --max-edits 8 \
--method markov --protect 1-20 --out edited.fa
  dnadiff edit runs/dhs_mdlm/model --in seqs.fa --reward classifier:DIR --target HepG2 --max-edits 8 \
--method ledidi --edit-cost 0.1 --steps 200 --out edited.fa

Methods:
  remask  (a masked diffusion MODEL) rounds of: pick positions (the current edits plus new ones by
          --positions), remask them, resample them from the model conditioned on the rest of the sequence
          (--class and --guidance for a class-conditional model), --candidates times; keep the best candidate
          within the budget if it raises the reward.
  greedy  in-silico mutagenesis: each round scores all 3 x L single mutants and keeps the best (at most M
          rounds); MODEL only checks that it reads the sequences.
  markov  (a Markov chain MODEL: `dnadiff train` with model.backbone=markov or markov_classes) the remask rounds
          with the positions resampled from the chain's exact posterior given both flanks.
  ledidi  (Schreiber et al. 2020) gradient descent on per-position base logits, the edit drawn as a hard
          Gumbel-softmax sample (--draws a step, temperature --tau, Adam --lr, --steps steps), minimising
          --edit-cost x edits - reward; the argmax at the end, edits past M rolled back keeping those of
          largest gain. Needs a differentiable reward (gc, gc:T, motif, classifier); MODEL only checks that it
          reads the sequences (no generator, no naturalness prior).
--positions: saliency (the reward's gradient: gc, gc:T, motif, classifier), confidence (the model's least
confident bases), random.

Rewards: {rewards}
Input: A/C/G/T; N or IUPAC codes only inside --protect ranges (positions the editor keeps). Every sequence
must be one the model and the reward can read.

Writes OUT (FASTA: each record `ID method=... reward_before=... reward_after=... n_edits=K edits=POS:FROM>TO,...`,
positions 1-based), OUT.tsv (id, position, from, to, one row per edit) and OUT.json (rewards, reward calls =
sequences scored by the reward, network calls = sequences through the generator's network); an existing
output is kept unless --force."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", help="a dnadiff DNA model directory (masked diffusion for remask, Markov for markov; "
                   "greedy and ledidi only check that it reads the sequences)")
    p.add_argument("--in", dest="inputs", required=True, metavar="SEQS.fa", help="FASTA of the sequences to edit")
    p.add_argument("--reward", required=True, help="{rewards}")
    p.add_argument("--target", default=None, help="class name or index for --reward classifier:DIR")
    p.add_argument("--max-edits", type=int, required=True, metavar="M", help="most bases changed per sequence")
    p.add_argument("--method", default="remask", help=f"{' | '.join(METHODS)} (default remask)")
    p.add_argument("--rounds", type=int, default=8, help="remask/markov rounds (default 8)")
    p.add_argument("--candidates", type=int, default=4, help="resampled candidates per round (default 4)")
    p.add_argument("--positions", default=None, help="saliency | confidence | random (default saliency when the "
                   "reward is differentiable, else confidence)")
    p.add_argument("--class", dest="label", default=None, help="class to condition on (class-conditional models)")
    p.add_argument("--guidance", type=float, default=0.0, help="classifier-free guidance weight with --class")
    p.add_argument("--sampler", default="first_hitting", help="the sampler that resamples (default first_hitting)")
    p.add_argument("--steps", type=int, default=None, help="remask: the sampler's steps, for samplers that have "
                   "steps; ledidi: optimisation steps (default 200; stops early after 100 without a better edit)")
    p.add_argument("--edit-cost", type=float, default=0.1, metavar="LAMBDA",
                   help="ledidi: reward units one edit costs (Ledidi's λ; default 0.1)")
    p.add_argument("--lr", type=float, default=1.0, help="ledidi: Adam learning rate on the logits (default 1.0)")
    p.add_argument("--tau", type=float, default=1.0, help="ledidi: Gumbel-softmax temperature (default 1.0)")
    p.add_argument("--draws", type=int, default=8, help="ledidi: sequences drawn per input a step (default 8)")
    p.add_argument("--protect", action="append", default=[], metavar="START-END",
                   help="1-based inclusive range of positions never edited (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output FASTA (OUT.tsv and OUT.json beside it)")
    p.add_argument("--also-at", default=None, metavar="M1,M2", help="greedy: also write the results of these smaller "
                   "budgets, which in-silico mutagenesis passes through on its way to --max-edits (each exactly "
                   "that --max-edits run's output, reward calls included, at no extra cost): OUT stem + .mM.fa, "
                   ".mM.tsv, .mM.json")
    p.add_argument("--force", action="store_true", help="overwrite an existing output")


def protected_ranges(items: list[str]) -> list[tuple[int, int]]:
    out = []
    for item in items:
        a, sep, b = item.partition("-")
        if not (sep and a.strip().isdigit() and b.strip().isdigit()) or not 1 <= int(a) <= int(b):
            raise DnadiffError(f"--protect {item!r}: expected START-END, 1-based with START <= END (e.g. 1-20)")
        out.append((int(a), int(b)))
    return out


def check_args(args: argparse.Namespace) -> None:
    if args.method not in METHODS:
        raise DnadiffError(f"--method {args.method!r}: expected one of {', '.join(METHODS)}")
    if args.max_edits < 1:
        raise DnadiffError(f"--max-edits must be at least 1, got {args.max_edits}")
    for flag, value in (("--rounds", args.rounds), ("--candidates", args.candidates), ("--steps", args.steps),
                        ("--draws", args.draws), ("--lr", args.lr), ("--tau", args.tau)):
        if value is not None and value < 1:
            raise DnadiffError(f"{flag} must be positive, got {value}")
    if not args.edit_cost >= 0:
        raise DnadiffError(f"--edit-cost must be >= 0, got {args.edit_cost}")
    if args.positions is not None and args.positions not in ("saliency", "confidence", "random"):
        raise DnadiffError(f"--positions {args.positions!r}: expected saliency, confidence or random")
    if args.guidance and args.label is None:
        raise DnadiffError("--guidance needs --class (the class to guide toward)")
    if args.label is not None and args.method in ("greedy", "ledidi"):
        raise DnadiffError(f"--class applies to --method remask or markov, not {args.method}")
    also_at(args)  # --also-at checked with the rest, before anything is read


def also_at(args: argparse.Namespace) -> tuple[int, ...]:
    """--also-at as sorted budgets, each in [1, --max-edits); greedy only."""
    if args.also_at is None:
        return ()
    if args.method != "greedy":
        raise DnadiffError(f"--also-at applies to --method greedy (a path through the budgets), not {args.method}")
    try:
        ms = sorted({int(x) for x in args.also_at.split(",") if x.strip()})
    except ValueError:
        raise DnadiffError(f"--also-at {args.also_at!r}: expected comma-separated integers (e.g. 4,8,16)") from None
    bad = [m for m in ms if not 1 <= m < args.max_edits]
    if bad or not ms:
        raise DnadiffError(f"--also-at {args.also_at!r}: each budget must be at least 1 and below --max-edits "
                           f"{args.max_edits}")
    return tuple(ms)


def budget_paths(out: str, stats_path: str, m: int) -> tuple[str, str, str]:
    """(FASTA, TSV, JSON) of the --also-at budget m: OUT's stem + .mM."""
    from pathlib import Path

    fa = Path(out)
    stem = Path(stats_path[: -len(".json")])
    return str(fa.with_name(f"{stem.name}.m{m}{fa.suffix}")), f"{stem}.m{m}.tsv", f"{stem}.m{m}.json"


def read_inputs(args: argparse.Namespace, ranges: list[tuple[int, int]]):
    """[(id, SEQ)] and the editable masks (numpy Bool[L] per record), checked: lengths vs --max-edits,
    --protect inside every sequence, bases only where an edit may happen."""
    import numpy as np

    from dnadiff.data.records import read_fasta

    records = read_fasta(args.inputs)
    editable = []
    for name, seq in records:
        L = len(seq)
        if args.max_edits > L:
            raise DnadiffError(f"--max-edits {args.max_edits}: above the length of record {name!r} ({L} bases)")
        mask = np.ones(L, dtype=bool)
        for a, b in ranges:
            if b > L:
                raise DnadiffError(f"--protect {a}-{b}: past the end of record {name!r} ({L} bases)")
            mask[a - 1 : b] = False
        bad = [i for i, c in enumerate(seq) if c not in "ACGT" and mask[i]]
        if bad:
            raise DnadiffError(f"{args.inputs}: record {name!r} has {seq[bad[0]]!r} at position {bad[0] + 1}, which "
                               "may be edited: only A/C/G/T can be (keep it with --protect)")
        if int(mask.sum()) < args.max_edits:
            raise DnadiffError(f"--max-edits {args.max_edits}: record {name!r} has only {int(mask.sum())} editable "
                               "positions")
        editable.append(mask)
    return records, editable


def check_model(model, method: str, lengths: set[int], where: str) -> None:
    from dnadiff.backbones.markov import MarkovChain
    from dnadiff.backbones.markov_classes import ClassMarkovChains
    from dnadiff.commands.request import masked_diffusion_dna

    if getattr(model.tokenizer, "kind", "dna") != "dna":
        raise DnadiffError(f"{where}: edit needs a DNA model")
    markov = isinstance(model.backbone, (MarkovChain, ClassMarkovChains))
    if method == "markov" and not markov:
        raise DnadiffError(f"{where}: --method markov needs a Markov chain model (backbone markov or markov_classes)")
    if method == "remask" and not masked_diffusion_dna(model.config):
        raise DnadiffError(f"{where}: --method remask needs a masked diffusion DNA model "
                           f"(objective {model.config.objective.name}); use --method greedy or markov")
    longest = model.max_length
    if longest is not None and max(lengths) > longest:
        raise DnadiffError(f"{where}: the model reads at most {longest} bases; the input has sequences of "
                           f"{max(lengths)}")


def probe_reward(reward, x, spec: str) -> None:
    """One reward call on the first input sequence (not counted): a reward that cannot score this length fails
    here, in one line, before anything is edited or written."""
    from dnadiff.guidance.rewards import Motif, reward_capabilities

    if isinstance(reward, Motif) and len(reward.fwd) > x.shape[1]:
        raise DnadiffError(f"--reward {spec}: the motif is longer than the sequences ({x.shape[1]} bases)")
    counted = reward_capabilities(reward).counts_calls
    calls = reward.calls if counted else None
    try:
        out = reward(x[:1])
        if len(out) != 1:
            raise ValueError(f"{len(out)} values for one sequence")
    except DnadiffError:
        raise
    except (RuntimeError, ValueError, IndexError, TypeError) as exc:
        raise DnadiffError(f"--reward {spec}: cannot score sequences of {x.shape[1]} bases "
                           f"({str(exc).splitlines()[0][:160]})") from None
    if counted:
        reward.calls = calls


def build_editor(args, model, reward):
    from dnadiff.guidance.editing import DiffusionProposer, MarkovProposer, RemaskEditor
    from dnadiff.guidance.rewards import soft_support

    positions = args.positions or ("saliency" if soft_support(reward) is None else "confidence")
    if args.method == "markov":
        from dnadiff.eval.markov_infill import model_chain

        proposer = MarkovProposer(model_chain(model, args.label))
    else:
        proposer = DiffusionProposer(model, label=args.label, guidance=args.guidance, sampler=args.sampler,
                                     steps=args.steps)
    return RemaskEditor(proposer, rounds=args.rounds, candidates=args.candidates, positions=positions), positions


def ledidi_settings(args: argparse.Namespace) -> dict:
    return {"edit_cost": args.edit_cost, "steps": args.steps or LEDIDI_STEPS, "lr": args.lr, "tau": args.tau,
            "draws": args.draws}


def run_ledidi(args: argparse.Namespace, x0, reward, mask, length: int):
    """Ledidi on one batch of equal-length sequences, with its own bar over the optimisation steps."""
    from dnadiff.guidance.ledidi import ledidi_edit
    from dnadiff.logs import progress_bar

    settings = ledidi_settings(args)
    bar = progress_bar(total=settings["steps"], desc=f"ledidi ({length} bp)", unit="step", nested=True)
    try:
        return ledidi_edit(x0, reward, args.max_edits, mask, seed=args.seed, on_step=lambda _: bar.update(1),
                           **settings)
    finally:
        bar.close()


def run(args: argparse.Namespace) -> int:
    import time

    import numpy as np
    import torch

    from dnadiff.checkpoint import load_for_inference
    from dnadiff.commands.checks import check_writable
    from dnadiff.commands.preflight import check_model_input
    from dnadiff.guidance.editing import greedy_edit
    from dnadiff.guidance.rewards import build_reward, soft_support
    from dnadiff.logs import log, progress_bar
    from dnadiff.sampling import output_paths
    from dnadiff.utils import format_table, json_text, recover_together, refuse_existing, write_together

    check_args(args)
    smaller = also_at(args)
    ranges = protected_ranges(args.protect)
    out, stats_path = output_paths(args.out, "dna")
    if out is None:
        raise DnadiffError("--out: give a FASTA file name (OUT.tsv and OUT.json go beside it)")
    tsv_path = stats_path[: -len(".json")] + ".tsv"
    records, editable = read_inputs(args, ranges)  # the inputs first, then the destination
    check_model_input(args.model_dir)
    budgets = {args.max_edits: (out, tsv_path, stats_path),
               **{m: budget_paths(out, stats_path, m) for m in smaller}}
    every_path = [path for paths in budgets.values() for path in paths]
    recover_together(every_path)
    refuse_existing(every_path, args.force)
    check_writable(out)
    model = load_for_inference(args.model_dir)
    lengths = {len(s) for _, s in records}
    check_model(model, args.method, lengths, str(args.model_dir))
    tok = model.tokenizer
    reward = build_reward(args.reward, target=args.target, device=model.device)
    if args.method == "ledidi" and soft_support(reward) is not None:
        raise DnadiffError(f"--method ledidi needs a differentiable reward (gc, gc:T, motif, classifier): "
                           f"{soft_support(reward)}")
    plain = args.method in ("greedy", "ledidi")  # no generator
    editor, positions = (None, None) if plain else build_editor(args, model, reward)

    results: dict[int, dict[int, tuple]] = {m: {} for m in budgets}  # budget -> record -> (seq, before, after)
    totals = {m: {"reward_calls": 0, "network_calls": 0} for m in budgets}
    start = time.time()
    groups = sorted(lengths)
    bar = progress_bar(total=len(records), desc=f"edit ({args.method})", unit="seq")
    try:
        for L in groups:  # one batch per length
            idx = [i for i, (_, s) in enumerate(records) if len(s) == L]
            x0 = torch.tensor([tok.encode(records[i][1]) for i in idx], device=model.device)
            mask = torch.as_tensor(np.stack([editable[i] for i in idx]), device=model.device)
            probe_reward(reward, x0, args.reward)
            if args.method == "greedy":
                res = greedy_edit(x0, reward, args.max_edits, mask, snapshot_at=smaller)
            elif args.method == "ledidi":
                res = run_ledidi(args, x0, reward, mask, L)
            else:
                res = editor.edit(x0, reward, args.max_edits, mask, seed=args.seed)
            for m, outcome in {args.max_edits: res, **res.snapshots}.items():
                if bool((outcome.edit_counts(x0) > m).any()):
                    raise AssertionError("an editor passed --max-edits")  # a bug, never a user error
                totals[m]["reward_calls"] += outcome.reward_calls
                totals[m]["network_calls"] += outcome.network_calls
                for j, i in enumerate(idx):
                    results[m][i] = (tok.decode(outcome.x[j].cpu()), float(outcome.reward_before[j]),
                                     float(outcome.reward_after[j]))
            bar.update(len(idx))
    finally:
        bar.close()
    wall = time.time() - start
    files, tables = [], []
    for m, (fa_path, tsv_at, stats_at) in budgets.items():
        fasta, tsv, stats = render(args, records, results[m], totals[m], m, wall, reward, editor, positions)
        stats.update(out=fa_path, tsv=tsv_at, budget_of=None if m == args.max_edits else args.max_edits)
        files += [(fa_path, fasta), (tsv_at, tsv), (stats_at, json_text(stats))]
        tables.append(stats["summary"])
    write_together(files)
    print(format_table(tables))  # the result on stdout (progress and logs on stderr), as design and sample
    log.info("\nwrote %s", ", ".join(path for path, _ in files))
    return 0


def render(args, records, results: dict, totals: dict, max_edits: int, wall: float, reward, editor, positions):
    """(FASTA text, TSV text, stats dict) of one budget's results."""
    from dnadiff.data.records import format_fasta
    from dnadiff.guidance.editing import edit_list, format_edits
    from dnadiff.guidance.rewards import reward_capabilities

    name = reward_capabilities(reward).name or args.reward
    fasta, tsv, per_record = [], ["id\tposition\tfrom\tto"], []
    for i, (rid, seq) in enumerate(records):
        new, before, after = results[i]
        edits = edit_list(seq, new)
        fasta.append((f"{rid} method={args.method} reward={name} reward_before={before:.6g} reward_after={after:.6g} "
                      f"n_edits={len(edits)} edits={format_edits(edits)}", new))
        tsv += [f"{rid}\t{p}\t{a}\t{b}" for p, a, b in edits]
        per_record.append({"id": rid, "reward_before": before, "reward_after": after, "edits": len(edits)})
    n = len(records)
    summary = {"method": args.method, "reward": name, "sequences": n, "max_edits": max_edits,
               "edits_mean": sum(r["edits"] for r in per_record) / n,
               "reward_before_mean": sum(r["reward_before"] for r in per_record) / n,
               "reward_after_mean": sum(r["reward_after"] for r in per_record) / n,
               "reward_calls_per_sequence": totals["reward_calls"] / n,
               "network_calls_per_sequence": totals["network_calls"] / n, "wall_seconds": round(wall, 3)}
    stats = {"model": str(args.model_dir), "input": str(args.inputs), "reward_spec": args.reward, "target": args.target,
             "method": args.method, "positions": positions, "rounds": None if editor is None else args.rounds,
             "candidates": None if editor is None else args.candidates, "class": args.label, "guidance": args.guidance,
             "sampler": args.sampler if args.method == "remask" else None, "protect": args.protect, "seed": args.seed,
             "ledidi": ledidi_settings(args) if args.method == "ledidi" else None, **totals, "summary": summary,
             "records": per_record}
    return format_fasta(fasta), "\n".join(tsv) + "\n", stats


def resolved_config(args: argparse.Namespace) -> dict:
    """--print-config: every option of this command with its value."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in ("command", "print_config")}
