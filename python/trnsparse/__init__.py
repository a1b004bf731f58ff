"""trnsparse: block-sparse and sparse linear algebra for PyTorch on the trnsparse C++ core.

    import torch, trnsparse
    A = trnsparse.from_dense(torch.tensor([[2.0, 0.0], [0.0, 3.0]]))
    y = trnsparse.spmv(A, torch.ones(2))          # tensor([2., 3.])

Matrices are dataclasses of torch tensors (CSRMatrix, COOMatrix, BSRMatrix); operations
keep their dtype (float32, float64, bfloat16), raise ShapeError (an AssertionError) on
mismatched shapes and differentiate through spmm / spmv / bsr_spmm / screened_spmm.
Screening (schwarz_bounds, screen_quartets, density_screen, sparsity_stats,
screened_spmm) and BSR solvers (cg_bsr, chebyshev_bsr, richardson_bsr,
power_iteration_bsr, jacobi_preconditioner_bsr, chebyshev_coeffs) keep 0.6's contract.
sparse_attention runs the core's block-sparse attention on (batch, heads, seq, dim)
tensors (float32, bfloat16, float64) with autograd: per-head masks, grouped-query heads,
queries shorter than keys, and score modifiers (trnsparse.score: ALiBi, soft-capping).
trnsparse.mask builds its masks (builders, stack, create_block_mask from a predicate);
trnsparse.nn.MultiheadSparseAttention is the module. trnsparse.nn.BlockSparseLinear is a
block-sparse torch.nn.Linear (nn.sparsify converts a model's layers; trnsparse.prune picks
layouts by block magnitude, GradualPruner on a cubic schedule). block_sparse_attention_tiled is
0.6's single-head entry point. choose_format advises CSR or a BSR block size for a
matrix's products on this machine (BSRMatrix.from_csr(A, "auto") converts with it).
solve(A, b, method="cg"|"gmres"|"bicgstab", precond=...) solves CSR or BSR systems with
preconditioners built once (block_jacobi, ic0, ilu0, amg); as_linear_operator hands our matrices
and preconditioners to scipy's solvers. read_mtx and write_mtx read and write Matrix Market files with the core's reader and writer.
matmul (and `A @ B` for sparse A and B), matmul_transposed and galerkin are the sparse ×
sparse products (CSR × CSR, BSR × BSR), matmul differentiable in both operands.
"""
import importlib.util as _importlib_util
import os as _os

if _importlib_util.find_spec(f"{__name__}._core") is None:
    raise ImportError(
        f"trnsparse: the compiled module trnsparse._core is not in {_os.path.dirname(__file__)}. "
        "Importing from the source tree (python/) finds only the pure-Python files: build the package with "
        "`make build` and use PYTHONPATH=build/python, or install it with `pip install --no-build-isolation .`")
from . import _core  # noqa: E402 (after the check above)
from . import mask, nn, prune, score
from ._attention import AttentionMask, block_sparse_attention_tiled, sparse_attention
from ._backend import HAS_NKI, get_backend, set_backend
from ._advisor import choose_format
from ._formats import (BSRMatrix, COOMatrix, CSRMatrix, block_stencil3d, convdiff3d, elasticity3d,
                       elasticity3d_coordinates, eye_sparse, from_dense, from_scipy, named_problem, poisson3d,
                       random_blocks)
from ._krylov import Preconditioner, amg, as_linear_operator, block_jacobi, ic0, ilu0, rigid_body_modes
from ._io import read_mtx, write_mtx
from ._ops import (
    ShapeError,
    bsr_diagonal,
    bsr_spmm,
    nnz_per_row,
    sparse_add,
    sparse_scale,
    sparse_transpose,
    spmm,
    spmv,
    spmv_symmetric,
    triangle,
)
from ._spgemm import clear_spgemm_plan_cache, galerkin, matmul, matmul_transposed
from ._screening import density_screen, schwarz_bounds, screen_quartets, screened_spmm, sparsity_stats
from ._timing import Timing, measure, measure_pair
from ._solvers import (
    JacobiPreconditioner,
    cg_bsr,
    chebyshev_bsr,
    chebyshev_coeffs,
    jacobi_preconditioner_bsr,
    power_iteration_bsr,
    richardson_bsr,
    solve,
)

__version__ = _core.__version__


def set_num_threads(n: int) -> None:
    """Threads the C++ kernels use (results are bitwise identical for any count)."""
    _core.set_num_threads(int(n))


def get_num_threads() -> int:
    return int(_core.num_threads())


__all__ = [
    "BSRMatrix", "COOMatrix", "CSRMatrix", "HAS_NKI", "ShapeError", "__version__", "bsr_diagonal", "bsr_spmm",
    "eye_sparse", "from_dense", "from_scipy", "get_backend", "get_num_threads", "nnz_per_row", "set_backend",
    "set_num_threads", "sparse_add", "sparse_scale", "sparse_transpose", "spmm", "spmv", "spmv_symmetric", "triangle",
    # sparse × sparse products
    "clear_spgemm_plan_cache", "galerkin", "matmul", "matmul_transposed",
    # generated problems
    "block_stencil3d", "convdiff3d", "elasticity3d", "elasticity3d_coordinates", "named_problem", "poisson3d",
    "random_blocks",
    # the format advisor
    "choose_format",
    # timing products (the library's harness)
    "Timing", "measure", "measure_pair",
    # Matrix Market files
    "read_mtx", "write_mtx",
    # screening and solvers
    "density_screen", "schwarz_bounds", "screen_quartets", "screened_spmm", "sparsity_stats", "JacobiPreconditioner",
    "cg_bsr", "chebyshev_bsr", "chebyshev_coeffs", "jacobi_preconditioner_bsr", "power_iteration_bsr",
    "richardson_bsr", "solve",
    # Krylov solves and preconditioners (solve(method=, precond=), scipy LinearOperator views)
    "Preconditioner", "amg", "as_linear_operator", "block_jacobi", "ic0", "ilu0", "rigid_body_modes",
    # attention
    "AttentionMask", "block_sparse_attention_tiled", "mask", "nn", "score", "sparse_attention",
    # block-sparse weights (nn.BlockSparseLinear, nn.sparsify)
    "prune",
]
