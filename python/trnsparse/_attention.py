"""Block-sparse attention on the core's tiled kernels, with autograd.

`block_sparse_attention_tiled(Q, K, V, mask)` computes O = softmax(Q Kᵀ · scale + mask) V
for one head, visiting only the (query block, key block) tiles the mask stores, with an
online softmax (fp32 scores, statistics and accumulation for float32 and bfloat16; fp64
throughout for float64). The mask is either a
BSRMatrix, whose block pattern alone is used (every stored block fully allowed; its
block size is the tile size), or an AttentionMask from the builders of `trnsparse.mask`
(which may also allow only part of a block, e.g. the diagonal blocks of `causal`).
Operands are float32, bfloat16 or float64. float64 runs the core's portable reference
kernel on every instruction set: it is for verification (e.g. `torch.autograd.gradcheck`
with nondet_tol=0), not speed.

The backward is the core's `attention_backward` from the forward's saved O and per-row
log-sum-exp: bitwise identical for any thread count.
"""
from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from . import _core
from ._formats import BSRMatrix
from ._interop import as_tensor, check, dense_arg, dense_operand, dtype_name, from_array, index_tensor

_ATTENTION_DTYPES = (torch.float32, torch.bfloat16, torch.float64)


class AttentionMask:
    """Which (query, key) pairs attention may use, on a block grid of `block_size`:
    stored block (I, J) lets queries of block row I attend to keys of block column J,
    fully or through an element mask. Immutable; build it with `trnsparse.mask`'s
    functions or `AttentionMask.from_bsr`."""

    def __init__(self, handle: _core.AttentionMask):
        self._core = handle

    @classmethod
    def from_bsr(cls, A: BSRMatrix) -> "AttentionMask":
        """The block pattern of A (values ignored), every stored block full."""
        who = "AttentionMask.from_bsr"
        if not isinstance(A, BSRMatrix):
            raise TypeError(f"{who}: expected a BSRMatrix, got {type(A).__name__}")
        rp = index_tensor(A.block_row_ptrs, who, "block_row_ptrs")
        ci = index_tensor(A.block_col_indices, who, "block_col_indices")
        return cls(_core.mask_from_pattern(A.shape[0], A.shape[1], A.block_size, rp.data_ptr(), rp.numel(),
                                           ci.data_ptr(), ci.numel()))

    @property
    def shape(self) -> tuple[int, int]:
        """(queries, keys)."""
        return (self._core.queries, self._core.keys)

    @property
    def block_size(self) -> int:
        return self._core.block_size

    @property
    def n_blocks(self) -> int:
        """Stored blocks."""
        return self._core.n_blocks

    @property
    def n_partial(self) -> int:
        """Stored blocks that allow only some of their pairs."""
        return self._core.n_partial

    @property
    def block_row_ptrs(self) -> torch.Tensor:
        return from_array(self._core.block_arrays()[0])

    @property
    def block_col_indices(self) -> torch.Tensor:
        return from_array(self._core.block_arrays()[1])

    def to_dense(self) -> torch.Tensor:
        """The (queries, keys) bool matrix of allowed pairs (O(queries · keys))."""
        return from_array(self._core.allowed()).bool()

    def __repr__(self) -> str:
        return (f"AttentionMask(shape={self.shape}, block_size={self.block_size}, n_blocks={self.n_blocks}, "
                f"n_partial={self.n_partial})")


def _mask_of(mask, who: str) -> AttentionMask:
    if isinstance(mask, AttentionMask):
        return mask
    if isinstance(mask, BSRMatrix):
        return AttentionMask.from_bsr(mask)
    raise TypeError(f"{who}: mask_bsr must be a BSRMatrix or an AttentionMask, got {type(mask).__name__}")


class _BlockSparseAttention(torch.autograd.Function):
    """O of the core's attention_forward; dQ, dK, dV from its attention_backward with the
    saved O and row log-sum-exp. An undefined dO gives no gradients."""

    @staticmethod
    def forward(ctx, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, mask: AttentionMask, scale: float):
        ctx.set_materialize_grads(False)
        O, lse = _forward(Q, K, V, mask, scale)
        ctx.mask, ctx.scale = mask, scale
        ctx.save_for_backward(Q, K, V, O, lse)
        return O

    @staticmethod
    @once_differentiable
    def backward(ctx, dO: torch.Tensor | None):
        if dO is None:
            return None, None, None, None, None
        Q, K, V, O, lse = ctx.saved_tensors
        dO = dense_operand(dO, Q.dtype, 2, "block_sparse_attention_tiled backward", "dO")
        dQ, dK, dV = torch.empty_like(Q), torch.empty_like(K), torch.empty_like(V)
        _core.attention_backward(ctx.mask._core, dtype_name(Q.dtype, "block_sparse_attention_tiled"), dense_arg(Q),
                                 dense_arg(K), dense_arg(V), dense_arg(O), dense_arg(dO), dense_arg(lse),
                                 dense_arg(dQ), dense_arg(dK), dense_arg(dV), ctx.scale)
        need = ctx.needs_input_grad
        return dQ if need[0] else None, dK if need[1] else None, dV if need[2] else None, None, None


def _forward(Q, K, V, mask: AttentionMask, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    O = torch.empty((Q.shape[0], V.shape[1]), dtype=Q.dtype)
    # Row statistics in the core's accumulation type: float64 for float64, else float32.
    lse = torch.empty(Q.shape[0], dtype=torch.float64 if Q.dtype == torch.float64 else torch.float32)
    _core.attention_forward(mask._core, dtype_name(Q.dtype, "block_sparse_attention_tiled"), dense_arg(Q),
                            dense_arg(K), dense_arg(V), dense_arg(O), dense_arg(lse), scale)
    return O, lse


def block_sparse_attention_tiled(Q, K, V, mask_bsr, scale: float | None = None) -> torch.Tensor:
    """softmax(Q Kᵀ · scale + mask) V for Q (seq_q, d), K and V (seq_k, d), float32,
    bfloat16 or float64 (one dtype; float64 on the portable kernel, for verification), d <= 512. `mask_bsr`: a BSRMatrix of shape (seq_q, seq_k) whose
    block pattern (not its values) says which tiles are computed, or an AttentionMask.
    `scale` defaults to 1/√d and must be positive. A query row that may attend to no key
    (e.g. a block row without stored blocks) outputs zeros. Differentiable in Q, K, V."""
    who = "block_sparse_attention_tiled"
    Q = as_tensor(Q, who, "Q")
    if Q.dtype not in _ATTENTION_DTYPES:
        raise TypeError(f"{who}: dtype {Q.dtype} is not supported (float32, bfloat16 or float64)")
    Q = dense_operand(Q, Q.dtype, 2, who, "Q")
    K = dense_operand(K, Q.dtype, 2, who, "K")
    V = dense_operand(V, Q.dtype, 2, who, "V")
    mask = _mask_of(mask_bsr, who)
    check(K.shape == V.shape, f"{who}: K has shape {tuple(K.shape)} but V has shape {tuple(V.shape)}")
    check(Q.shape[1] == K.shape[1], f"{who}: Q has {Q.shape[1]} columns but K has {K.shape[1]}")
    check(mask.shape == (Q.shape[0], K.shape[0]),
          f"{who}: the mask is {mask.shape[0]} x {mask.shape[1]} but Q has {Q.shape[0]} rows and K {K.shape[0]}")
    if scale is not None and not (float(scale) > 0.0 and math.isfinite(float(scale))):
        raise ValueError(f"{who}: scale = {scale} must be positive and finite (None for 1/sqrt(d))")
    scale = 0.0 if scale is None else float(scale)  # the core's 0 means 1/sqrt(d)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (Q, K, V)):
        return _BlockSparseAttention.apply(Q, K, V, mask, scale)
    return _forward(Q, K, V, mask, scale)[0]


__all__ = ["AttentionMask", "block_sparse_attention_tiled"]
