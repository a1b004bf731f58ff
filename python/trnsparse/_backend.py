"""Which kernels run: the backend names of trnsparse 0.6, mapped onto the C++ core.

- "auto" and "cpu": the C++ kernels of the best instruction set this CPU has
  (AVX-512, AVX2 or portable); "auto" is the default.
- "reference": the C++ core's portable scalar kernels (every SIMD kernel is tested
  against them), for A/B comparisons.
- "pytorch": spmm, spmv, bsr_spmm, screened_spmm, sparse_attention and
  block_sparse_attention_tiled as plain torch operations (`_torch_backend`, 0.6's
  pure-PyTorch path) with torch's own autograd: for A/B comparisons, and for
  attention on devices the C++ kernels do not run on (sparse_attention then takes
  CUDA tensors; the sparse formats hold CPU tensors on every backend). Arguments are
  checked as on the other backends. Everything else (conversions, sparse_add and the
  other structural operations, spmv_symmetric, the solvers) runs on the C++ kernels of
  the best instruction set.
- "nki" (Neuron kernels) is not part of this package: asking for it raises
  RuntimeError, never a silent fallback.
"""
from __future__ import annotations

from . import _core

HAS_NKI = False

_NAMES = ("auto", "pytorch", "nki", "reference", "cpu")
_UNAVAILABLE = {"nki": "HAS_NKI is False (no Neuron SDK)"}
_backend = "auto"


def set_backend(name: str) -> None:
    """Selects the kernels every later call uses (process-wide).
    @raise ValueError for an unknown name; RuntimeError for an unavailable backend."""
    global _backend
    if name not in _NAMES:
        raise ValueError(f"set_backend: unknown backend {name!r}; expected one of {', '.join(_NAMES)}")
    if name in _UNAVAILABLE:
        available = ", ".join(n for n in _NAMES if n not in _UNAVAILABLE)
        raise RuntimeError(f"set_backend: backend {name!r} is not available: {_UNAVAILABLE[name]}; "
                           f"available: {available}")
    _core.set_isa("scalar" if name == "reference" else _core.best_isa())
    _backend = name


def get_backend() -> str:
    """The backend set last ("auto" until set_backend is called)."""
    return _backend
