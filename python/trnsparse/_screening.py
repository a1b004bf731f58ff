"""Integral screening (quantum chemistry) with the semantics of trnsparse 0.6.

`schwarz_bounds`, `screen_quartets`, `density_screen` and `sparsity_stats` work on the
(n, n) matrix of pair bounds Q_μν, elementwise: they are plain torch expressions (any
shape and dtype, differentiable where torch is), because the core's functions of the
same names take a vector of per-index bounds and return CSR matrices, a different
contract. `screened_spmm` runs the core's fused kernel: the mask is applied inside it and
never materialised, with gradients from the core's backward; under
`set_backend("pytorch")`, torch operations on the stored blocks (`_torch_backend`).
"""
from __future__ import annotations

import math

import torch

from . import _core, _torch_backend
from ._formats import DEFAULT_BLOCK_SIZE, BSRMatrix
from ._interop import ShapeError, as_tensor, check, dense_arg, dense_operand, from_array
from ._ops import _needs_grad, _on_torch, _SparseDenseProduct

_REAL = (torch.float32, torch.float64)


def schwarz_bounds(diagonal_integrals) -> torch.Tensor:
    """Q = √|x| elementwise (any shape, x's dtype): the Schwarz bounds Q_μν = √(μν|μν)."""
    return torch.sqrt(torch.abs(as_tensor(diagonal_integrals, "schwarz_bounds", "diagonal_integrals")))


def screen_quartets(Q, threshold: float = 1e-10) -> torch.Tensor:
    """The significant pairs, Q > √threshold (bool, Q's shape): a quartet (μν|λσ) with
    Q_μν · Q_λσ > threshold needs both pairs above √threshold."""
    return as_tensor(Q, "screen_quartets", "Q") > math.sqrt(_threshold(threshold, "screen_quartets"))


def density_screen(Q, P, threshold: float = 1e-10) -> torch.Tensor:
    """The pairs μν with Q_μν · max_λσ(|P_λσ| · Q_λσ) > threshold (bool, Q's shape; the
    maximum is global). P (density matrix) has Q's shape."""
    who = "density_screen"
    Q, P = as_tensor(Q, who, "Q"), as_tensor(P, who, "P")
    check(Q.shape == P.shape, f"{who}: Q has shape {tuple(Q.shape)} but P has shape {tuple(P.shape)}")
    threshold = _threshold(threshold, who)
    if Q.numel() == 0:
        return torch.zeros(Q.shape, dtype=torch.bool)
    return Q * (torch.abs(P) * Q).max() > threshold


def sparsity_stats(Q, threshold: float = 1e-10) -> dict:
    """Pair and quartet counts of the (n, n) bounds Q at `threshold` (see screen_quartets).
    significant_quartets_upper = significant_pairs² bounds the quartets that survive;
    sparsities are 0.0 for n = 0."""
    who = "sparsity_stats"
    Q = as_tensor(Q, who, "Q")
    check(Q.dim() == 2 and Q.shape[0] == Q.shape[1], f"{who}: Q must be square (n, n), got shape {tuple(Q.shape)}")
    n = int(Q.shape[0])
    pairs = int(screen_quartets(Q, threshold).sum())
    total_pairs, total_quartets, quartets = n * n, n**4, pairs * pairs
    return {
        "n_shells": n,
        "total_pairs": total_pairs,
        "significant_pairs": pairs,
        "pair_sparsity": 1.0 - pairs / total_pairs if total_pairs else 0.0,
        "total_quartets": total_quartets,
        "significant_quartets_upper": quartets,
        "quartet_sparsity_lower": 1.0 - quartets / total_quartets if total_quartets else 0.0,
    }


def _threshold(threshold, who: str) -> float:
    threshold = float(threshold)
    if not threshold >= 0.0:
        raise ValueError(f"{who}: threshold = {threshold}, expected >= 0")
    return threshold


def _full_bsr(A: torch.Tensor) -> BSRMatrix:
    """A dense square A as a BSR matrix storing every block (its blocks a differentiable
    view of A, padded), so that every entry of A gets its gradient."""
    n = A.shape[0]
    b = max(1, min(DEFAULT_BLOCK_SIZE, n))
    nb = -(-n // b)
    padded = torch.nn.functional.pad(A, (0, nb * b - n, 0, nb * b - n))
    blocks = padded.reshape(nb, b, nb, b).transpose(1, 2).reshape(nb * nb, b, b)
    cols = torch.arange(nb, dtype=torch.int64).repeat(nb)
    return BSRMatrix(blocks, cols, torch.arange(nb + 1, dtype=torch.int64) * nb, (n, n), b)


def screened_spmm(A, diag_integrals, B, threshold: float) -> torch.Tensor:
    """C = (A ∘ M) B with M_ij = [√|d_i| · √|d_j| > √threshold] (strict), d =
    diag_integrals (length n, cast to A's dtype), on the core's fused kernel: tiles below
    the bound are skipped, only partial tiles masked. A: a square BSRMatrix, or a dense
    (n, n) tensor (trnsparse 0.6 code; run as a BSR matrix storing every block); B: (n, k)
    of A's dtype; float32 or float64. Differentiable in A (its blocks, or the dense A)
    and B; nothing flows to diag_integrals. ValueError for a threshold below 0 (or NaN)
    and for a non-finite entry of diag_integrals (after the cast)."""
    who = "screened_spmm"
    if isinstance(A, BSRMatrix):
        blocks, dtype = A.blocks, A.dtype
    else:
        A = as_tensor(A, who, "A")
        if A.dim() != 2:
            raise ShapeError(f"{who}: A must be a BSRMatrix or a 2-D tensor, got shape {tuple(A.shape)}")
        dtype = A.dtype
    if dtype not in _REAL:
        raise TypeError(f"{who}: dtype {dtype} is not supported (float32 or float64)")
    check(A.shape[0] == A.shape[1], f"{who}: A is {A.shape[0]} x {A.shape[1]}, not square")
    n = A.shape[0]
    d = as_tensor(diag_integrals, who, "diag_integrals").detach()
    check(d.dim() == 1 and d.shape[0] == n,
          f"{who}: A is {n} x {n} but diag_integrals has shape {tuple(d.shape)}, expected ({n},)")
    d = d.to(dtype).contiguous()
    if not bool(torch.isfinite(d).all()):
        raise ValueError(f"{who}: diag_integrals has a non-finite entry")
    B = dense_operand(B, dtype, 2, who, "B")
    check(B.shape[0] == n, f"{who}: A is {n} x {n} but B has {B.shape[0]} rows")
    threshold = _threshold(threshold, who)
    if _on_torch(A):
        return _torch_backend.screened_spmm(A, d, B, threshold)
    if not isinstance(A, BSRMatrix):
        A = _full_bsr(A)
        blocks = A.blocks

    def product(h, B: torch.Tensor) -> torch.Tensor:
        return from_array(_core.screened_spmm(h, dense_arg(d), dense_arg(B), threshold), dtype)

    def gradient(h, B: torch.Tensor, dC: torch.Tensor):
        return _core.screened_spmm_backward(h, dense_arg(d), dense_arg(B), dense_arg(dC), threshold)

    if _needs_grad(blocks, B):
        return _SparseDenseProduct.apply(blocks, B, A, product, gradient)
    return product(A._handle(blocks), B)


__all__ = ["schwarz_bounds", "screen_quartets", "density_screen", "sparsity_stats", "screened_spmm"]
