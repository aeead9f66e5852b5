"""Samplers for masked diffusion models: one class per file, one API (docs/architecture.md).

    from dnadiff.samplers import build_sampler
    sampler = build_sampler("ancestral", steps=128)
    x = sampler.generate(denoiser, schedule, mask_id, (B, L), template=None, generator=g)
    sampler.last_nfe, sampler.last_nfe_per_row   # batched calls; calls per sequence (Long[B])

Names: `SAMPLERS.names()`, one file each (ancestral, cached, analytic, first_hitting, ordered, semi_ar,
confidence, remdm, autoregressive; udlm for uniform-noise models; plaid and ssdlm for the
continuous-noise models of those objectives; block for block-diffusion (bd3lm) models; see each file for its options and
declarations, base.py for the shared ones and the step contract: `init_state`, `model_time`, pure `step`, one loop in
`Sampler.run`). `cache=True` (the default of `cached`)
makes any masked-diffusion sampler evaluate only the sequences whose tokens changed, for a
denoiser that ignores t (output_cache.py): the same samples with fewer denoiser rows.
`generator` may be a torch.Generator (one
stream for the batch) or an int seed / `SeedStream` (per-sequence counter-based draws: samples do
not depend on the batch size). Denoiser wrappers: `rc_symmetric(denoiser,
complement_ids, mask_id)` (strand-averaged predictions) and `guided(cond, uncond, scale, mask_id)`
(classifier-free guidance). Templates (prefix/suffix prompts, infilling): `build_template`.
"""

# registration by import: each module below registers its sampler in SAMPLERS (a new sampler is one
# file and one line here; tests/test_import_graph.py fails on a registering module missing here)
from dnadiff.samplers import (  # noqa: F401
    analytic,
    ancestral,
    autoregressive,
    block,
    cached,
    confidence,
    first_hitting,
    ordered,
    plaid,
    remdm,
    semi_ar,
    ssdlm,
    uniform,
)
from dnadiff.samplers.base import (
    SAMPLERS,
    Sampler,
    SamplerState,
    SeedStream,
    build_sampler,
    draw_categorical,
    shape_probs,
)
from dnadiff.samplers.templates import build_template
from dnadiff.samplers.wrappers import guided, rc_symmetric

__all__ = ["SAMPLERS", "Sampler", "SamplerState", "SeedStream", "build_sampler", "build_template", "draw_categorical",
           "shape_probs", "guided", "rc_symmetric"]
