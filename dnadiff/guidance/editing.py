"""Reward-directed editing: change at most M positions of a native sequence to raise a reward (`dnadiff edit`).

    out = greedy_edit(x0, reward, max_edits=8, editable=mask)                     # in-silico mutagenesis
    out = RemaskEditor(DiffusionProposer(model, label="HepG2")).edit(x0, reward, 8, mask, seed=0)
    out = RemaskEditor(MarkovProposer(chain)).edit(x0, reward, 8, mask, seed=0)   # chain posterior resampling
    out.x, out.reward_before, out.reward_after, out.reward_calls, out.network_calls

x0: Long[B, L] token ids (A/C/G/T; N only where `editable` is False); the edit count of a row is its Hamming
distance to x0, never above M. Methods:

greedy (in-silico mutagenesis, the classical baseline): each round scores every single mutant of the current
    sequence at the editable positions (3 per position; a mutant that would pass M edits is not scored) and keeps
    the best if it raises the reward; at most M rounds, stopping when no mutant helps.
remask (masked diffusion; the "MDLM editor"): each round picks positions P = the current edits E plus new ones
    (max(M - |E|, ⌈M/4⌉), drawn among the 3x as many highest-scored positions), remasks P and resamples them
    from the model conditioned on the rest of the sequence (the template of the sampler; class label and
    classifier-free guidance when given), `candidates` times; a candidate with more than M edits is dropped
    before the reward sees it, the best remaining one is kept if it raises the reward. Because P contains E, a
    round can also undo edits. Position scores: `saliency` (the first-order gain of the best substitution,
    max_b ∂r/∂onehot[i, b] - ∂r/∂onehot[i, x_i], from the reward's differentiable `soft`; Nisonoff et al. 2024
    use the same Taylor expansion for guidance), `confidence` (-log p_model(x_i | the rest): the model's least
    confident bases), or `random`.
markov: the same rounds with the resampling drawn from a Markov chain's exact posterior p(x_P | x_rest)
    (dnadiff/eval/markov_infill.py, forward filtering backward sampling): no network at all.

ledidi (Schreiber et al. 2020, "Ledidi: Designing genomic edits that induce functional activity"): gradient
descent on -reward + λ·(number of edits) over a Gumbel-softmax relaxation of the edits, the published reference
for this task: dnadiff/guidance/ledidi.py. Counts: `reward_calls` = sequences scored by the reward (a gradient call
counts its rows too); `network_calls` = sequences pushed through the generator's network (a CFG step: two).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.guidance.rewards import reward_capabilities
from dnadiff.tokenizers.dna import DNATokenizer

TOK = DNATokenizer()
BASES = torch.tensor(TOK.nucleotide_ids)  # A C G T ids
POSITION_SCORES = ("saliency", "confidence", "random")
SCORE_CHUNK = 4096  # mutants per reward call


@dataclass
class EditOutcome:
    """What an editor returns: the edited ids and what it cost."""

    x: Tensor  # Long[B, L]
    reward_before: Tensor  # Float64[B]
    reward_after: Tensor  # Float64[B]
    reward_calls: int
    network_calls: int
    rounds: int
    # greedy only: {m: the outcome after round m}, exactly the --max-edits m run (greedy_edit's `snapshot_at`)
    snapshots: dict[int, "EditOutcome"] = field(default_factory=dict)

    def edit_counts(self, x0: Tensor) -> Tensor:
        return (self.x != x0.to(self.x.device)).sum(dim=1)


def edit_list(before: str, after: str) -> list[tuple[int, str, str]]:
    """[(1-based position, from, to)] of the positions where two equal-length sequences differ."""
    if len(before) != len(after):
        raise DnadiffError(f"edit list: sequences of lengths {len(before)} and {len(after)}")
    return [(i + 1, a, b) for i, (a, b) in enumerate(zip(before, after)) if a != b]


def format_edits(edits: list[tuple[int, str, str]]) -> str:
    """'12:A>G,40:T>C' ('-' for none): the header field of `dnadiff edit`."""
    return ",".join(f"{p}:{a}>{b}" for p, a, b in edits) or "-"


def apply_edits(seq: str, field: str) -> str:
    """`seq` with the edits of a header field ('12:A>G,40:T>C', 1-based) applied; the from-bases are checked."""
    out = list(seq)
    for item in ([] if field == "-" else field.split(",")):
        pos, _, change = item.partition(":")
        a, _, b = change.partition(">")
        i = int(pos) - 1
        if not 0 <= i < len(out) or out[i] != a or len(b) != 1:
            raise DnadiffError(f"edit {item!r} does not apply to this sequence")
        out[i] = b
    return "".join(out)


def score(reward: Callable, x: Tensor, counter: list[int]) -> Tensor:
    """Float64[B] rewards, in chunks, counted in counter[0] (rows)."""
    outs = []
    for s in range(0, x.shape[0], SCORE_CHUNK):
        chunk = x[s : s + SCORE_CHUNK]
        counter[0] += int(chunk.shape[0])
        outs.append(torch.as_tensor(reward(chunk), dtype=torch.float64).reshape(-1).to(x.device))
    return torch.cat(outs) if outs else torch.zeros(0, dtype=torch.float64)


# ----------------------------------------------------------------------------- greedy mutagenesis


def greedy_edit(x0: Tensor, reward: Callable, max_edits: int, editable: Tensor | None = None,
                on_round: Callable[[int], None] | None = None, snapshot_at: tuple[int, ...] = ()) -> EditOutcome:
    """In-silico mutagenesis (module docstring): at most `max_edits` rounds of the best single mutant.

    snapshot_at: budgets m < max_edits whose outcome to keep on the way (EditOutcome.snapshots). Greedy is a path:
    through round m no mutant passes m edits (round r starts from at most r - 1), so nothing the `within` test
    drops differs from a max_edits = m run, and the state after round m, its reward and its calls are exactly that
    run's result: the smaller budgets of a table cost nothing extra."""
    bad = [m for m in snapshot_at if not 1 <= m < max_edits]
    if bad:
        raise DnadiffError(f"greedy snapshots {bad}: each must be at least 1 and below max_edits = {max_edits}")
    x0 = x0.long()
    B, L = x0.shape
    editable = torch.ones_like(x0, dtype=torch.bool) if editable is None else editable.bool()
    calls = [0]
    cur = x0.clone()
    r_cur = score(reward, cur, calls)
    before = r_cur.clone()
    calls[0] = 0  # the starting scores are reported, not part of the method's cost
    bases = BASES.to(x0.device)
    rounds = 0
    active = torch.ones(B, dtype=torch.bool)
    snapshots: dict[int, EditOutcome] = {}

    def snapshot(m: int) -> None:
        snapshots[m] = EditOutcome(cur.clone(), before, r_cur.clone(), calls[0], 0, rounds)

    for _ in range(max_edits):
        rows, muts = [], []
        for b in torch.nonzero(active).flatten().tolist():
            pos = torch.nonzero(editable[b]).flatten()
            cand = cur[b].expand(len(pos) * 4, L).clone()  # (4P, L): every base at every editable position
            p_rep = pos.repeat_interleave(4)
            cand[torch.arange(len(p_rep)), p_rep] = bases.repeat(len(pos))
            changed = cand[torch.arange(len(p_rep)), p_rep] != cur[b, p_rep]
            within = (cand != x0[b]).sum(dim=1) <= max_edits
            keep = changed & within
            rows += [b] * int(keep.sum())
            muts.append(cand[keep])
        if not rows:
            break
        rounds += 1
        mut = torch.cat(muts)  # (N, L)
        r = score(reward, mut, calls)
        owner = torch.tensor(rows)
        for b in torch.unique(owner).tolist():
            idx = torch.nonzero(owner == b).flatten()
            best = idx[int(torch.argmax(r[idx]))]
            if r[best] > r_cur[b]:
                cur[b], r_cur[b] = mut[best], r[best]
            else:
                active[b] = False  # no single mutant helps: a local optimum
        if rounds in snapshot_at:
            snapshot(rounds)
        if on_round is not None:
            on_round(rounds)
        if not bool(active.any()):
            break
    for m in snapshot_at:  # stopped early (a local optimum everywhere): the larger budgets end where it stopped
        if m not in snapshots:
            snapshot(m)
    return EditOutcome(cur, before, r_cur, calls[0], 0, rounds, snapshots)


# ----------------------------------------------------------------------------- proposers


class DiffusionProposer:
    """Resamples masked positions of templates from a masked diffusion model (class label, CFG), counting the rows
    its network sees; `confidence` = -log p(x_i | the rest), each position read once with a random 1/groups of the
    positions masked (groups calls)."""

    def __init__(self, model, label: int | str | None = None, guidance: float = 0.0, sampler: str = "first_hitting",
                 steps: int | None = None, groups: int = 8):
        self.model, self.label, self.guidance = model, label, float(guidance)
        self.sampler = model.build_sampler(sampler, steps)
        self.groups = int(groups)
        self.network_calls = 0

    def _count(self, module, inputs, output):
        self.network_calls += int(inputs[0].shape[0])

    def propose(self, template: Tensor, generator: torch.Generator) -> Tensor:
        hook = self.model.backbone.register_forward_hook(self._count)
        try:
            return self.model.generate(template.shape[0], template.shape[1], sampler=self.sampler, template=template,
                                       generator=generator, label=self.label, guidance=self.guidance)
        finally:
            hook.remove()

    @torch.no_grad()
    def confidence(self, x: Tensor, generator: torch.Generator) -> Tensor:
        from dnadiff.diffusion.subs import subs_masked_nll

        mask_id = self.model.tokenizer.mask_id
        denoiser = self.model.conditional_denoiser(self.label, self.guidance)
        group = torch.randint(self.groups, (x.shape[1],), generator=generator).to(x.device)
        out = torch.zeros(x.shape, dtype=torch.float64, device=x.device)
        hook = self.model.backbone.register_forward_hook(self._count)
        try:
            for g in range(self.groups):
                cols = group == g
                if not bool(cols.any()):
                    continue
                x_t = torch.where(cols[None, :], torch.full_like(x, mask_id), x)
                t = torch.full((x.shape[0],), float(cols.float().mean()), device=x.device)
                nll = subs_masked_nll(denoiser(x_t, t), x, mask_id).double()  # (B, L)
                out = torch.where(cols[None, :], nll, out)
        finally:
            hook.remove()
        return out


class MarkovProposer:
    """Resamples masked positions from a Markov chain's exact posterior; `confidence` = the chain's exact
    -log p(x_i | every other base). No network calls."""

    network_calls = 0

    def __init__(self, chain):
        from dnadiff.eval.markov_infill import chain_tables

        self.tables = chain_tables(chain)

    def propose(self, template: Tensor, generator: torch.Generator) -> Tensor:
        from dnadiff.backbones.markov import base_codes
        from dnadiff.eval.markov_infill import sample_hidden

        rng = np.random.default_rng(int(torch.randint(2**62, (1,), generator=generator)))
        ids = template.cpu().numpy()
        hidden = ids == TOK.mask_id
        codes = base_codes(ids)
        out = ids.copy()
        base_ids = np.array(TOK.nucleotide_ids)
        for b in range(ids.shape[0]):
            filled = sample_hidden(self.tables, codes[b], hidden[b], rng, num=1)[0]
            out[b, hidden[b]] = base_ids[filled[hidden[b]]]
        return torch.as_tensor(out, device=template.device)

    def confidence(self, x: Tensor, generator: torch.Generator) -> Tensor:
        from dnadiff.backbones.markov import base_codes
        from dnadiff.eval.markov_infill import conditional_nll

        codes = base_codes(x.cpu().numpy())
        out = np.zeros(codes.shape)
        for b in range(codes.shape[0]):
            for i in np.flatnonzero(codes[b] >= 0):
                one = np.zeros(codes.shape[1], dtype=bool)
                one[i] = True
                out[b, i] = conditional_nll(self.tables, codes[b], one)
        return torch.as_tensor(out, device=x.device)


# ----------------------------------------------------------------------------- remask-and-resample


def saliency(reward, x: Tensor, counter: list[int]) -> Tensor:
    """Float64[B, L]: max_b ∂r/∂onehot[i, b] - ∂r/∂onehot[i, x_i] over the bases b (first-order gain)."""
    declared = reward_capabilities(reward)
    if not declared.soft:
        raise DnadiffError(f"positions 'saliency' needs a differentiable reward (gc, gc:T, motif, classifier), not "
                           f"{declared.name or 'this one'}: use positions confidence or random")
    onehot = torch.nn.functional.one_hot(x, TOK.vocab_size).double().requires_grad_(True)
    with torch.enable_grad():
        reward.soft(onehot).sum().backward()
    counter[0] += int(x.shape[0])
    g = onehot.grad  # (B, L, V)
    here = g.gather(-1, x.unsqueeze(-1)).squeeze(-1)
    return g[..., BASES.to(x.device)].max(dim=-1).values - here


class RemaskEditor:
    """Remask-and-resample rounds (module docstring) around a proposer (DiffusionProposer or MarkovProposer)."""

    def __init__(self, proposer, rounds: int = 8, candidates: int = 4, positions: str = "saliency"):
        if positions not in POSITION_SCORES:
            raise DnadiffError(f"positions must be one of {', '.join(POSITION_SCORES)}, got {positions!r}")
        if rounds < 1 or candidates < 1:
            raise DnadiffError(f"rounds and candidates must be >= 1, got {rounds} and {candidates}")
        self.proposer, self.rounds, self.candidates, self.positions = proposer, int(rounds), int(candidates), positions

    def position_scores(self, reward, x: Tensor, counter: list[int], gen: torch.Generator) -> Tensor:
        if self.positions == "saliency":
            return saliency(reward, x, counter)
        if self.positions == "confidence":
            return self.proposer.confidence(x, gen)
        return torch.rand(x.shape, generator=gen, dtype=torch.float64).to(x.device)

    def choose(self, scores: Tensor, edited: Tensor, editable: Tensor, max_edits: int, gen: torch.Generator) -> Tensor:
        """Bool[B, L]: P = the current edits plus new positions drawn among the highest-scored ones."""
        P = edited.clone()
        for b in range(scores.shape[0]):
            n_new = max(max_edits - int(edited[b].sum()), math.ceil(max_edits / 4))
            pool = torch.nonzero(editable[b] & ~edited[b]).flatten()
            if len(pool) == 0:
                continue
            top = pool[scores[b, pool].argsort(descending=True)[: 3 * n_new]]
            pick = top[torch.randperm(len(top), generator=gen)[:n_new].to(top.device)]
            P[b, pick] = True
        return P

    @torch.no_grad()
    def edit(self, x0: Tensor, reward: Callable, max_edits: int, editable: Tensor | None = None, seed: int = 0,
             on_round: Callable[[int], None] | None = None) -> EditOutcome:
        x0 = x0.long()
        B, L = x0.shape
        editable = torch.ones_like(x0, dtype=torch.bool) if editable is None else editable.bool().to(x0.device)
        gen = torch.Generator().manual_seed(int(seed))
        calls = [0]
        cur = x0.clone()
        r_cur = score(reward, cur, calls)
        before = r_cur.clone()
        calls[0] = 0
        start_net = self.proposer.network_calls
        C = self.candidates
        for rnd in range(self.rounds):
            P = self.choose(self.position_scores(reward, cur, calls, gen), cur != x0, editable, max_edits, gen)
            template = torch.where(P, torch.full_like(cur, TOK.mask_id), cur).repeat_interleave(C, dim=0)
            cand = self.proposer.propose(template, gen).to(x0.device)  # (B*C, L)
            ok = (cand != x0.repeat_interleave(C, dim=0)).sum(dim=1) <= max_edits  # the budget, before the reward
            r = torch.full((B * C,), -math.inf, dtype=torch.float64, device=x0.device)
            if bool(ok.any()):
                r[ok] = score(reward, cand[ok], calls)
            best = r.view(B, C).argmax(dim=1)  # (B,)
            r_best = r.view(B, C)[torch.arange(B), best]
            better = r_best > r_cur
            pick = cand.view(B, C, L)[torch.arange(B), best]
            cur = torch.where(better[:, None], pick, cur)
            r_cur = torch.where(better, r_best, r_cur)
            if on_round is not None:
                on_round(rnd + 1)
        return EditOutcome(cur, before, r_cur, calls[0], self.proposer.network_calls - start_net, self.rounds)


__all__ = ["DiffusionProposer", "EditOutcome", "MarkovProposer", "POSITION_SCORES", "RemaskEditor", "apply_edits",
           "edit_list", "format_edits", "greedy_edit", "saliency", "score"]
