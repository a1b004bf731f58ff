"""Which kernels run: the backend names of trnsparse 0.6, mapped onto the C++ core.

- "auto" and "cpu": the C++ kernels of the best instruction set this CPU has
  (AVX-512, AVX2 or portable); "auto" is the default.
- "reference": the C++ core's portable scalar kernels (every SIMD kernel is tested
  against them), for A/B comparisons.
- "nki" (Neuron kernels) and "pytorch" (0.6's pure-PyTorch implementation) are not
  part of this package: asking for them raises RuntimeError, never a silent fallback.
"""
from __future__ import annotations

from . import _core

HAS_NKI = False

_AVAILABLE = {"auto", "cpu", "reference"}
_NAMES = ("auto", "pytorch", "nki", "reference", "cpu")
_backend = "auto"


def set_backend(name: str) -> None:
    """Selects the kernels every later call uses (process-wide).
    @raise ValueError for an unknown name; RuntimeError for an unavailable backend."""
    global _backend
    if name not in _NAMES:
        raise ValueError(f"set_backend: unknown backend {name!r}; expected one of {', '.join(_NAMES)}")
    if name not in _AVAILABLE:
        reason = "HAS_NKI is False (no Neuron SDK)" if name == "nki" else "this package runs the C++ kernels"
        raise RuntimeError(f"set_backend: backend {name!r} is not available: {reason}; "
                           f"available: {', '.join(sorted(_AVAILABLE))}")
    _core.set_isa("scalar" if name == "reference" else _core.best_isa())
    _backend = name


def get_backend() -> str:
    """The backend set last ("auto" until set_backend is called)."""
    return _backend
