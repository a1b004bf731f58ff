"""Products and algebra on CSR / COO / BSR matrices, with autograd for the products.

Every function keeps A's dtype (float32, float64, bfloat16), checks shapes first
(ShapeError, an AssertionError) and runs the C++ kernel without the GIL. COO operands
are converted to CSR (duplicates summed). Products differentiate through
`torch.autograd.Function`s whose backward is the core's `spmm_backward`: the gradient
of a sparse operand lives on its stored values only (same structure). Under
`set_backend("pytorch")` the products (spmm, spmv, bsr_spmm) run as torch operations
(`_torch_backend`, torch's autograd) after the same checks.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch.autograd.function import once_differentiable

from . import _backend, _core, _torch_backend
from ._formats import BSRMatrix, COOMatrix, CSRMatrix
from ._interop import ShapeError, as_tensor, check, dense_arg, dense_operand, empty, from_array

Sparse = CSRMatrix | BSRMatrix


def _compute_format(A, who: str) -> Sparse:
    """A as CSR or BSR (COO becomes CSR)."""
    if isinstance(A, COOMatrix):
        return A.to_csr()
    if isinstance(A, (CSRMatrix, BSRMatrix)):
        return A
    raise TypeError(f"{who}: A must be a CSRMatrix, COOMatrix or BSRMatrix, got {type(A).__name__}")


def _stored(A: Sparse) -> torch.Tensor:
    return A.values if isinstance(A, CSRMatrix) else A.blocks


def _from_handle(A: Sparse, h) -> Sparse:
    return type(A)._from_handle(h)


def _shape_str(A) -> str:
    return f"{A.shape[0]} x {A.shape[1]}"


def _on_torch(A) -> bool:
    """Whether the pytorch backend computes this call. A sparse A is then validated by
    the core (`_handle()`, cached) as the C++ path does, so a malformed matrix raises the
    same error on every backend."""
    if _backend.get_backend() != "pytorch":
        return False
    if isinstance(A, (CSRMatrix, BSRMatrix)):
        A._handle()
    return True


def _needs_grad(*tensors: torch.Tensor) -> bool:
    for t in tensors:
        if t.requires_grad:
            return torch.is_grad_enabled()
    return False


Product = Callable[[object, torch.Tensor], torch.Tensor]
# (handle, B, dC) -> (handle of dA on A's structure, dB array): a core backward kernel.
Gradient = Callable[[object, torch.Tensor, torch.Tensor], tuple]


def _spmm_gradient(alpha: float) -> Gradient:
    return lambda h, B, dC: _core.spmm_backward(alpha, h, dense_arg(B), dense_arg(dC))


class _SparseDenseProduct(torch.autograd.Function):
    """C = f(A) B for A with stored values `stored`, computed by `product(handle, B)`;
    dA (at A's stored positions) and dB from the core kernel `gradient(handle, B, dC)`."""

    @staticmethod
    def forward(ctx, stored: torch.Tensor, B: torch.Tensor, A: Sparse, product: Product, gradient: Gradient):
        ctx.handle = A._handle(stored)  # the values this product used, for backward
        ctx.gradient = gradient
        ctx.stored_shape = stored.shape
        ctx.save_for_backward(B)
        return product(ctx.handle, B)

    @staticmethod
    @once_differentiable
    def backward(ctx, dC: torch.Tensor):
        (B,) = ctx.saved_tensors
        need_stored, need_B = ctx.needs_input_grad[:2]
        dC = dense_operand(dC, B.dtype, 2, "spmm backward", "dC")
        dA_h, dB = ctx.gradient(ctx.handle, B, dC)
        dstored = from_array(dA_h.values(), B.dtype).view(ctx.stored_shape) if need_stored else None
        return dstored, from_array(dB, B.dtype) if need_B else None, None, None, None


def _spmm_product(A: Sparse, alpha: float) -> Product:
    def product(h, B: torch.Tensor) -> torch.Tensor:
        C = empty((A.shape[0], B.shape[1]), A.dtype, "spmm")
        _core.spmm(alpha, h, dense_arg(B), 0.0, dense_arg(C))
        return C

    return product


def _bsr_spmm_product(A: BSRMatrix) -> Product:
    def product(h, B: torch.Tensor) -> torch.Tensor:
        return from_array(_core.bsr_spmm(h, dense_arg(B)), A.dtype)

    return product


def _check_rhs(who: str, A, rows: int, name: str) -> None:
    if rows != A.shape[1]:
        raise ShapeError(f"{who}: A is {_shape_str(A)} but {name} has {rows} rows")


def _accumulate(who: str, A, out_shape: tuple, C, beta: float, name: str):
    """C as an addend (dtype of A, shape `out_shape`) when given with beta != 0, else None."""
    if C is None or beta == 0.0:
        return None
    C = as_tensor(C, who, name)
    if tuple(C.shape) != out_shape:
        raise ShapeError(f"{who}: {name} has shape {tuple(C.shape)}, expected {out_shape}")
    if C.dtype != A.dtype:
        raise TypeError(f"{who}: {name} has dtype {C.dtype} but A has dtype {A.dtype}")
    return C


def spmm(A, B, alpha: float = 1.0, C=None, beta: float = 0.0) -> torch.Tensor:
    """alpha * A @ B (+ beta * C when C is given and beta != 0). A: CSR, COO or BSR (m x n);
    B: n x k. Differentiable in A's stored values and B (and C)."""
    who = "spmm"
    A = _compute_format(A, who)
    B = dense_operand(B, A.dtype, 2, who, "B")
    _check_rhs(who, A, B.shape[0], "B")
    alpha, beta = float(alpha), float(beta)
    C = _accumulate(who, A, (A.shape[0], B.shape[1]), C, beta, "C")
    if _on_torch(A):
        return _torch_backend.spmm(A, B, alpha, C, beta)
    stored = _stored(A)
    if _needs_grad(stored, B) or (C is not None and _needs_grad(C)):
        out = _SparseDenseProduct.apply(stored, B, A, _spmm_product(A, alpha), _spmm_gradient(alpha))
        return out if C is None else out + beta * C
    out = empty((A.shape[0], B.shape[1]), A.dtype, who) if C is None else C.clone(memory_format=torch.contiguous_format)
    _core.spmm(alpha, A._handle(), dense_arg(B), beta if C is not None else 0.0, dense_arg(out))
    return out


def spmv(A, x, alpha: float = 1.0, y=None, beta: float = 0.0) -> torch.Tensor:
    """alpha * A @ x (+ beta * y when y is given and beta != 0). x: 1-D of length n.
    Differentiable in A's stored values and x (through spmm)."""
    who = "spmv"
    A = _compute_format(A, who)
    x = dense_operand(x, A.dtype, 1, who, "x")
    if x.shape[0] != A.shape[1]:
        raise ShapeError(f"{who}: A is {_shape_str(A)} but x has {x.shape[0]} entries")
    alpha, beta = float(alpha), float(beta)
    y = _accumulate(who, A, (A.shape[0],), y, beta, "y")
    if _on_torch(A):
        return _torch_backend.spmv(A, x, alpha, y, beta)
    stored = _stored(A)
    if _needs_grad(stored, x) or (y is not None and _needs_grad(y)):
        out = _SparseDenseProduct.apply(stored, x.unsqueeze(1), A, _spmm_product(A, alpha), _spmm_gradient(alpha))[:, 0]
        return out if y is None else out + beta * y
    out = empty((A.shape[0],), A.dtype, who) if y is None else y.clone(memory_format=torch.contiguous_format)
    _core.spmv(alpha, A._handle(), dense_arg(x), beta if y is not None else 0.0, dense_arg(out))
    return out


def bsr_spmm(A: BSRMatrix, B) -> torch.Tensor:
    """A @ B for a BSR A: logical m rows, A's dtype (B is converted to it), accumulated in
    fp32 (fp64 for float64) and rounded once. Differentiable in A.blocks and B."""
    who = "bsr_spmm"
    if not isinstance(A, BSRMatrix):
        raise TypeError(f"{who}: A must be a BSRMatrix, got {type(A).__name__}")
    dtype = A.blocks.dtype
    B = as_tensor(B, who, "B")
    B = dense_operand(B if B.dtype == dtype else B.to(dtype), dtype, 2, who, "B")
    _check_rhs(who, A, B.shape[0], "B")
    if _on_torch(A):
        return _torch_backend.bsr_spmm(A, B)
    if _needs_grad(A.blocks, B):
        return _SparseDenseProduct.apply(A.blocks, B, A, _bsr_spmm_product(A), _spmm_gradient(1.0))
    return from_array(_core.bsr_spmm(A._handle(), dense_arg(B)), dtype)


def _uplo(uplo: str, who: str) -> bool:
    if uplo not in ("upper", "lower"):
        raise ValueError(f'{who}: uplo must be "upper" or "lower", got {uplo!r}')
    return uplo == "upper"


def spmv_symmetric(A, x, alpha: float = 1.0, uplo: str = "upper") -> torch.Tensor:
    """alpha * S @ x for the symmetric S of which A holds one triangle (`uplo`: "upper"
    or "lower"). CSR or COO: the entries on that side of the diagonal, the diagonal
    included. BSR: the block triangle (the blocks on that side of the block diagonal);
    a diagonal block is read in its own `uplo` triangle only, so a whole symmetric block
    or a triangular one both work. `triangle(A, uplo)` makes either from a full A.
    Block sizes 2 to 6 and 8 run vectorised kernels on every thread; half the matrix's
    bytes, so about twice the speed of `spmv` from memory."""
    who = "spmv_symmetric"
    upper = _uplo(uplo, who)
    A = _compute_format(A, who)
    if A.shape[0] != A.shape[1]:
        raise ShapeError(f"{who}: A is {_shape_str(A)}, not square")
    x = dense_operand(x, A.dtype, 1, who, "x")
    if x.shape[0] != A.shape[1]:
        raise ShapeError(f"{who}: A is {_shape_str(A)} but x has {x.shape[0]} entries")
    out = empty((A.shape[0],), A.dtype, who)
    _core.spmv_symmetric(float(alpha), A._handle(), upper, dense_arg(x), 0.0, dense_arg(out))
    return out


def triangle(A, uplo: str = "upper"):
    """The half storage `spmv_symmetric` reads, from a full A: CSR or COO (a CSRMatrix
    back), the entries on the `uplo` side of the diagonal; BSR, the blocks on that side
    of the block diagonal, diagonal blocks whole."""
    who = "triangle"
    upper = _uplo(uplo, who)
    A = _compute_format(A, who)
    return _from_handle(A, _core.triangle(A._handle(), upper))


def sparse_add(A, B, alpha: float = 1.0, beta: float = 1.0):
    """alpha * A + beta * B on the union of the patterns; both CSR/COO (CSR result) or
    both BSR with one block size (BSR result)."""
    who = "sparse_add"
    A, B = _compute_format(A, who), _compute_format(B, who)
    if type(A) is not type(B):
        raise TypeError(f"{who}: A is a {type(A).__name__} but B is a {type(B).__name__}")
    check(A.shape == B.shape, f"{who}: A is {_shape_str(A)} but B is {_shape_str(B)}")
    if A.dtype != B.dtype:
        raise TypeError(f"{who}: A has dtype {A.dtype} but B has dtype {B.dtype}")
    return _from_handle(A, _core.add(float(alpha), A._handle(), float(beta), B._handle()))


def sparse_scale(A, alpha: float):
    """alpha * A with the same structure and format."""
    if isinstance(A, COOMatrix):
        return COOMatrix(A.values * alpha, A.row_indices.clone(), A.col_indices.clone(), A.shape)
    A = _compute_format(A, "sparse_scale")
    return _from_handle(A, _core.scale(A._handle(), float(alpha)))


def sparse_transpose(A):
    """Aᵀ in A's format (CSR rows sorted; BSR blocks transposed)."""
    if isinstance(A, COOMatrix):
        return COOMatrix(A.values.clone(), A.col_indices.clone(), A.row_indices.clone(), (A.shape[1], A.shape[0]))
    A = _compute_format(A, "sparse_transpose")
    return _from_handle(A, _core.transpose(A._handle()))


def nnz_per_row(A) -> torch.Tensor:
    """Stored entries in each row (int64); for BSR, the logical columns its stored blocks cover."""
    A = _compute_format(A, "nnz_per_row")
    return from_array(_core.nnz_per_row(A._handle()))


def bsr_diagonal(A: BSRMatrix) -> torch.Tensor:
    """The main diagonal a_ii, i < min(m, n), zero where no block covers it; A's dtype."""
    if not isinstance(A, BSRMatrix):
        raise TypeError(f"bsr_diagonal: A must be a BSRMatrix, got {type(A).__name__}")
    return from_array(_core.bsr_diagonal(A._handle()), A.dtype)


__all__ = ["ShapeError", "spmm", "spmv", "bsr_spmm", "spmv_symmetric", "sparse_add", "sparse_scale",
           "sparse_transpose", "nnz_per_row", "bsr_diagonal"]
