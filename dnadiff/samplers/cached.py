"""`cached`: ancestral sampling that evaluates only the sequences that changed (MDLM §4.1, "caching").

With a time-independent denoiser under SUBS, p_θ(x0 | x_t) depends only on x_t: a sequence whose
tokens did not change since its last evaluation would get the same output again, so the loop
(base.py, `Sampler.evaluate`; output_cache.py) sends the denoiser only the sequences that changed
and reuses the others' outputs. The reference skips a call only when no sequence of the batch
changed; per row, a batch of 16 at L = T = 1024 makes 63.2% of ancestral's row evaluations
(mean of 10 seeds, 63.1-63.6%; results/sampling_cache_table.md), where the whole-batch rule saves
nothing (every step changes some sequence). It is the `ancestral` sampler with `cache=True` (every masked-diffusion
sampler takes that option).

NFE per sequence (`last_nfe_per_row`): one evaluation at the start, then one after each step that
changed the sequence and left it a masked position, when the output is used again (a further step,
or noise removal of its leftover masks). A sequence whose last change unmasks its last token makes
no call after it: c changed steps, fully unmasked by the loop, cost c evaluations (not c + 1); a
sequence with nothing to sample (a full template) costs none. `last_nfe` counts the batched calls:
steps at which some sequence needed a fresh output.

Time-conditioned denoisers disable the cache (then it is plain ancestral sampling): pass
`time_conditioned=False` for a model that ignores t, or give the denoiser a `time_conditioned`
attribute. Same seed, same samples as `ancestral`.
"""

from __future__ import annotations

from dnadiff.samplers.ancestral import AncestralSampler
from dnadiff.samplers.base import SAMPLERS


@SAMPLERS.register("cached")
class CachedSampler(AncestralSampler):
    """`build_sampler("cached", steps=1000, time_conditioned=False)`."""

    name = "cached"
    cache = True
