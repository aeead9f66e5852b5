"""The shared sampler machinery: one loop (`Sampler.run`), the step contract, templates, NFE counting,
per-row output caching, the shared options. The contract, the state, the randomness and every
option are described in docs/architecture.md ("The sampler contract").

    x = sampler.generate(denoiser, schedule, mask_id, shape, template=None, generator=None)
    denoiser(x_t: Long[B, L], t: Float[B]) -> raw logits Float[B, L, V]   # SUBS (MDLM §3.2.3) applied here
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
from torch import Tensor

from dnadiff.denoiser import CountingDenoiser, Denoiser, as_denoiser
from dnadiff.diffusion.subs import NEG_INF, subs_log_probs
from dnadiff.errors import DnadiffError
from dnadiff.logs import progress_bar
from dnadiff.registry import Registry
from dnadiff.samplers.output_cache import OutputCache
from dnadiff.samplers.rng import (  # noqa: F401  (re-exported: the samplers' draws)
    RandomStream,
    SeedStream,
    SharedStream,
    StepRandom,
    draw_categorical,
    make_stream,
    splitmix64,
)

SAMPLERS = Registry("sampler")  # filled by the imports of dnadiff/samplers/__init__.py


def build_sampler(name: str = "ancestral", **options) -> "Sampler":
    """`build_sampler("ancestral", steps=128, temperature=1.0, top_p=1.0, ...)`."""
    return SAMPLERS.build(name, **options)


def carry_over(q: Tensor, x: Tensor, mask_id: int) -> Tensor:
    """Transition rows q [B, L, V] with unmasked positions of x [B, L] kept as point masses (SUBS
    carry-over: a revealed token never changes)."""
    onehot = torch.zeros_like(q).scatter_(-1, x.unsqueeze(-1), 1.0)
    return torch.where((x != mask_id).unsqueeze(-1), onehot, q)


def shape_probs(log_probs: Tensor, temperature: float = 1.0, top_p: float = 1.0) -> Tensor:
    """Temperature then nucleus filtering of log p [..., V] -> normalised float64 probabilities.

    Nucleus as the ReMDM code (`diffusion.py`, `nucleus_p`): keep sorted tokens with cumulative
    probability <= top_p, and the most likely one always."""
    lp = log_probs.double()
    if temperature != 1.0:
        lp = lp / temperature
    probs = (lp - lp.logsumexp(dim=-1, keepdim=True)).exp()  # (..., V)
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep_sorted = sorted_p.cumsum(dim=-1) <= top_p  # inclusive cumulative mass
        keep_sorted[..., 0] = True  # the top token always stays
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = torch.where(keep, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


# ---- the state and the loop ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SamplerState:
    """Everything the next step needs. Steps return a new state (`dataclasses.replace`).

    x       Long[B, L]       current tokens x_t (mask_id where still masked)
    fixed   Bool[B, L]       template positions, never changed
    mask_id int
    step    int              steps taken so far (index into the sampler's time grid)
    t       Float64[B]       time of x (1 at the start; first_hitting: per sequence)
    s       Float64[B]|None  time the next step moves to (grid samplers), None when not fixed
    nfe     Long[B]|None     denoiser calls each row took part in so far (set by `evaluate`)
    cache   OutputCache|None per-row denoiser outputs and the tokens they hold for (`cache` option)
    done    bool             the loop stops when True
    grid    Float64[N+1]|None    the time grid t_0 = 1 > ... > t_N = eps (grid samplers; shared)
    alphas  Float64[N+1]|None    α on the grid, float64 (shared)
    schedule                 the noise schedule
    extra   dict             sampler-specific fields: per-sequence tensors (leading dim B, e.g.
                             ReMDM-conf's confidences), scalars/counters, decoding caches
    """

    x: Tensor
    fixed: Tensor
    mask_id: int
    step: int = 0
    t: Tensor | None = None
    s: Tensor | None = None
    nfe: Tensor | None = None
    cache: OutputCache | None = None
    done: bool = False
    grid: Tensor | None = None
    alphas: Tensor | None = None
    schedule: Any = None
    extra: dict = dataclasses.field(default_factory=dict)

    def replace(self, **changes: Any) -> "SamplerState":
        return dataclasses.replace(self, **changes)

    @property
    def masked(self) -> Tensor:
        return self.x == self.mask_id

    def select(self, rows: Tensor) -> "SamplerState":
        """The state of sequences `rows` (Long[B']; repeats allowed): SMC-style resampling of
        particles. Per-sequence tensors (x, fixed, t, s, nfe, the output cache and tensors in
        `extra`) are indexed; the shared grid, α and schedule are kept. Decoding caches in
        `extra` are not tensors: samplers that hold one (AR) cannot be resampled this way."""
        def pick(v):
            return v[rows] if isinstance(v, Tensor) and v.dim() > 0 else v

        return self.replace(x=self.x[rows], fixed=self.fixed[rows], t=pick(self.t), s=pick(self.s),
                            nfe=pick(self.nfe), cache=None if self.cache is None else self.cache.select(rows),
                            extra={k: pick(v) for k, v in self.extra.items()})


class Sampler:
    """Base class and the one loop. Subclasses implement `init_state` (optional), `model_time`
    and `step` (see the module docstring for the contract); `max_steps` sizes the progress bar."""

    name = "base"
    cache = False  # the default of the `cache` option (the `cached` sampler: True)
    # what callers may rely on (DiffusionModel.build_sampler, the sample and design commands)
    has_steps = True  # a step count applies (first_hitting: one call per token, autoregressive)
    has_time = True  # it walks diffusion time down to `eps` (autoregressive: no)
    autoregressive = False  # left-to-right decoding: the sampler of AR models, and only of them
    guidable = True  # guidance methods can wrap it (one window stepped by `step`)
    any_length = False  # it may generate beyond the backbone's maximum length (semi_ar's windows)
    posterior_cfg = False  # classifier-free guidance at the posterior (`with_cfg`: udlm's D-CFG), not on the logits
    noise = "mask"  # the objective noise it samples (Objective.noise): "mask", or "uniform" (samplers/uniform.py)
    model_options: tuple[str, ...] = ()  # options the model sets (`defaults_from`), not the user

    @classmethod
    def defaults_from(cls, model) -> dict[str, Any]:
        """Options this sampler takes from a DiffusionModel: the smallest time is the training
        t_min (a model is never queried at times it never saw)."""
        return {"eps": model.sampling_eps}

    def __init__(
        self,
        steps: int = 128,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        eps: float = 1e-5,
        noise_removal: bool | str = True,
        float32_draws: bool = False,
        time_conditioned: bool | None = None,
        cache: bool | None = None,
        batch_size: int | None = None,
        progress: bool = False,
    ):
        if int(steps) < 1:
            raise DnadiffError(f"sampler {self.name!r}: steps must be >= 1, got {steps}")
        if not temperature > 0:
            raise DnadiffError(f"sampler {self.name!r}: temperature must be > 0, got {temperature}")
        if not 0.0 < top_p <= 1.0:
            raise DnadiffError(f"sampler {self.name!r}: top_p must be in (0, 1], got {top_p}")
        if not 0.0 < eps < 1.0:
            raise DnadiffError(f"sampler {self.name!r}: eps must be in (0, 1), got {eps}")
        if noise_removal is True:
            noise_removal = "argmax"
        elif noise_removal is False or noise_removal is None:
            noise_removal = "none"
        if noise_removal not in ("argmax", "sample", "none"):
            raise DnadiffError(f"sampler {self.name!r}: noise_removal must be argmax|sample|none, "
                               f"got {noise_removal!r}")
        if batch_size is not None and int(batch_size) < 1:
            raise DnadiffError(f"sampler {self.name!r}: batch_size must be >= 1, got {batch_size}")
        self.steps = int(steps)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.eps = float(eps)
        self.noise_removal = noise_removal
        self.float32_draws = bool(float32_draws)
        self.time_conditioned = time_conditioned
        self.cache = type(self).cache if cache is None else bool(cache)
        self.batch_size = None if batch_size is None else int(batch_size)
        self.progress = bool(progress)
        self.guidance: list[Callable[[SamplerState, Tensor], Tensor]] = []
        self.last_nfe = 0
        self.last_nfe_per_row = torch.zeros(0, dtype=torch.long)
        self.last_rows = 0
        self.last_steps = 0

    # ---- public API -------------------------------------------------------------------------
    def add_guidance(self, hook: Callable[[SamplerState, Tensor], Tensor]) -> "Sampler":
        """Register `hook(state, logits) -> logits`, applied to every denoiser output in the loop
        (before SUBS and the step): classifier guidance, constraints, reweighting. Returns self."""
        self.guidance.append(hook)
        return self

    def remove_guidance(self, hook: Callable[[SamplerState, Tensor], Tensor]) -> "Sampler":
        """Unregister a hook given to `add_guidance` (a guidance method's hook, after its run). Returns self."""
        self.guidance.remove(hook)
        return self

    @torch.no_grad()
    def generate(
        self,
        denoiser: Denoiser,
        schedule,
        mask_id: int,
        shape: tuple[int, int],
        template: Tensor | None = None,
        generator: torch.Generator | int | SeedStream | None = None,
    ) -> Tensor:
        """Long[B, L] samples; `self.last_nfe` holds the denoiser calls made, `last_nfe_per_row`
        (Long[B]) the calls each sequence took part in, `last_rows` their sum (rows pushed through
        the network), `self.last_steps` the loop steps taken (max over chunks)."""
        B, L = int(shape[0]), int(shape[1])
        if B < 1 or L < 1:
            raise DnadiffError(f"sampler {self.name!r}: shape must be positive, got {tuple(shape)}")
        device = _device_of(denoiser, template, generator)
        x = self.initial_state(mask_id, (B, L), template, device)
        stream = make_stream(generator, B, device, self.float32_draws)
        # one counter per run: the caller's (dnadiff.sample passes its CountingDenoiser, whose on_call drives the
        # progress), else one of its own; this call's NFE are what it adds
        counting = denoiser if isinstance(denoiser, CountingDenoiser) else CountingDenoiser(denoiser)
        calls_before, rows_before = counting.calls, counting.rows
        chunk = self.batch_size or B
        outs, nfe, steps = [], [], 0
        for i in range(0, B, chunk):
            part = x[i : i + chunk]
            state = self.run(counting, schedule, int(mask_id), part, stream.rows(i, i + part.shape[0]))
            outs.append(state.x)
            nfe.append(state.nfe if state.nfe is not None else torch.zeros(part.shape[0], dtype=torch.long))
            steps = max(steps, state.step)
        self.last_nfe = counting.calls - calls_before
        self.last_nfe_per_row = torch.cat([n.cpu() for n in nfe])
        self.last_rows = counting.rows - rows_before
        self.last_steps = steps
        return torch.cat(outs, dim=0)

    def initial_state(self, mask_id: int, shape: tuple[int, int], template: Tensor | None, device) -> Tensor:
        B, L = shape
        if template is None:
            return torch.full((B, L), int(mask_id), dtype=torch.long, device=device)
        template = torch.as_tensor(template, device=device).long()
        if template.dim() == 1:
            template = template.unsqueeze(0).expand(B, -1)
        if tuple(template.shape) != (B, L):
            raise DnadiffError(f"sampler {self.name!r}: template shape {tuple(template.shape)} does not match {(B, L)}")
        return template.clone()

    # ---- the loop -----------------------------------------------------------------------------
    def run(self, denoiser: Denoiser, schedule, mask_id: int, x: Tensor, rng: RandomStream) -> SamplerState:
        """The one loop: init, (model call, step) until done, finish. Returns the final state."""
        state = self.init_state(denoiser, schedule, mask_id, x)
        bar = None
        if self.progress:
            bar = progress_bar(total=self.max_steps(state), desc=f"sampling ({self.name})", unit="step", leave=False)
        while not state.done:
            t = self.model_time(state)
            logits = None
            if t is not None:
                logits, state = self.evaluate(denoiser, state, t)
            state = self.step(state, logits, rng.at(state.step))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        return self.finish(denoiser, state, rng.at(state.step))

    def uses_cache(self, denoiser) -> bool:
        """Whether `evaluate` reuses outputs: the `cache` option, for a denoiser that ignores t."""
        return self.cache and not self.is_time_conditioned(denoiser)

    def evaluate(self, denoiser: Denoiser, state: SamplerState, t: Tensor,
                 need: Tensor | None = None) -> tuple[Tensor, SamplerState]:
        """The loop's model call: (logits Float[B, L, V] for every row of state.x, the state with
        its per-row NFE and output cache updated).

        Rows evaluated: all of them, or with the output cache on only the stale ones (tokens
        changed since their cached output) that still hold a masked position: under SUBS a row
        with none has p_θ(x0 | x_t) = the point mass on its tokens whatever the network says
        (MDLM §3.2.3, carry-over), and no sampler reads its logits. `need` (Bool[B], optional)
        limits them to the rows whose output will be used (noise removal: rows still masked).
        The other rows get their cached output, or a zero placeholder when they have none (a row
        that is not needed). No call is made when no row is left."""
        B = state.x.shape[0]
        nfe = state.nfe if state.nfe is not None else torch.zeros(B, dtype=torch.long, device=state.x.device)
        caching = self.uses_cache(denoiser)
        cache = state.cache if caching and state.cache is not None else OutputCache.empty(B, state.x.device)
        todo = cache.stale(state.x) & state.masked.any(dim=1) if caching else \
            torch.ones(B, dtype=torch.bool, device=state.x.device)
        if need is not None:
            todo = todo & need
        rows = todo.nonzero().squeeze(1)
        counter = denoiser if isinstance(denoiser, CountingDenoiser) else None  # None: a bare model (sdtt's teacher)
        calls_before = counter.calls if counter is not None else None
        if rows.numel() == B:
            logits = new = self.model_output(denoiser, state, t)
        elif rows.numel() > 0:
            t_rows = t[rows] if isinstance(t, Tensor) and t.dim() > 0 else t
            new = self.model_output(denoiser, state.replace(cache=None).select(rows), t_rows)
            logits = cache.merged(rows, new)
        else:
            new, logits = None, cache.merged(rows, None)
        if new is not None:  # each evaluated row took part in the calls just made (AR: maybe several)
            made = counter.calls - calls_before if counter is not None else 1
            nfe = nfe.index_add(0, rows, torch.full_like(rows, made))
        if caching and new is not None:
            cache = cache.store(state.x, rows, logits)
        return logits, state.replace(nfe=nfe, cache=cache if caching else None)

    def model_output(self, denoiser: Denoiser, state: SamplerState, t: Tensor) -> Tensor:
        """The (counted) denoiser call on state.x at times t, then the guidance hooks."""
        logits = self.denoise_call(denoiser, state.x, t)
        for hook in self.guidance:
            logits = hook(state, logits)
        return logits

    def finish(self, denoiser: Denoiser, state: SamplerState, rng: StepRandom) -> SamplerState:
        """Noise removal: a final pass at t = eps filling any position still masked (argmax, a
        draw, or nothing)."""
        masked = state.masked
        if self.noise_removal == "none" or not bool(masked.any()):
            return state
        t = torch.full((state.x.shape[0],), self.eps, dtype=torch.float64, device=state.x.device)
        logits, state = self.evaluate(denoiser, state, t, need=masked.any(dim=1))  # rows left unmasked: no call
        if self.noise_removal == "argmax":
            return state.replace(x=greedy_fill(logits, state.x, state.mask_id))
        fill = rng.categorical(self.x0_probs(logits, state.x, state.mask_id))
        return state.replace(x=torch.where(masked, fill, state.x))

    # ---- the step contract (subclasses) --------------------------------------------------------
    def init_state(self, denoiser: Denoiser, schedule, mask_id: int, x: Tensor) -> SamplerState:
        """Grid samplers: the time grid and its α (float64) in `extra`; done if nothing is masked."""
        ts = self.time_grid(x.device)
        alphas = schedule.alpha(ts).double()  # (steps + 1,) float64
        B = x.shape[0]
        return SamplerState(
            x=x, fixed=x != mask_id, mask_id=int(mask_id), step=0, t=ts[0].expand(B), s=ts[1].expand(B),
            done=not bool((x == mask_id).any()), grid=ts, alphas=alphas, schedule=schedule,
        )

    def model_time(self, state: SamplerState) -> Tensor | None:
        return state.t

    def step(self, state: SamplerState, logits: Tensor | None, rng: StepRandom) -> SamplerState:
        raise NotImplementedError

    def max_steps(self, state: SamplerState) -> int | None:
        return self.steps

    def progress_steps(self, length: int) -> int:
        """The steps a batch of `length` tokens shows on a progress bar (sampling.progress_steps_of): the step
        count, or one per token when no step count applies (first_hitting). A sampler that runs loops over
        parts of the sequence declares its own (semi_ar's windows, block's blocks, ssdlm's)."""
        return self.steps if self.has_steps else length

    # ---- helpers for subclasses ---------------------------------------------------------------
    def advance(self, state: SamplerState, x: Tensor, stop_when_unmasked: bool = True, **changes) -> SamplerState:
        """The next grid state after a step that produced x (time moves from t to s)."""
        i = state.step + 1
        grid = state.grid
        B = x.shape[0]
        done = i >= self.steps or (stop_when_unmasked and not bool((x == state.mask_id).any()))
        s = grid[i + 1].expand(B) if i < self.steps else None
        return state.replace(x=x, step=i, t=grid[i].expand(B), s=s, done=done, **changes)

    def is_time_conditioned(self, denoiser) -> bool:
        if self.time_conditioned is not None:
            return bool(self.time_conditioned)
        return bool(as_denoiser(denoiser).time_conditioned)  # a bare function: time-conditioned (denoiser.py)

    def time_grid(self, device) -> Tensor:
        """linspace(1, eps, steps + 1) in float64 (the reference's sampling grid, eps = 1e-5)."""
        return torch.linspace(1.0, self.eps, self.steps + 1, dtype=torch.float64, device=device)

    def x0_probs(self, logits: Tensor, x: Tensor, mask_id: int) -> Tensor:
        """p_θ(x0 | x_t) under SUBS with temperature / top-p: Float64[B, L, V]."""
        return shape_probs(subs_log_probs(logits, x, mask_id), self.temperature, self.top_p)

    def denoise_call(self, denoiser: Denoiser, x: Tensor, t: float | Tensor) -> Tensor:
        t = torch.as_tensor(t, dtype=torch.float32, device=x.device)
        if t.dim() == 0:
            t = t.expand(x.shape[0])
        return denoiser(x, t.float())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(steps={self.steps}, temperature={self.temperature}, top_p={self.top_p})"


def _device_of(denoiser, template, generator) -> torch.device:
    if template is not None and isinstance(template, Tensor):
        return template.device
    if isinstance(generator, torch.Generator):
        return torch.device(generator.device)
    params = getattr(denoiser, "parameters", None)
    if callable(params):
        try:
            return next(params()).device
        except StopIteration:
            pass
    return torch.device("cpu")


def greedy_fill(logits: Tensor, x: Tensor, mask_id: int) -> Tensor:
    """The predicted clean sequence x̂0(x_t): masked positions of x Long[B, L] filled by the argmax
    of p_θ(x0 | x_t) under SUBS (logits Float[B, L, V]); the argmax noise removal, and SVDD's
    posterior-mean value approximation (Li et al. 2024, arXiv 2408.08252, §4.2) scores r(x̂0)."""
    fill = subs_log_probs(logits, x, mask_id).argmax(dim=-1)
    return torch.where(x == mask_id, fill, x)


def log_of(probs: Tensor) -> Tensor:
    """log with NEG_INF instead of -inf (keeps SUBS-style finite logits)."""
    return torch.where(probs > 0, probs.clamp_min(1e-300).log(), torch.full_like(probs, NEG_INF))


class CompositeSampler(Sampler):
    """A sampler that runs another one's loop (`self.inner`) over parts of the sequence (semi_ar's windows,
    block's blocks) instead of defining a `step`: guidance hooks go to the inner sampler, which makes every
    network call."""

    guidable = False

    def add_guidance(self, hook: Callable[[SamplerState, Tensor], Tensor]) -> "Sampler":
        self.inner.add_guidance(hook)
        return self

    def remove_guidance(self, hook: Callable[[SamplerState, Tensor], Tensor]) -> "Sampler":
        self.inner.remove_guidance(hook)
        return self


__all__ = [
    "SAMPLERS",
    "CompositeSampler",
    "Sampler",
    "SamplerState",
    "SeedStream",
    "RandomStream",
    "StepRandom",
    "CountingDenoiser",
    "OutputCache",
    "carry_over",
    "draw_categorical",
    "greedy_fill",
    "make_stream",
    "shape_probs",
    "splitmix64",
    "log_of",
]
