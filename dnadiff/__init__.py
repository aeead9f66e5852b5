"""dnadiff: masked diffusion language models (MDLM, arXiv 2406.07524) for DNA and text."""

from dnadiff.errors import DnadiffError
from dnadiff.version import __version__

__all__ = ["DnadiffError", "__version__", "load", "sample"]


def load(path, **kwargs):
    """Load a dnadiff model directory, an official Caduceus/HyenaDNA/MDLM HF directory, or a Hub id
    "org/name" from the local Hugging Face cache (`local_files_only=False` downloads it)."""
    from dnadiff.checkpoint import load as _load

    return _load(path, **kwargs)


def sample(model, num: int, length: int, **kwargs):
    """`num` sequences of `length` tokens from a loaded model, in batches, one random stream per sequence:
    a SampleResult (`.x` Long[num, length], `.stats()`); see dnadiff/sampling.py for the options."""
    from dnadiff.sampling import sample as _sample

    return _sample(model, num, length, **kwargs)
