"""The "pytorch" backend: trnsparse's products and attention as plain torch operations.

`trnsparse.set_backend("pytorch")` routes spmm, spmv, bsr_spmm, screened_spmm,
sparse_attention and block_sparse_attention_tiled here. The public functions check their
arguments first, the same way for every backend, and pass them on validated: these
functions assume valid operands. Being differentiable torch expressions, they take their
gradients from torch's autograd (not from the core's backward kernels) and compute on the
device of their tensors (sparse_attention passes tensors of any device; the sparse
formats and the products' checks take CPU tensors). They keep the C++ kernels' contract:

- Products accumulate in float32 for float32 and bfloat16 and in float64 for float64 (the
  core's accumulation type) and round the result to A's dtype once.
- Sparse products never densify A: each stored entry (CSR) or block (BSR) multiplies the
  rows of B it reads and the products are scatter-added into C (`index_add`), so the
  gradient reaches A's stored values only (A's structure), as the core's does. Memory is
  O(nnz · k) for CSR and O(stored blocks · b · k) for BSR. On CUDA, `index_add` adds in
  no fixed order: results are not bitwise reproducible there.
- Attention forms the (B, H, Lq, Lkv) scores of every head, O(Lq · Lkv) memory, where the
  tiled kernels visit only the stored blocks: a reference, and a path for devices the
  C++ kernels do not run on.
"""
from __future__ import annotations

import math

import torch

from ._formats import BSRMatrix, CSRMatrix

Sparse = CSRMatrix | BSRMatrix


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for float64 operands, float32 for the others (as the core accumulates)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _entry_rows(ptrs: torch.Tensor, device: torch.device) -> torch.Tensor:
    """The row of each stored entry (the block row of each block) from CSR-style row
    pointers, on `device`."""
    ptrs = ptrs.to(device)
    return torch.repeat_interleave(torch.arange(ptrs.numel() - 1, device=device), ptrs.diff())


def _pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    """t with rows of zeros appended up to `rows` rows (the padding of edge blocks)."""
    return torch.cat([t, t.new_zeros((rows - t.shape[0],) + tuple(t.shape[1:]))])


def _product(A: Sparse, stored: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """A B in the accumulation dtype, with `stored` as A's stored values (A.values or
    A.blocks, or a masked copy of them); differentiable in `stored` and B."""
    acc = _accumulation_dtype(A.dtype)
    stored, B = stored.to(acc), B.to(acc)
    k = B.shape[1]
    if isinstance(A, CSRMatrix):
        terms = stored[:, None] * B[A.col_indices.to(B.device)]
        C = torch.zeros(A.shape[0], k, dtype=acc, device=B.device)
        return C.index_add(0, _entry_rows(A.row_ptrs, B.device), terms)
    # BSR: B padded with zero rows to whole blocks, C computed on whole block rows and cut
    # to the logical shape, so the padding of edge blocks neither contributes nor gets a
    # gradient.
    b = A.block_size
    block_rows, block_cols = A.block_grid
    B = _pad_rows(B, block_cols * b).view(block_cols, b, k)
    terms = torch.bmm(stored, B[A.block_col_indices.to(B.device)])  # (stored blocks, b, k)
    C = torch.zeros(block_rows, b, k, dtype=acc, device=B.device)
    C = C.index_add(0, _entry_rows(A.block_row_ptrs, B.device), terms)
    return C.view(block_rows * b, k)[: A.shape[0]]


def spmm(A: Sparse, B: torch.Tensor, alpha: float = 1.0, C: torch.Tensor | None = None,
         beta: float = 0.0) -> torch.Tensor:
    """alpha · A B (+ beta · C) in A's dtype. C is the addend or None: the caller passes it
    only when it counts (beta != 0), so that NaN in an ignored C does not propagate."""
    out = alpha * _product(A, A.values if isinstance(A, CSRMatrix) else A.blocks, B)
    if C is not None:
        out = out + beta * C.to(out.dtype)
    return out.to(A.dtype)


def spmv(A: Sparse, x: torch.Tensor, alpha: float = 1.0, y: torch.Tensor | None = None,
         beta: float = 0.0) -> torch.Tensor:
    """alpha · A x (+ beta · y): spmm on one column."""
    return spmm(A, x[:, None], alpha, None if y is None else y[:, None], beta)[:, 0]


def bsr_spmm(A: BSRMatrix, B: torch.Tensor) -> torch.Tensor:
    """A B for a BSR A and B of A's dtype."""
    return spmm(A, B)


def screened_spmm(A: BSRMatrix | torch.Tensor, diag: torch.Tensor, B: torch.Tensor,
                  threshold: float) -> torch.Tensor:
    """(A ∘ M) B with M_ij = [q_i · q_j > √threshold], q = √|diag|, for a square BSR A or a
    dense (n, n) A; float32 or float64, diag of A's dtype. The bounds and their products
    are float64, as in the core, so both backends keep the same entries. Entries outside M
    are replaced by zeros (torch.where), not multiplied by 0: a non-finite value there does
    not propagate, and gets a zero gradient."""
    q = diag.to(dtype=torch.float64, device=B.device).abs().sqrt()
    cut = math.sqrt(threshold)
    if not isinstance(A, BSRMatrix):
        return torch.where(q[:, None] * q[None, :] > cut, A, 0) @ B
    # M on the stored blocks only: the bounds of each block's rows times those of its
    # columns (the padding of edge blocks gets bound 0, so it is dropped).
    b = A.block_size
    q = _pad_rows(q, A.block_grid[0] * b).view(-1, b)
    rows = q[_entry_rows(A.block_row_ptrs, q.device)]
    cols = q[A.block_col_indices.to(q.device)]
    keep = rows[:, :, None] * cols[:, None, :] > cut
    return _product(A, torch.where(keep, A.blocks, 0), B).to(A.dtype)


def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, allowed: torch.Tensor, scale: float,
              alibi_slopes: torch.Tensor | None = None, softcap: float | None = None, return_lse: bool = False):
    """softmax over the allowed keys of the modified scores, times value, for query
    (B, H, Lq, E) and key, value (B, H, Lkv, E) (grouped-query heads already repeated).

    - `allowed`: bool, broadcastable to (B, H, Lq, Lkv): which (query, key) pairs count.
    - scores s = query · key · scale; with `alibi_slopes` (H slopes) s += slopes[h] ·
      (kv_idx − q_idx) for plain indices 0..Lkv−1 and 0..Lq−1; then with `softcap` c,
      s = c · tanh(s / c).
    - float32 and bfloat16 compute in float32, float64 in float64; the output is rounded
      to query's dtype once and has query's memory layout.

    A query row with no allowed key outputs zeros and gets zero gradients (never NaN:
    disallowed scores are −inf before the exponential and an empty row's shift is 0).
    Returns O, or (O, lse) with return_lse: lse (B, H, Lq) is the log-sum-exp of the
    allowed modified scores of each row (0 for an empty row), in the computation dtype
    and not differentiable (as from the C++ kernels)."""
    acc = _accumulation_dtype(query.dtype)
    q, k, v = (t.to(acc) for t in (query, key, value))
    s = q @ k.transpose(-1, -2) * scale
    Lq, Lkv = s.shape[-2:]
    if alibi_slopes is not None:
        distance = (torch.arange(Lkv, dtype=acc, device=s.device)
                    - torch.arange(Lq, dtype=acc, device=s.device)[:, None])
        s = s + alibi_slopes.to(dtype=acc, device=s.device)[:, None, None] * distance
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    s = torch.where(allowed.to(s.device), s, -math.inf)
    # The shift m (the row's log-sum-exp: every exponential <= 1) is a constant to
    # autograd; the normalisation by l carries the gradient, as with the usual row max.
    m = torch.logsumexp(s.detach(), -1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, 0)  # an empty row: m = -inf
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    # In query's dtype (one rounding) and memory layout, as the kernels write O: the
    # (B, H, L, E) view of a (B, L, H, E) projection gets an output of that layout.
    out = torch.empty_like(query).copy_((p @ v) / torch.where(l > 0, l, 1))
    if not return_lse:
        return out
    with torch.no_grad():
        lse = torch.where(l > 0, m + torch.log(l), 0)[..., 0]
    return out, lse


__all__ = ["attention", "bsr_spmm", "screened_spmm", "spmm", "spmv"]
