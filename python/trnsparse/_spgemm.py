"""Sparse × sparse products (the core's SpGEMM): `matmul(A, B)` and `A @ B` for CSR × CSR
and BSR × BSR (equal block sizes), `matmul_transposed(A, B)` = A Bᵀ (A Aᵀ with B = A) and
`galerkin(P, A)` = Pᵀ A P.

The result has A's format and dtype (float32 for bfloat16 operands). The core caches the
symbolic phase (C's structure) per pair of structures, so a product repeated with new
values runs the numeric phase alone. `drop_tolerance` > 0 leaves out entries (blocks, by
Frobenius norm) at or below it; for BSR it also skips block products whose bound
‖A_ik‖·‖B_kj‖ is at or below it. With 0 C has the full structural product.

`matmul` differentiates in both operands' stored values: dA = dC Bᵀ on A's pattern and
dB = Aᵀ dC on B's pattern, where dC is the gradient of C's stored values (entries left
out by the tolerance carry none).
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from . import _core, _ops
from ._formats import BSRMatrix, COOMatrix, CSRMatrix
from ._interop import ShapeError, dense_arg, from_array

Sparse = CSRMatrix | BSRMatrix


def _operand(A, who: str, name: str) -> Sparse:
    if isinstance(A, COOMatrix):
        return A.to_csr()
    if isinstance(A, (CSRMatrix, BSRMatrix)):
        return A
    raise TypeError(f"{who}: {name} must be a CSRMatrix, COOMatrix or BSRMatrix, got {type(A).__name__}")


def _describe(A: Sparse, name: str) -> str:
    if isinstance(A, BSRMatrix):
        return f"{name} is {A.shape[0]} x {A.shape[1]} (BSR, block size {A.block_size}, {A.dtype})"
    return f"{name} is {A.shape[0]} x {A.shape[1]} (CSR, {A.dtype})"


def _stored(A: Sparse) -> torch.Tensor:
    return A.values if isinstance(A, CSRMatrix) else A.blocks


def _check(who: str, A, B, inner: tuple[int, int], drop_tolerance) -> tuple[Sparse, Sparse, float]:
    """Both operands as CSR or BSR with equal formats, block sizes and dtypes, the inner
    dimensions `inner` (indices into A.shape, B.shape) equal, and a tolerance >= 0."""
    A, B = _operand(A, who, "A"), _operand(B, who, "B")

    def operands() -> str:  # formatted only for an error: a small product costs about as much
        return f"{_describe(A, 'A')}, {_describe(B, 'B')}"

    if type(A) is not type(B):
        raise TypeError(f"{who}: the operands must be both CSR or both BSR: {operands()}")
    if A.dtype != B.dtype:
        raise TypeError(f"{who}: operands have different dtypes: {operands()}")
    if isinstance(A, BSRMatrix) and A.block_size != B.block_size:
        raise ValueError(f"{who}: block sizes differ: {operands()}")
    if A.shape[inner[0]] != B.shape[inner[1]]:
        raise ShapeError(f"{who}: inner dimensions differ: {operands()}")
    tol = float(drop_tolerance)
    if not tol >= 0.0:
        raise ValueError(f"{who}: drop_tolerance = {tol} must be >= 0 (and not NaN): {operands()}")
    return A, B, tol


def _handles(A: Sparse, B: Sparse, a_stored=None, b_stored=None):
    """Both operands' core matrices; once when B is A (A², A Aᵀ): a handle compares the
    arrays with its cached copy, a pass as long as a small product."""
    ha = A._handle(a_stored)
    return ha, (ha if B is A and b_stored is a_stored else B._handle(b_stored))


def _with_values(C: Sparse, values: torch.Tensor) -> Sparse:
    if isinstance(C, CSRMatrix):
        return CSRMatrix(values, C.col_indices, C.row_ptrs, C.shape)
    return BSRMatrix(values, C.block_col_indices, C.block_row_ptrs, C.shape, C.block_size)


class _SparseSparseProduct(torch.autograd.Function):
    """C's stored values for C = A B; `result` receives C itself (its structure is not a
    tensor autograd can return). Backward: the core's sampled products."""

    @staticmethod
    def forward(ctx, a_stored, b_stored, A: Sparse, B: Sparse, tol: float, result: list):
        ha, hb = _handles(A, B, a_stored, b_stored)
        hc = _core.spgemm(ha, hb, tol, False)
        C = type(A)._from_handle(hc)
        ctx.handles = (ha, hb, hc)
        ctx.shapes = (a_stored.shape, b_stored.shape, a_stored.dtype)
        result.append(C)
        return _stored(C)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_stored: torch.Tensor):
        ha, hb, hc = ctx.handles
        a_shape, b_shape, dtype = ctx.shapes
        need_a, need_b = ctx.needs_input_grad[:2]
        d = d_stored.contiguous()
        dA, dB = _core.spgemm_backward(ha, hb, hc, d.data_ptr(), d.numel(), need_a, need_b)
        grad_a = from_array(dA).to(dtype).view(a_shape) if need_a else None
        grad_b = from_array(dB).to(dtype).view(b_shape) if need_b else None
        return grad_a, grad_b, None, None, None, None


def matmul(A, B, drop_tolerance: float = 0.0) -> Sparse:
    """C = A @ B for sparse A and B (CSR × CSR → CSR, BSR × BSR → BSR with equal block
    sizes). Differentiable in both operands' stored values."""
    A, B, tol = _check("matmul", A, B, (1, 0), drop_tolerance)
    a_stored, b_stored = _stored(A), _stored(B)
    if _ops._needs_grad(a_stored, b_stored):
        result: list = []
        values = _SparseSparseProduct.apply(a_stored, b_stored, A, B, tol, result)
        return _with_values(result[0], values)
    return type(A)._from_handle(_core.spgemm(*_handles(A, B), tol, False))


def matmul_transposed(A, B, drop_tolerance: float = 0.0) -> Sparse:
    """C = A @ Bᵀ without forming Bᵀ (A Aᵀ with B = A). Not differentiable."""
    A, B, tol = _check("matmul_transposed", A, B, (1, 1), drop_tolerance)
    return type(A)._from_handle(_core.spgemm(*_handles(A, B), tol, True))


def galerkin(P, A, drop_tolerance: float = 0.0) -> Sparse:
    """Pᵀ A P (the coarse operator of multigrid) without forming Pᵀ; drop_tolerance
    applies to the final product. Not differentiable."""
    P, A, tol = _check("galerkin", P, A, (0, 1), drop_tolerance)
    if A.shape[0] != A.shape[1]:
        raise ShapeError(f"galerkin: A must be square: {_describe(P, 'P')}, {_describe(A, 'A')}")
    return type(A)._from_handle(_core.galerkin(P._handle(), A._handle(), tol))


def clear_spgemm_plan_cache() -> None:
    """Drops the cached symbolic phases of sparse × sparse products: the next product of
    each pair of structures computes its output structure afresh (what a first product
    costs)."""
    _core.clear_spgemm_plan_cache()


def matmul_operator(self, other):
    """`A @ B` (CSRMatrix.__matmul__, BSRMatrix.__matmul__): the sparse product for a
    sparse B, the sparse-dense product (spmm, spmv) for a tensor."""
    if isinstance(other, (CSRMatrix, BSRMatrix, COOMatrix)):
        return matmul(self, other)
    if isinstance(other, torch.Tensor):
        return _ops.spmv(self, other) if other.dim() == 1 else _ops.spmm(self, other)
    return NotImplemented

