"""The optional CUDA kernels of mamba_ssm and causal_conv1d: finding them, and when the Mamba mixer uses them.

The kernels (the `cuda` extra) and what they are called with (their documented signatures):

    causal_conv1d.causal_conv1d_fn(x, weight, bias, activation="silu")      x (B, E, L), weight (E, W)
    causal_conv1d.causal_conv1d_update(x, conv_state, weight, bias, "silu") x (B, E), conv_state (B, E, W)
    mamba_ssm.ops.selective_scan_interface.selective_scan_fn(u, delta, A, B, C, D, z, delta_bias,
        delta_softplus)                                                     u, delta, z (B, E, L); B, C (B, N, L)
    mamba_ssm.ops.triton.selective_state_update.selective_state_update(state, x, dt, A, B, C, D, z=,
        dt_bias=, dt_softplus=)                                             state (B, E, N); x, dt, z (B, E)

`conv_impl` (auto | torch | cuda) picks the convolution kernels, `scan_impl` (auto | cuda | the pure
scans of scan.py) the two scan kernels. "cuda" always calls the kernel (on any tensor: the tests run it on
CPU tensors with stand-in modules) and is an error when the kernel is missing or cannot take the input.
"auto" calls it on CUDA tensors, and falls back to the pure PyTorch op in exactly these cases:

  1. the package is not installed (the top-level module is not found): silently, the normal CPU install;
  2. the package is installed but does not import (e.g. its compiled extension is missing or was built
     for another torch or CUDA), or mamba_ssm imports without its `selective_scan_cuda` extension;
  3. the input is one the kernel does not take: float64 tensors (the kernels take float32, float16 and
     bfloat16), a convolution width outside 2..4, a state size above 256 (selective_scan_fn).

Cases 2 and 3 are logged once per process (a warning on the "dnadiff" logger). An error raised by a
kernel while it runs is never caught. tests/test_cuda_dispatch.py checks each case with stand-in modules.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.logs import log

__all__ = ["KERNEL_DTYPES", "conv_kernel", "conv_update_kernel", "import_problem", "kernel_available", "reset_kernels",
           "scan_kernel", "scan_length_major", "state_update_kernel", "wants_kernel"]

# where each kernel lives: (package, module, attribute)
_WHERE = {
    "causal_conv1d_fn": ("causal_conv1d", "causal_conv1d", "causal_conv1d_fn"),
    "causal_conv1d_update": ("causal_conv1d", "causal_conv1d", "causal_conv1d_update"),
    "selective_scan_fn": ("mamba_ssm", "mamba_ssm.ops.selective_scan_interface", "selective_scan_fn"),
    "selective_state_update": ("mamba_ssm", "mamba_ssm.ops.triton.selective_state_update", "selective_state_update"),
}
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_MAX_SCAN_STATE = 256  # selective_scan_fn: "selective_scan only supports state dimension <= 256"

_found: dict[str, Callable | None] = {}
_import_error: dict[str, str] = {}
_said: set[str] = set()


def reset_kernels() -> None:
    """Forget what was imported and which warnings were given (tests that install stand-in modules)."""
    _found.clear()
    _import_error.clear()
    _said.clear()


def _say_once(key: str, message: str) -> None:
    if key not in _said:
        _said.add(key)

        log.warning(message)


def _load(name: str) -> Callable | None:
    """The kernel function, or None (the reason, when the package is installed, in _import_error)."""
    if name in _found:
        return _found[name]
    package, module_name, attr = _WHERE[name]
    fn = None
    try:
        module = importlib.import_module(module_name)
        fn = getattr(module, attr)
        if name == "selective_scan_fn" and getattr(module, "selective_scan_cuda", True) is None:
            # mamba_ssm >= 2.3 imports without its extension and fails at the first call
            fn, _import_error[name] = None, "mamba_ssm is installed without its selective_scan_cuda extension"
    except ModuleNotFoundError as exc:  # the package itself absent: case 1; anything it needs absent: case 2
        if exc.name != package:
            _import_error[name] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001  (an installed package that fails to import, case 2: reported)
        _import_error[name] = f"{type(exc).__name__}: {exc}"
    _found[name] = fn
    return fn


def kernel_available(name: str) -> bool:
    """True when the kernel imports (not whether a GPU is there)."""
    return _load(name) is not None


def import_problem(name: str) -> str | None:
    """Why an installed package does not give the kernel (None when it does, or is not installed)."""
    _load(name)
    return _import_error.get(name)


def is_cuda(t: Tensor) -> bool:  # (a hook: tests make "auto" treat CPU tensors as CUDA ones)
    return t.is_cuda


def wants_kernel(impl: str, name: str, t: Tensor) -> bool:
    """Whether `impl` asks for the kernel `name` on this tensor: "cuda", or "auto" on a CUDA tensor with
    the kernel importable (a broken install is reported once). "cuda" with the kernel missing raises."""
    if impl == "cuda":
        if _load(name) is None:
            package = _WHERE[name][0]
            why = _import_error.get(name, f"{package} is not installed (pip install 'dnadiff[cuda]')")
            raise DnadiffError(f"{_field(name)}=cuda needs {package}'s {name}: {why}")
        return True
    if impl != "auto" or not is_cuda(t):
        return False
    if _load(name) is None:
        if name in _import_error:
            _say_once("import:" + name, f"{_WHERE[name][0]} is installed but unusable, so the pure PyTorch "
                                        f"{_what(name)} runs instead ({_import_error[name]})")
        return False
    return True


def _field(name: str) -> str:
    return "conv_impl" if name.startswith("causal_conv1d") else "scan_impl"


def _what(name: str) -> str:
    return "convolution" if name.startswith("causal_conv1d") else "selective scan"


def _unsupported(name: str, t: Tensor, width: int | None = None, d_state: int | None = None) -> str | None:
    if t.dtype not in KERNEL_DTYPES:
        return f"{t.dtype} inputs (it takes float32, float16 and bfloat16)"
    if width is not None and not 2 <= width <= 4:
        return f"convolution width d_conv={width} (it takes 2 to 4)"
    if d_state is not None and name == "selective_scan_fn" and d_state > _MAX_SCAN_STATE:
        return f"d_state={d_state} (it takes at most {_MAX_SCAN_STATE})"
    return None


def _pick(name: str, impl: str, t: Tensor, width: int | None = None, d_state: int | None = None) -> Callable | None:
    if not wants_kernel(impl, name, t):
        return None
    why = _unsupported(name, t, width, d_state)
    if why is None:
        return _found[name]
    if impl == "cuda":
        raise DnadiffError(f"{_field(name)}=cuda: {name} does not take {why}")
    _say_once(f"input:{name}:{why}", f"{name} does not take {why}: the pure PyTorch {_what(name)} runs instead")
    return None


def conv_kernel(impl: str, x: Tensor, width: int) -> Callable | None:
    """causal_conv1d_fn for x (B, E, L), or None: use the PyTorch convolution."""
    return _pick("causal_conv1d_fn", impl, x, width=width)


def conv_update_kernel(impl: str, x: Tensor, width: int) -> Callable | None:
    """causal_conv1d_update for one decoding step x (B, E), or None."""
    return _pick("causal_conv1d_update", impl, x, width=width)


def scan_kernel(impl: str, u: Tensor, d_state: int) -> Callable | None:
    """selective_scan_fn for u (B, E, L), or None: use the pure scan of scan.py."""
    return _pick("selective_scan_fn", impl, u, d_state=d_state)


def state_update_kernel(impl: str, x: Tensor, d_state: int) -> Callable | None:
    """selective_state_update for one decoding step x (B, E), or None."""
    return _pick("selective_state_update", impl, x, d_state=d_state)


def scan_length_major(fn: Callable, u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                      return_last_state=False):
    """selective_scan_fn on the length-major layout of scan.py (u, delta, z (B, L, E); B, C (B, L, N)).

    The kernel wants unit stride along L, so this entry copies u, delta, B, C and z into (B, E, L) /
    (B, N, L) (in u's dtype) and returns a transposed view of its output. The Mamba mixer does not come through here: it
    builds the kernel's layout directly (mamba.py, `Mamba._forward_kernels`)."""
    def bel(t):  # the kernel takes u, delta, B, C and z in one dtype
        return t.transpose(1, 2).to(u.dtype).contiguous()

    out = fn(bel(u), bel(delta), A.float().contiguous(), bel(B), bel(C), None if D is None else D.float().contiguous(),
             None if z is None else bel(z), None if delta_bias is None else delta_bias.float().contiguous(),
             delta_softplus, return_last_state)
    if return_last_state:
        return out[0].transpose(1, 2), out[1]
    return out.transpose(1, 2)
