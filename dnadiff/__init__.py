"""dnadiff: masked diffusion language models (MDLM, arXiv 2406.07524) for DNA and text."""

from dnadiff.errors import DnadiffError

__version__ = "0.1.0"
__all__ = ["DnadiffError", "__version__", "load"]


def load(path, **kwargs):
    """Load a dnadiff model directory (or an official Caduceus/HyenaDNA HF directory)."""
    from dnadiff.checkpoint import load as _load

    return _load(path, **kwargs)
