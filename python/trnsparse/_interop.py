"""Tensors at the boundary with the C++ core: dtype names, checks, raw buffer arguments.

The core reads and writes CPU buffers in place, so every buffer handed to it is checked
here first (device, dtype, length, row-major layout): a wrong length would otherwise
read past the end of the buffer.
"""
from __future__ import annotations

import operator

import numpy as np
import torch
import torch.utils.dlpack

from . import _core

ShapeError = _core.ShapeError

_DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16"}
_NAME_DTYPES = {name: dtype for dtype, name in _DTYPE_NAMES.items()}


def dtype_name(dtype: torch.dtype, who: str) -> str:
    """The core's name of a value dtype, or a TypeError."""
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        raise TypeError(f"{who}: dtype {dtype} is not supported (float32, float64 or bfloat16)") from None


def as_tensor(x, who: str, name: str) -> torch.Tensor:
    """x as a CPU tensor; numpy arrays are wrapped without a copy."""
    if not isinstance(x, torch.Tensor):
        x = torch.from_numpy(x) if isinstance(x, np.ndarray) else torch.as_tensor(x)
    if not x.is_cpu:
        raise ValueError(f"{who}: {name} is on {x.device}; trnsparse runs on CPU tensors")
    return x


def values_tensor(x, dtype: torch.dtype, who: str, name: str) -> torch.Tensor:
    """x as a contiguous CPU tensor of `dtype` (no copy when it already is one)."""
    x = as_tensor(x, who, name)
    if x.dtype != dtype:
        raise TypeError(f"{who}: {name} has dtype {x.dtype} but the matrix has dtype {dtype}")
    return x.contiguous()


def index_tensor(x, who: str, name: str) -> torch.Tensor:
    """x as a contiguous int64 CPU tensor (other integer types are converted)."""
    x = as_tensor(x, who, name)
    if x.dtype != torch.int64:
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            raise TypeError(f"{who}: {name} must hold integers, not {x.dtype}")
        x = x.to(torch.int64)
    return x.contiguous()


def int_arg(value, who: str, name: str, minimum: int) -> int:
    """`value` as an int >= minimum: TypeError for a non-integer (bools included),
    ValueError for one out of range."""
    if isinstance(value, bool):
        raise TypeError(f"{who}: {name} must be an int, got bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{who}: {name} must be an int, got {type(value).__name__}") from None
    if value < minimum:
        raise ValueError(f"{who}: {name} = {value} must be >= {minimum}")
    return value


def check(condition: bool, message: str) -> None:
    """Raises ShapeError (an AssertionError and a ValueError) unless `condition`."""
    if not condition:
        raise ShapeError(message)


def dense_arg(t: torch.Tensor) -> tuple[int, int, int, int]:
    """(address, rows, cols, row stride) of a 1-D (one column) or 2-D row-major tensor."""
    if t.dim() == 1:
        return (t.data_ptr(), t.shape[0], 1, 1)
    rows, cols = t.shape
    return (t.data_ptr(), rows, cols, t.stride(0) if rows > 1 else max(cols, 1))


def _rows_contiguous(x: torch.Tensor) -> bool:
    if x.dim() == 1:
        return x.shape[0] <= 1 or x.stride(0) == 1
    rows, cols = x.shape
    return (cols <= 1 or x.stride(1) == 1) and (rows <= 1 or x.stride(0) >= max(cols, 1))


def dense_operand(x, dtype: torch.dtype, dims: int, who: str, name: str) -> torch.Tensor:
    """A dense operand of `dims` dimensions and `dtype` that the core can read in place:
    kept as it is when its rows are contiguous (any row stride), copied otherwise."""
    x = as_tensor(x, who, name)
    if x.dim() != dims:
        raise ShapeError(f"{who}: {name} must be {dims}-D, got shape {tuple(x.shape)}")
    if x.dtype != dtype:
        raise TypeError(f"{who}: {name} has dtype {x.dtype} but A has dtype {dtype}")
    return x if x.is_contiguous() or _rows_contiguous(x) else x.contiguous()


# Outputs from this many bytes on come from the core's buffer pool (python/src/buffers.cpp:
# memory kept faulted in from one call to the next), smaller ones from torch.
POOLED_BYTES = 4 << 20
_ELEMENT_BYTES = {torch.float32: 4, torch.float64: 8, torch.bfloat16: 2}


def empty(shape, dtype: torch.dtype, who: str, strides=None) -> torch.Tensor:
    """An uninitialised CPU tensor of `shape` and `dtype` (row-major unless `strides`, in
    elements, are given); one of POOLED_BYTES or more on pooled memory, whose pages were
    faulted in by an earlier output of its size."""
    shape = tuple(int(n) for n in shape)
    if strides is None:
        strides, n = [], 1
        for size in reversed(shape):
            strides.insert(0, n)
            n *= max(size, 1)
    nbytes = _ELEMENT_BYTES.get(dtype, 0)  # 0: a dtype the pool does not serve
    for size in shape:
        nbytes *= size
    if nbytes < POOLED_BYTES:
        return torch.empty_strided(shape, strides, dtype=dtype)
    return torch.utils.dlpack.from_dlpack(_core.pooled_empty(list(shape), list(strides), dtype_name(dtype, who)))


def from_array(a: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor over a numpy array returned by the core (no copy); int16 carries bf16."""
    t = torch.from_numpy(a)
    return t.view(torch.bfloat16) if dtype == torch.bfloat16 else t


def dtype_of_name(name: str) -> torch.dtype:
    return _NAME_DTYPES[name]
