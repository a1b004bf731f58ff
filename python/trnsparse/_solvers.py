"""Iterative solvers over a square BSR operator (float32 / float64), as in trnsparse 0.6.

`cg_bsr` with no preconditioner or the Jacobi preconditioner of
`jacobi_preconditioner_bsr`, `chebyshev_bsr`, `richardson_bsr` and `power_iteration_bsr`
(from the default start) run the core's solvers: one call, the GIL released, fused passes
and a fixed reduction order. The core's CG takes only a diagonal preconditioner, and its
power iteration only its own fixed start; so CG with another callable or a dense M, and
power iteration from a given v0, iterate here in Python over the core's SpMV with the same
stopping rules.

`cg_bsr` and `solve` differentiate through the solve in b and A.blocks (A symmetric
positive-definite): the backward is one more CG solve for the adjoint λ = A⁻¹ ∂L/∂x, and
A's gradient −λ xᵀ is the core's sampled product on A's stored blocks.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch.autograd.function import once_differentiable

from . import _core
from ._formats import BSRMatrix
from ._interop import as_tensor, check, dense_arg, dense_operand, from_array
from ._krylov import PRECONDITIONERS, Preconditioner, _matrix, amg, block_jacobi, ic0, ilu0, krylov_solve

_REAL = (torch.float32, torch.float64)


class JacobiPreconditioner:
    """M⁻¹ r = r / diag(A): callable on a residual like any preconditioner, and recognised
    by `cg_bsr`, which then runs the core's Jacobi-preconditioned CG."""

    def __init__(self, inv_diag: torch.Tensor):
        self.inv_diag = inv_diag

    def __call__(self, r: torch.Tensor) -> torch.Tensor:
        return r * self.inv_diag

    def __repr__(self) -> str:
        return f"JacobiPreconditioner(n={self.inv_diag.shape[0]}, dtype={self.inv_diag.dtype})"


def _operator(A, who: str) -> BSRMatrix:
    if not isinstance(A, BSRMatrix):
        raise TypeError(f"{who}: A must be a BSRMatrix, got {type(A).__name__}")
    if A.dtype not in _REAL:
        raise TypeError(f"{who}: dtype {A.dtype} is not supported (float32 or float64)")
    check(A.shape[0] == A.shape[1], f"{who}: A is {A.shape[0]} x {A.shape[1]}, not square")
    return A


def _vector(x, A: BSRMatrix, who: str, name: str) -> torch.Tensor:
    x = dense_operand(x, A.dtype, 1, who, name).contiguous()
    check(x.shape[0] == A.shape[0], f"{who}: A is {A.shape[0]} x {A.shape[1]} but {name} has {x.shape[0]} entries")
    return x


def _optional_vector(x, A: BSRMatrix, who: str, name: str):
    return None if x is None else dense_arg(_vector(x, A, who, name))


def _dot(a: torch.Tensor, b: torch.Tensor) -> float:
    """aᵀb summed in float64."""
    return float(torch.dot(a.double(), b.double()))


def _result(A: BSRMatrix, res) -> tuple[torch.Tensor, int, float]:
    x, iterations, rel, _status = res
    return from_array(x, A.dtype), int(iterations), float(rel)


def cg_bsr(A, b, x0=None, tol: float = 1e-6, max_iter: int = 1000,
           M: Callable[[torch.Tensor], torch.Tensor] | torch.Tensor | None = None):
    """Conjugate gradients for A x = b (A SPD): (x, iterations, relative residual), until
    ||b - A x|| / ||b|| <= tol or max_iter iterations; a breakdown (pᵀAp <= 0, rᵀz <= 0 or
    a non-finite value) returns the last finite iterate. M: None, a callable r -> M⁻¹ r
    (a `jacobi_preconditioner_bsr` runs in the core) or a dense (n, n) M⁻¹.
    b = 0 returns (x0 or zeros, 0, 0.0).

    Several right-hand sides: b of shape (n, k) (x0, if given, too) returns (X of shape
    (n, k), iterations as an int64 tensor (k,), relative residuals as a float64 tensor
    (k,)); column j is what cg_bsr gives for b[:, j] (its own α, β and convergence). With
    M None or a Jacobi preconditioner the core solves all columns at once (one n x k
    product per iteration); with another M, column by column.

    Autograd: when grad mode is on and b or A.blocks requires grad, x is differentiable
    in both (x itself is the same as without autograd). The backward solves A λ = ∂L/∂x
    by CG with the same tol, max_iter and M (A symmetric, so Aᵀ = A) and returns ∂L/∂b = λ
    and ∂L/∂A.blocks = −λ xᵀ (−Λ Xᵀ for several right-hand sides) on A's stored blocks
    only, A.blocks' shape, never a dense n x n matrix. x0 gets no gradient, nor do the
    iterations and residuals. The formula is the gradient of A⁻¹ b; when the forward
    stopped above tol (max_iter or a breakdown) it is evaluated at the x returned and is
    then approximate."""
    who = "cg_bsr"
    return _cg(_operator(A, who), b, x0, tol, max_iter, M, who, strict=False)


def _cg(A: BSRMatrix, b, x0, tol, max_iter, M, who: str, strict: bool):
    """cg_bsr on a checked A, through `_CGSolve` when b or A.blocks needs a gradient;
    `strict` makes that backward raise when its adjoint solve stops above tol."""
    b = as_tensor(b, who, "b")
    if torch.is_grad_enabled() and (b.requires_grad or A.blocks.requires_grad):
        return _CGSolve.apply(b, A.blocks, A, x0, tol, max_iter, M, who, strict)
    return _cg_solve(A, b, x0, tol, max_iter, M, who)


def _cg_solve(A: BSRMatrix, b: torch.Tensor, x0, tol, max_iter, M, who: str):
    """cg_bsr without autograd."""
    if b.dim() == 2:
        return _cg_block(A, b, x0, tol, max_iter, M, who)
    if isinstance(M, Preconditioner):  # the core's CG with the object's z = M⁻¹ r
        if not bool(b.any()):
            return (torch.zeros_like(b) if x0 is None else _vector(x0, A, who, "x0").clone()), 0, 0.0
        x, iterations, rel, _status = krylov_solve(A, b, method="cg", precond=M, tol=tol, max_iter=max_iter,
                                                   x0=x0, who=who)
        return x, iterations, rel
    b = _vector(b, A, who, "b")
    x0 = None if x0 is None else _vector(x0, A, who, "x0")
    tol, max_iter = float(tol), int(max_iter)
    if not bool(b.any()):
        return (torch.zeros_like(b) if x0 is None else x0.clone()), 0, 0.0
    if M is None or isinstance(M, JacobiPreconditioner):
        minv = None if M is None else dense_arg(_vector(M.inv_diag, A, who, "M.inv_diag"))
        return _result(A, _core.cg(A._handle(), dense_arg(b), None if x0 is None else dense_arg(x0), tol, max_iter,
                                   minv))
    if not callable(M):
        Mt = dense_operand(M, A.dtype, 2, who, "M")
        check(tuple(Mt.shape) == tuple(A.shape), f"{who}: M has shape {tuple(Mt.shape)}, expected {tuple(A.shape)}")
        M = Mt.__matmul__
    return _preconditioned_cg(A, b, x0, tol, max_iter, M, who)


def _require_converged(who: str, tol: float, iterations, residuals, what: str) -> None:
    """RuntimeError naming the iterations and the relative residual of the first column
    (of one or several right-hand sides) that stopped above tol."""
    residuals = torch.as_tensor(residuals, dtype=torch.float64).reshape(-1)
    iterations = torch.as_tensor(iterations).reshape(-1)
    failed = (~(residuals <= tol)).nonzero()
    if failed.numel():
        j = int(failed[0])
        column = f" (right-hand side {j})" if residuals.numel() > 1 else ""
        raise RuntimeError(f"{who}: CG for {what}{column} did not converge: relative residual "
                           f"{float(residuals[j]):.3e} > tol = {tol:g} after {int(iterations[j])} iterations")


class _CGSolve(torch.autograd.Function):
    """(x, iterations, residuals) of `_cg_solve`, x differentiable in b and A's stored
    blocks for SPD A: λ = A⁻¹ ∂L/∂x by CG with the forward's tol, max_iter and M, then
    ∂L/∂b = λ and ∂L/∂A.blocks = −λ xᵀ sampled on A's blocks by the core's sampled_matmul
    (the SDDMM half of C = αAB's gradient; its dense half is discarded)."""

    @staticmethod
    def forward(ctx, b, blocks, A: BSRMatrix, x0, tol, max_iter, M, who: str, strict: bool):
        x, iterations, residuals = _cg_solve(A, b, x0, tol, max_iter, M, who)
        ctx.handle = A._handle()  # the core matrix this solve used (cached), for backward
        ctx.structure = (A.block_col_indices, A.block_row_ptrs, A.shape, A.block_size)
        ctx.solve = (tol, max_iter, M, who, strict)
        ctx.save_for_backward(blocks, x)
        if isinstance(iterations, torch.Tensor):
            ctx.mark_non_differentiable(iterations, residuals)
        return x, iterations, residuals

    @staticmethod
    @once_differentiable
    def backward(ctx, dx, _diterations, _dresiduals):
        blocks, x = ctx.saved_tensors
        tol, max_iter, M, who, strict = ctx.solve
        A = BSRMatrix(blocks.detach(), *ctx.structure)
        A._core_cache = ctx.handle
        lam, iterations, residuals = _cg_solve(A, dx, None, tol, max_iter, M, who)
        if strict:
            _require_converged(who, float(tol), iterations, residuals, "the gradient (A λ = ∂L/∂x)")
        dblocks = None
        if ctx.needs_input_grad[1]:
            X, L = (x, lam) if x.dim() == 2 else (x.unsqueeze(1), lam.unsqueeze(1))
            dA = _core.sampled_matmul(-1.0, ctx.handle, dense_arg(L.contiguous()), dense_arg(X.contiguous()))
            dblocks = from_array(dA.values(), x.dtype).view(blocks.shape)
        return lam if ctx.needs_input_grad[0] else None, dblocks, None, None, None, None, None, None, None


def solve(A, b, *, method: str = "cg", precond="jacobi", tol: float = 1e-10, max_iter: int | None = None,
          restart: int = 30, M: Callable[[torch.Tensor], torch.Tensor] | torch.Tensor | None = None) -> torch.Tensor:
    """x = A⁻¹ b for a square CSRMatrix, BSRMatrix or scipy.sparse matrix A.

    method: "cg" (A symmetric positive definite), "gmres" (restarted every `restart`
    iterations) or "bicgstab" (any nonsingular A; both preconditioned on the right).
    precond: "none", "jacobi", "bjacobi" (A's diagonal blocks), "ic0", "ilu0", "amg", or a
    Preconditioner object from block_jacobi / ic0 / ilu0 / amg, built once and reused (and
    `update`d for new values). M (0.6's contract, BSR CG only): a callable r -> M⁻¹ r or a
    dense M⁻¹ instead of precond. max_iter None allows 10 n iterations.

    CG on a BSRMatrix is differentiable in b (of shape (n,) or (n, k)) and A.blocks, as
    cg_bsr is; the other solves take one right-hand side (n,) and no gradient (ValueError
    when one is asked for). RuntimeError, naming the iterations, the relative residual
    and how the solve ended, when it stops above tol (or, in backward, the adjoint solve
    does): a failed solve never returns."""
    who = "solve"
    if M is not None:
        if not (isinstance(precond, str) and precond == "jacobi"):
            raise ValueError(f"{who}: give precond or M, not both")
        precond = M
    A = _matrix(A, who)
    b = as_tensor(b, who, "b")
    grad = torch.is_grad_enabled() and (b.requires_grad or (A.blocks if isinstance(A, BSRMatrix) else A.values).requires_grad)
    if method == "cg" and isinstance(A, BSRMatrix) and (grad or b.dim() == 2 or not isinstance(precond, (str, Preconditioner))):
        A = _operator(A, who)
        tol = float(tol)
        max_iter = 10 * A.shape[0] if max_iter is None else int(max_iter)
        if isinstance(precond, str):
            precond = (None if precond == "none" else jacobi_preconditioner_bsr(A) if precond == "jacobi"
                       else _named(precond, A, who))
        x, iterations, residuals = _cg(A, b, None, tol, max_iter, precond, who, strict=True)
        _require_converged(who, tol, iterations, residuals, "A x = b")
        return x
    if grad:
        raise ValueError(f"{who}: gradients flow through method='cg' on a BSRMatrix only (here method={method!r} on a "
                         f"{type(A).__name__}); convert with BSRMatrix.from_csr or detach b and A")
    x, iterations, rel, status = krylov_solve(A, b, method=method, precond=precond, tol=tol, max_iter=max_iter,
                                              restart=restart, who=who)
    if status != "converged":
        name = precond.name if isinstance(precond, Preconditioner) else precond
        raise RuntimeError(f"{who}: {method} with precond {name} did not converge ({status}): relative residual "
                           f"{rel:.3e} > tol = {float(tol):g} after {iterations} iterations")
    return x


def _named(precond: str, A: BSRMatrix, who: str) -> Preconditioner:
    """The Preconditioner a name other than none / jacobi builds for A."""
    builders = {"bjacobi": block_jacobi, "ic0": ic0, "ilu0": ilu0, "amg": amg}
    if precond not in builders:
        raise ValueError(f"{who}: precond = {precond!r}, expected one of {PRECONDITIONERS} or a Preconditioner")
    return builders[precond](A)


def _cg_block(A: BSRMatrix, B, X0, tol: float, max_iter: int, M, who: str):
    """cg_bsr for B of shape (n, k): (X, iterations (k,), relative residuals (k,))."""
    B = dense_operand(B, A.dtype, 2, who, "b").contiguous()
    n, k = B.shape
    check(n == A.shape[0], f"{who}: A is {A.shape[0]} x {A.shape[1]} but b has {n} rows")
    if X0 is not None:
        X0 = dense_operand(X0, A.dtype, 2, who, "x0").contiguous()
        check(tuple(X0.shape) == (n, k), f"{who}: x0 has shape {tuple(X0.shape)}, expected {(n, k)} (as b)")
    if M is None or isinstance(M, JacobiPreconditioner):
        minv = None if M is None else dense_arg(_vector(M.inv_diag, A, who, "M.inv_diag"))
        X, its, rels, _status = _core.cg_block(A._handle(), dense_arg(B), None if X0 is None else dense_arg(X0),
                                               float(tol), int(max_iter), minv)
        X, its, rels = from_array(X, A.dtype), from_array(its), from_array(rels)
        zero = ~B.any(dim=0)  # b = 0 columns: x0 (the core gives zeros), as for one column
        if X0 is not None and bool(zero.any()):
            X[:, zero] = X0[:, zero]
        return X, its, rels
    columns = [_cg_solve(A, B[:, j].contiguous(), None if X0 is None else X0[:, j].contiguous(), tol, max_iter, M,
                         who) for j in range(k)]
    X = torch.stack([c[0] for c in columns], dim=1) if k else torch.zeros(n, 0, dtype=A.dtype)
    return (X, torch.tensor([c[1] for c in columns], dtype=torch.int64),
            torch.tensor([c[2] for c in columns], dtype=torch.float64))


def _preconditioned_cg(A: BSRMatrix, b, x0, tol: float, max_iter: int, M, who: str):
    """The core's CG iteration (same checks and statuses) with z = M(r) from Python."""
    if not tol >= 0.0:
        raise ValueError(f"{who}: tol = {tol} must be >= 0")
    if max_iter < 0:
        raise ValueError(f"{who}: max_iter = {max_iter} must be >= 0")
    n = A.shape[0]
    h = A._handle()

    def apply(v: torch.Tensor) -> torch.Tensor:
        out = torch.empty(n, dtype=A.dtype)
        _core.spmv(1.0, h, dense_arg(v), 0.0, dense_arg(out))
        return out

    def precondition(r: torch.Tensor) -> torch.Tensor:
        z = as_tensor(M(r), who, "M(r)")
        check(tuple(z.shape) == (n,), f"{who}: M(r) has shape {tuple(z.shape)}, expected ({n},)")
        return z.to(A.dtype)

    x = torch.zeros_like(b) if x0 is None else x0.clone()
    r = b.clone() if x0 is None else b - apply(x)
    bb = _dot(b, b)
    rel = math.sqrt(_dot(r, r) / bb)
    z = precondition(r)
    rz = _dot(r, z)
    if rel <= tol or not (rz > 0.0 and math.isfinite(rz)):
        return x, 0, rel
    p = z.clone()
    iterations = 0
    for it in range(1, max_iter + 1):
        q = apply(p)
        pq = _dot(p, q)
        alpha = rz / pq if pq != 0.0 else math.inf
        if not (pq > 0.0 and math.isfinite(alpha)):
            break
        x_next, r_next = x + alpha * p, r - alpha * q
        rel_next = math.sqrt(_dot(r_next, r_next) / bb)
        if not math.isfinite(rel_next):
            break
        x, r, rel, iterations = x_next, r_next, rel_next, it
        if rel <= tol:
            break
        z = precondition(r)
        rz_next = _dot(r, z)
        if not (rz_next > 0.0 and math.isfinite(rz_next)):
            break
        p = z + (rz_next / rz) * p
        rz = rz_next
    return x, iterations, rel


def jacobi_preconditioner_bsr(A) -> JacobiPreconditioner:
    """M⁻¹ = 1 / diag(A) as a callable r -> r / diag(A). ValueError unless every diagonal
    entry is finite and non-zero (naming the first that is not)."""
    A = _operator(A, "jacobi_preconditioner_bsr")
    return JacobiPreconditioner(from_array(_core.jacobi_preconditioner(A._handle()), A.dtype))


def chebyshev_coeffs(lam_min: float, lam_max: float, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(alpha, beta), K float32 values each, of the Chebyshev iteration for eigenvalues in
    [lam_min, lam_max] (0 < lam_min < lam_max): p_k = r_k + beta_k p_{k-1},
    x_{k+1} = x_k + alpha_k p_k, with alpha_0 = 1/d, beta_0 = 0, d = (lam_max + lam_min)/2.
    From the core's recurrence d_k = a_k d_{k-1} + c_k r_k (d_k = alpha_k p_k):
    alpha_k = c_k, beta_k = a_k c_{k-1} / c_k."""
    a, c = (torch.from_numpy(v) for v in _core.chebyshev_coeffs(float(lam_min), float(lam_max), int(K)))
    beta = torch.zeros_like(a)
    beta[1:] = a[1:] * c[:-1] / c[1:]
    return c.to(torch.float32), beta.to(torch.float32)


def chebyshev_bsr(A, b, lam_min: float, lam_max: float, K: int = 50, x0=None):
    """K Chebyshev steps for SPD A with spectrum in [lam_min, lam_max] (no inner product
    inside the loop): (x, K, relative residual ||b - A x|| / ||b||)."""
    who = "chebyshev_bsr"
    A = _operator(A, who)
    b = _vector(b, A, who, "b")
    return _result(A, _core.chebyshev(A._handle(), dense_arg(b), float(lam_min), float(lam_max), int(K),
                                      _optional_vector(x0, A, who, "x0")))


def richardson_bsr(A, b, omega: float, K: int = 100, x0=None):
    """K Richardson steps x += omega (b - A x): (x, K, relative residual)."""
    who = "richardson_bsr"
    A = _operator(A, who)
    b = _vector(b, A, who, "b")
    return _result(A, _core.richardson(A._handle(), dense_arg(b), float(omega), int(K),
                                       _optional_vector(x0, A, who, "x0")))


def power_iteration_bsr(A, v0=None, max_iter: int = 100, tol: float = 1e-9):
    """The eigenvalue of largest magnitude of a symmetric A: (λ as a float, unit
    eigenvector, iterations). v <- A v / ||A v||, λ = vᵀ A v, until ||A v - λ v|| <= tol |λ|
    or max_iter products; from v0 (normalised) or the core's fixed pseudo-random start."""
    who = "power_iteration_bsr"
    A = _operator(A, who)
    max_iter, tol = int(max_iter), float(tol)
    if v0 is None:
        lam, v, iterations, _converged = _core.power_iteration(A._handle(), max_iter, tol)
        return float(lam), from_array(v, A.dtype), int(iterations)
    if max_iter < 0:
        raise ValueError(f"{who}: max_iter = {max_iter} must be >= 0")
    if not tol >= 0.0:
        raise ValueError(f"{who}: tol = {tol} must be >= 0")
    v = _vector(v0, A, who, "v0")
    vv = _dot(v, v)
    if not (vv > 0.0 and math.isfinite(vv)):
        raise ValueError(f"{who}: v0 must be finite and non-zero")
    v = (v.double() / math.sqrt(vv)).to(A.dtype)
    h = A._handle()
    lam, iterations = 0.0, 0
    for it in range(1, max_iter + 1):
        y = torch.empty_like(v)
        _core.spmv(1.0, h, dense_arg(v), 0.0, dense_arg(y))
        lam_it, yy = _dot(v, y), _dot(y, y)
        if not math.isfinite(yy):
            break
        lam, iterations = lam_it, it
        if yy == 0.0:
            break
        e = y.double() - lam * v.double()
        residual = math.sqrt(_dot(e, e))
        v = (y.double() / math.sqrt(yy)).to(A.dtype)
        if residual <= tol * abs(lam):
            break
    return lam, v, iterations


__all__ = ["JacobiPreconditioner", "cg_bsr", "solve", "jacobi_preconditioner_bsr", "chebyshev_coeffs",
           "chebyshev_bsr", "richardson_bsr", "power_iteration_bsr"]
