"""Krylov solves for square CSR and BSR matrices, and preconditioners built once and
applied many times, on the C++ core (float32 and float64, the GIL released).

    A = trnsparse.named_problem("convdiff3d:32:2.0", dtype=torch.float64)
    x = trnsparse.solve(A, b, method="gmres", precond="ilu0", tol=1e-8)

    M = trnsparse.ic0(A)                  # an object: M(r) = M⁻¹ r, M.update(A_new)
    x = trnsparse.solve(A, b, precond=M)

`as_linear_operator` gives scipy's solvers a view of our matrices and preconditioners.
"""
from __future__ import annotations

import numbers

import torch

from . import _core
from ._formats import BSRMatrix, CSRMatrix, _scipy, from_scipy
from ._interop import as_tensor, check, dense_arg, dense_operand, from_array

_REAL = (torch.float32, torch.float64)
METHODS = ("cg", "gmres", "bicgstab")
PRECONDITIONERS = ("none", "jacobi", "bjacobi", "ic0", "ilu0", "amg")


def _matrix(A, who: str):
    """A as a square real CSRMatrix or BSRMatrix (a scipy.sparse matrix is converted)."""
    if type(A).__module__.startswith("scipy.sparse") and _scipy().issparse(A):
        A = from_scipy(A)
    if not isinstance(A, (CSRMatrix, BSRMatrix)):
        raise TypeError(f"{who}: A must be a CSRMatrix, BSRMatrix or scipy.sparse matrix, got {type(A).__name__}")
    if A.dtype not in _REAL:
        raise TypeError(f"{who}: dtype {A.dtype} is not supported (float32 or float64)")
    check(A.shape[0] == A.shape[1], f"{who}: A is {A.shape[0]} x {A.shape[1]}, not square")
    return A


class Preconditioner:
    """z = M⁻¹ r for a matrix A, built once by `block_jacobi`, `ic0`, `ilu0` or `amg`.
    Callable on a vector (a tensor of A's dtype and size); `update(A)` rebuilds it for new
    values on the same structure (and format). `name`, `shape` and `dtype` describe it;
    an AMG preconditioner also has `levels` ((rows, stored values, block size) per level)
    and `setup_seconds`."""

    def __init__(self, handle, A, who: str):
        self._handle = handle
        self._who = who
        self._format = type(A)
        self.dtype = A.dtype
        self.shape = tuple(A.shape)

    @property
    def name(self) -> str:
        return self._handle.name

    def __call__(self, r) -> torch.Tensor:
        r = dense_operand(as_tensor(r, self._who, "r"), self.dtype, 1, self._who, "r").contiguous()
        check(r.shape[0] == self.shape[0], f"{self._who}: r has {r.shape[0]} entries, expected {self.shape[0]}")
        z = torch.empty_like(r)
        self._handle.apply(dense_arg(r), dense_arg(z))
        return z

    def update(self, A) -> None:
        """Rebuilds M for A's new values; A must have the structure, format and dtype M was
        built from (ValueError otherwise)."""
        A = _matrix(A, f"{self._who}.update")
        if type(A) is not self._format:
            raise ValueError(f"{self._who}.update: A is a {type(A).__name__}, but the preconditioner was built "
                             f"from a {self._format.__name__}")
        if A.dtype != self.dtype:
            raise TypeError(f"{self._who}.update: A's dtype is {A.dtype}, the preconditioner's {self.dtype}")
        self._handle.update(A._handle())

    @property
    def levels(self) -> list[tuple[int, int, int]]:
        return list(self._handle.levels)

    @property
    def setup_seconds(self) -> float | None:
        return self._handle.setup_seconds

    def __repr__(self) -> str:
        return f"Preconditioner({self.name}, shape={self.shape}, dtype={self.dtype})"


def _build(kind: str, A, who: str, block_size: int = 0, near_nullspace=None, blocks: int = 1,
           **tuning) -> Preconditioner:
    A = _matrix(A, who)
    ns = None
    if near_nullspace is not None:
        ns = dense_operand(as_tensor(near_nullspace, who, "near_nullspace"), A.dtype, 2, who,
                           "near_nullspace").contiguous()
        check(ns.shape[0] == A.shape[0],
              f"{who}: near_nullspace has {ns.shape[0]} rows, expected A's {A.shape[0]}")
        check(ns.shape[1] >= 1, f"{who}: near_nullspace has no columns")
    if int(blocks) < 1:
        raise ValueError(f"{who}: blocks = {blocks} must be >= 1")
    handle = _core.make_preconditioner(kind, A._handle(), int(block_size), int(blocks),
                                       None if ns is None else dense_arg(ns), **tuning)
    return Preconditioner(handle, A, who)


def block_jacobi(A, block_size: int | None = None) -> Preconditioner:
    """The inverted diagonal blocks of A: a BSR matrix's own blocks, or `block_size`
    consecutive rows of a CSR matrix (default 1, point Jacobi). ValueError for a singular
    block, naming its rows."""
    if block_size is not None and int(block_size) < 1:
        raise ValueError(f"block_jacobi: block_size = {block_size} must be >= 1")
    return _build("bjacobi", A, "block_jacobi", 0 if block_size is None else int(block_size))


def ic0(A, blocks: int = 1) -> Preconditioner:
    """Incomplete Cholesky with zero fill, A ≈ L Lᵀ on A's lower triangle (A symmetric
    positive definite, given in full). ValueError naming the row of a non-positive pivot.
    blocks > 1: that many independent row blocks (block Jacobi with IC(0) inside), solved
    side by side on the threads; the same bits for any thread count."""
    return _build("ic0", A, "ic0", blocks=blocks)


def ilu0(A, blocks: int = 1) -> Preconditioner:
    """Incomplete LU with zero fill, A ≈ L U on A's pattern. ValueError naming the row of
    a zero pivot. blocks > 1: as for ic0."""
    return _build("ilu0", A, "ilu0", blocks=blocks)


def amg(A, near_nullspace=None, block_size: int | None = None, *, strength_threshold: float | None = None,
        max_coarse: int | None = None, max_levels: int | None = None, smoother_degree: int | None = None,
        prolongator_omega: float | None = None, mixed_precision: bool | None = None) -> Preconditioner:
    """Smoothed-aggregation algebraic multigrid (one V-cycle with Chebyshev smoothing per
    application), a preconditioner for CG on symmetric positive definite A. Aggregation
    runs on nodes of `block_size` unknowns (default: a BSR matrix's block size, else 1).
    near_nullspace: (n, k) modes the coarse levels must represent (default: a constant per
    unknown of a node; for elasticity, `rigid_body_modes(coordinates)`). The setup is
    threaded; `setup_seconds` reports it.

    Tuning (None keeps the library's default, given in brackets; `AmgOptions` in
    preconditioners.hpp says more): `strength_threshold` [0.0], θ in ||A_ij||² > θ²
    ||A_ii|| ||A_jj||, which connections aggregates grow over; `max_coarse` [1000], the
    rows at which coarsening stops (the last level is solved by dense Cholesky);
    `max_levels` [12]; `smoother_degree` [2], Chebyshev steps before and after each
    coarse correction; `prolongator_omega` [1.6], ω in P = (I - ω/λmax D⁻¹A) P_tentative;
    `mixed_precision` [True], for float64: the V-cycle reads fp32 copies of its CSR levels'
    values (a quarter fewer bytes a product; CG's own products stay float64).
    ValueError for a value out of range, naming it; TypeError for a wrong type."""
    if block_size is not None and int(block_size) < 1:
        raise ValueError(f"amg: block_size = {block_size} must be >= 1")
    tuning = {"strength_threshold": strength_threshold, "max_coarse": max_coarse, "max_levels": max_levels,
              "smoother_degree": smoother_degree, "prolongator_omega": prolongator_omega}
    for name, kind in (("max_coarse", numbers.Integral), ("max_levels", numbers.Integral),
                       ("smoother_degree", numbers.Integral), ("strength_threshold", numbers.Real),
                       ("prolongator_omega", numbers.Real)):
        value = tuning[name]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, kind):
            raise TypeError(f"amg: {name} must be {'an int' if kind is numbers.Integral else 'a float'}, "
                            f"got {type(value).__name__}")
        tuning[name] = int(value) if kind is numbers.Integral else float(value)
    if mixed_precision is not None and not isinstance(mixed_precision, bool):
        raise TypeError(f"amg: mixed_precision must be a bool, got {type(mixed_precision).__name__}")
    tuning["mixed_precision"] = mixed_precision
    return _build("amg", A, "amg", 0 if block_size is None else int(block_size), near_nullspace, **tuning)


def rigid_body_modes(coords, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The six rigid-body modes (three translations, three rotations about the centroid)
    of nodes at `coords` (nodes, 3), for 3 unknowns per node: a (3 nodes, 6) tensor, AMG's
    near-nullspace for elasticity (`elasticity3d_coordinates(n)` gives elasticity3d's)."""
    c = dense_operand(as_tensor(coords, "rigid_body_modes", "coords"), torch.float64, 2, "rigid_body_modes",
                      "coords").contiguous()
    check(c.shape[1] == 3, f"rigid_body_modes: coords has shape {tuple(c.shape)}, expected (nodes, 3)")
    if dtype not in _REAL:
        raise TypeError(f"rigid_body_modes: dtype {dtype} is not supported (float32 or float64)")
    return from_array(_core.rigid_body_modes(dense_arg(c), "float32" if dtype == torch.float32 else "float64"), dtype)


def _preconditioner(precond, A, method: str, who: str):
    """(core handle or None, Jacobi diagonal or None) for `precond`: a name or a Preconditioner."""
    if isinstance(precond, Preconditioner):
        if precond.dtype != A.dtype:
            raise TypeError(f"{who}: the preconditioner's dtype is {precond.dtype}, A's {A.dtype}")
        check(precond.shape == tuple(A.shape), f"{who}: the preconditioner is for a {precond.shape[0]} x "
                                                f"{precond.shape[1]} matrix, A is {A.shape[0]} x {A.shape[1]}")
        return precond._handle, None
    if not isinstance(precond, str):
        raise TypeError(f"{who}: precond must be a name {PRECONDITIONERS} or a Preconditioner, "
                        f"got {type(precond).__name__}")
    if precond not in PRECONDITIONERS:
        raise ValueError(f"{who}: precond = {precond!r}, expected one of {PRECONDITIONERS} or a Preconditioner")
    if precond == "none":
        return None, None
    if precond == "jacobi":
        # CG takes the diagonal into its fused passes; GMRES and BiCGStab a point block Jacobi.
        return (None, _jacobi_diagonal(A, who)) if method == "cg" else (block_jacobi(A, 1)._handle, None)
    builders = {"bjacobi": block_jacobi, "ic0": ic0, "ilu0": ilu0, "amg": amg}
    return builders[precond](A)._handle, None


def _jacobi_diagonal(A, who: str) -> torch.Tensor:
    d = _diagonal(A)
    if not bool(torch.all(torch.isfinite(d) & (d != 0))):
        bad = int((~(torch.isfinite(d) & (d != 0))).nonzero()[0])
        raise ValueError(f"{who}: Jacobi needs a finite, non-zero diagonal; A[{bad}, {bad}] = {float(d[bad])}")
    return (1.0 / d).contiguous()


def _diagonal(A) -> torch.Tensor:
    """diag(A) of a CSRMatrix or BSRMatrix, zeros where nothing is stored."""
    n = A.shape[0]
    if isinstance(A, BSRMatrix):
        from ._ops import bsr_diagonal

        return bsr_diagonal(A)
    rows = torch.repeat_interleave(torch.arange(n), A.row_ptrs[1:] - A.row_ptrs[:-1])
    on = A.col_indices.to(torch.int64) == rows
    d = torch.zeros(n, dtype=A.dtype)
    d[rows[on]] = A.values[on]
    return d


def krylov_solve(A, b, *, method: str = "cg", precond="jacobi", tol: float = 1e-10, max_iter: int | None = None,
                 restart: int = 30, x0=None, who: str = "solve"):
    """(x, iterations, relative residual, status) of the core's `method` on CSR or BSR A."""
    A = _matrix(A, who)
    if method not in METHODS:
        raise ValueError(f"{who}: method = {method!r}, expected one of {METHODS}")
    b = dense_operand(as_tensor(b, who, "b"), A.dtype, 1, who, "b").contiguous()
    check(b.shape[0] == A.shape[0], f"{who}: A is {A.shape[0]} x {A.shape[1]} but b has {b.shape[0]} entries")
    if x0 is not None:
        x0 = dense_operand(as_tensor(x0, who, "x0"), A.dtype, 1, who, "x0").contiguous()
        check(x0.shape[0] == A.shape[0], f"{who}: x0 has {x0.shape[0]} entries, expected {A.shape[0]}")
    if int(restart) < 1:
        raise ValueError(f"{who}: restart = {restart} must be >= 1")
    max_iter = 10 * A.shape[0] if max_iter is None else int(max_iter)
    handle, diagonal = _preconditioner(precond, A, method, who)
    x, iterations, rel, status = _core.krylov(method, A._handle(), dense_arg(b), None if x0 is None else dense_arg(x0),
                                              float(tol), max_iter, int(restart), handle,
                                              None if diagonal is None else dense_arg(diagonal))
    return from_array(x, A.dtype), int(iterations), float(rel), status


def as_linear_operator(obj):
    """A scipy.sparse.linalg.LinearOperator over a CSRMatrix or BSRMatrix (matvec A x,
    rmatvec Aᵀ x) or a Preconditioner (matvec M⁻¹ r), computing in the object's dtype on
    numpy vectors: scipy's own solvers (gmres, bicgstab, cg, ... with M=) can use ours."""
    from scipy.sparse.linalg import LinearOperator

    from ._ops import spmv, sparse_transpose

    def vector(x, n):
        t = torch.as_tensor(x.reshape(-1).copy(), dtype=dtype)
        check(t.shape[0] == n, f"as_linear_operator: vector of {t.shape[0]} entries, expected {n}")
        return t

    if isinstance(obj, Preconditioner):
        dtype = obj.dtype
        n = obj.shape[0]
        return LinearOperator(obj.shape, matvec=lambda x: obj(vector(x, n)).numpy(), dtype=_numpy_dtype(dtype))
    A = obj
    if not isinstance(A, (CSRMatrix, BSRMatrix)):
        raise TypeError(f"as_linear_operator: expected a CSRMatrix, BSRMatrix or Preconditioner, got {type(obj).__name__}")
    dtype = A.dtype
    if dtype not in _REAL:
        raise TypeError(f"as_linear_operator: dtype {dtype} is not supported (float32 or float64)")
    At = None

    def rmatvec(x):
        nonlocal At
        if At is None:
            At = sparse_transpose(A)
        return spmv(At, vector(x, A.shape[0])).numpy()

    return LinearOperator(tuple(A.shape), matvec=lambda x: spmv(A, vector(x, A.shape[1])).numpy(), rmatvec=rmatvec,
                          dtype=_numpy_dtype(dtype))


def _numpy_dtype(dtype: torch.dtype):
    import numpy as np

    return np.float32 if dtype == torch.float32 else np.float64
