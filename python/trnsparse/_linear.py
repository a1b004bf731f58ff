"""The block-sparse linear product Y = X Wᵀ + bias with autograd, on the core's linear
kernels (trnsparse/linear.hpp): W's stored blocks (n_blocks, b, b) are read in place and
their gradient written in place, X and dY are read token by token (any leading dims,
flattened; rows with any stride), and no transposed copy of anything is made.

Layouts are bool tensors (⌈out/b⌉ × ⌈in/b⌉) whose True entries, in row-major order, are
the stored blocks. `LayoutHandle` holds the core's validated structure of one layout.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from . import _core
from ._interop import ShapeError, dense_arg, dtype_name, empty

_ACC = {torch.float32: torch.float32, torch.bfloat16: torch.float32, torch.float64: torch.float64}


def check_layout(layout, out_features: int, in_features: int, block_size: int, who: str) -> torch.Tensor:
    """layout as a CPU bool tensor of the block grid's shape, or TypeError/ShapeError."""
    if not isinstance(layout, torch.Tensor):
        raise TypeError(f"{who}: layout must be a bool tensor, got {type(layout).__name__}")
    if layout.dtype != torch.bool:
        raise TypeError(f"{who}: layout must have dtype torch.bool, got {layout.dtype}")
    grid = (-(-out_features // block_size), -(-in_features // block_size))
    if tuple(layout.shape) != grid:
        raise ShapeError(f"{who}: layout has shape {tuple(layout.shape)}, expected (⌈out/b⌉, ⌈in/b⌉) = {grid}")
    return layout.cpu()


class LayoutHandle:
    """The core's structure of a layout (validated once), with the arrays behind it."""

    def __init__(self, layout: torch.Tensor, out_features: int, in_features: int, block_size: int):
        rows, cols = layout.nonzero(as_tuple=True)
        ptr = torch.zeros(layout.shape[0] + 1, dtype=torch.int64)
        torch.cumsum(layout.sum(dim=1), 0, out=ptr[1:])
        idx = cols.to(torch.int64).contiguous()
        self.block_rows, self.block_cols = rows, idx
        self.core = _core.linear_layout(out_features, in_features, block_size, ptr.data_ptr(), ptr.numel(),
                                        idx.data_ptr(), idx.numel())
        self.out_features = out_features
        self.ragged = out_features % block_size != 0 or in_features % block_size != 0


def _rows_readable(x: torch.Tensor) -> torch.Tensor:
    """x (2-D) as the core reads it in place: rows contiguous, any row stride; a copy otherwise."""
    if x.stride(1) == 1 or x.shape[1] <= 1:
        if x.shape[0] <= 1 or x.stride(0) >= max(x.shape[1], 1):
            return x
    return x.contiguous()


class _BlockSparseLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2: torch.Tensor, weight: torch.Tensor, bias, handle: LayoutHandle):
        dtype = weight.dtype
        name = dtype_name(dtype, "BlockSparseLinear")
        y = empty((x2.shape[0], handle.out_features), dtype, "BlockSparseLinear")
        b = None if bias is None else bias.to(_ACC[dtype]).contiguous()
        _core.linear_forward(handle.core, name, weight.data_ptr(), dense_arg(x2), 0 if b is None else b.data_ptr(),
                             dense_arg(y), name)
        ctx.handle = handle
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.save_for_backward(x2, weight)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor):
        x2, weight = ctx.saved_tensors
        handle = ctx.handle
        dtype = weight.dtype
        name = dtype_name(dtype, "BlockSparseLinear")
        dy = _rows_readable(dy.to(dtype))
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dx = dw = db = None
        if need_x:
            dx = empty(x2.shape, dtype, "BlockSparseLinear")
            _core.linear_backward_input(handle.core, name, weight.data_ptr(), dense_arg(dy), dense_arg(dx), name)
        if need_w:
            # The kernels write the blocks' logical part; padding of ragged edges stays zero.
            dw = empty(weight.shape, dtype, "BlockSparseLinear")
            if handle.ragged:
                dw.zero_()
            _core.linear_backward_weight(handle.core, name, dense_arg(dy), dense_arg(x2), dw.data_ptr())
        if need_b:
            acc = torch.empty(dy.shape[1], dtype=_ACC[dtype])
            _core.linear_backward_bias(name, dense_arg(dy), acc.data_ptr())
            db = acc.to(ctx.bias_dtype)
        return dx, dw, db, None


def block_sparse_linear(x: torch.Tensor, weight: torch.Tensor, bias, handle: LayoutHandle,
                        in_features: int, out_features: int, who: str) -> torch.Tensor:
    """y = x Wᵀ + bias over x's last dimension; x (..., in_features) -> (..., out_features).
    Under torch.autocast("cpu") the operands run in the autocast dtype (bias and
    accumulation in fp32); otherwise x, weight and bias must share one dtype."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{who}: input must be a tensor, got {type(x).__name__}")
    if not x.is_cpu:
        raise ValueError(f"{who}: input is on {x.device}; trnsparse runs on CPU tensors")
    if x.dim() < 1 or x.shape[-1] != in_features:
        raise ShapeError(f"{who}: input has shape {tuple(x.shape)}, expected (..., in_features = {in_features})")
    if torch.is_autocast_cpu_enabled():
        dtype = torch.get_autocast_cpu_dtype()
        x, weight = x.to(dtype), weight.to(dtype)
        bias = None if bias is None else bias.float()
    else:
        if x.dtype != weight.dtype:
            raise TypeError(f"{who}: input has dtype {x.dtype} but weight has dtype {weight.dtype} (mixed dtypes "
                            "run only under torch.autocast)")
        if bias is not None and bias.dtype != weight.dtype:
            raise TypeError(f"{who}: bias has dtype {bias.dtype} but weight has dtype {weight.dtype}")
    lead = x.shape[:-1]
    x2 = _rows_readable(x.reshape(-1, in_features))
    y = _BlockSparseLinearFn.apply(x2, weight, bias, handle)
    return y.view(*lead, out_features)
