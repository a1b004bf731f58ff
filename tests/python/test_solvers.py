"""BSR solvers against dense float64 references (torch.linalg): CG with every kind of
preconditioner, Chebyshev and Richardson against their closed forms, power iteration
against eigvalsh, and the dtype, shape and error rules."""
import math

import pytest
import torch

import trnsparse as ts

REAL = [torch.float32, torch.float64]


def poisson2d(m, dtype=torch.float64):
    """The 5-point Laplacian on an m x m grid (SPD, n = m²)."""
    T = 2 * torch.eye(m, dtype=torch.float64) - torch.diag(torch.ones(m - 1, dtype=torch.float64), 1) \
        - torch.diag(torch.ones(m - 1, dtype=torch.float64), -1)
    eye = torch.eye(m, dtype=torch.float64)
    return (torch.kron(T, eye) + torch.kron(eye, T)).to(dtype)


def spd_with_gap(n, seed):
    """Q diag(λ) Qᵀ with λ in [1, 2] and a dominant λ = 4."""
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    lam = torch.linspace(1.0, 2.0, n, dtype=torch.float64)
    lam[-1] = 4.0
    return (Q * lam) @ Q.t()


def rhs(n, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=g, dtype=torch.float64).to(dtype) + 0.5


@pytest.fixture
def problem():
    D = poisson2d(7)  # n = 49 in blocks of 8: padded edge blocks
    return D, ts.BSRMatrix.from_dense(D, block_size=8), rhs(49, seed=1)


@pytest.mark.parametrize("dtype", REAL, ids=["float32", "float64"])
def test_cg_matches_dense_solve(dtype):
    D = poisson2d(7, dtype)
    A, b = ts.BSRMatrix.from_dense(D, block_size=8), rhs(49, seed=2, dtype=dtype)
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    x, iterations, rel = ts.cg_bsr(A, b, tol=tol)
    assert x.dtype == dtype and x.shape == (49,)
    assert type(iterations) is int and type(rel) is float
    assert 0 < iterations <= 49 and rel <= tol
    exact = torch.linalg.solve(D.double(), b.double())
    assert float((x.double() - exact).norm() / exact.norm()) < 100 * tol
    true_rel = float((b.double() - D.double() @ x.double()).norm() / b.double().norm())
    assert true_rel < 10 * tol


def test_cg_preconditioners_agree(problem):
    D, A, b = problem
    d = torch.diagonal(D)
    jacobi = ts.jacobi_preconditioner_bsr(A)
    core = ts.cg_bsr(A, b, tol=1e-10, M=jacobi)  # the core's Jacobi CG
    python_callable = ts.cg_bsr(A, b, tol=1e-10, M=lambda r: r / d)
    dense = ts.cg_bsr(A, b, tol=1e-10, M=torch.diag(1.0 / d))
    for x, iterations, rel in (python_callable, dense):
        assert iterations == core[1]
        assert rel <= 1e-10 and abs(rel - core[2]) <= 1e-12
        assert torch.allclose(x, core[0], rtol=0, atol=1e-12)
    exact = torch.linalg.solve(D, b)
    assert torch.allclose(core[0], exact, rtol=0, atol=1e-8)
    # the exact inverse as M: one iteration
    x, iterations, rel = ts.cg_bsr(A, b, tol=1e-10, M=torch.linalg.inv(D))
    assert iterations == 1 and torch.allclose(x, exact, rtol=0, atol=1e-10)


def test_cg_zero_rhs_initial_guess_and_limits(problem):
    D, A, b = problem
    zero = torch.zeros(49, dtype=torch.float64)
    assert [type(v) for v in ts.cg_bsr(A, zero)] == [torch.Tensor, int, float]
    x, iterations, rel = ts.cg_bsr(A, zero)
    assert torch.equal(x, zero) and iterations == 0 and rel == 0.0
    x0 = rhs(49, seed=3)
    for M in (None, lambda r: r):
        x, iterations, rel = ts.cg_bsr(A, zero, x0=x0, M=M)
        assert torch.equal(x, x0) and iterations == 0 and rel == 0.0
    exact = torch.linalg.solve(D, b)
    x, iterations, rel = ts.cg_bsr(A, b, x0=exact)  # already solved
    assert iterations == 0 and rel <= 1e-6
    x, iterations, rel = ts.cg_bsr(A, b, x0=x0, tol=1e-10)
    assert torch.allclose(x, exact, rtol=0, atol=1e-8)
    for M in (None, lambda r: r):
        x, iterations, rel = ts.cg_bsr(A, b, tol=1e-14, max_iter=3, M=M)
        assert iterations == 3 and rel > 1e-14


def test_cg_breakdown_keeps_a_finite_iterate():
    A = ts.BSRMatrix.from_dense(-torch.eye(6, dtype=torch.float64), block_size=4)  # not SPD
    b = rhs(6, seed=4)
    for M in (None, lambda r: r):
        x, iterations, rel = ts.cg_bsr(A, b, M=M)
        assert iterations == 0 and rel == 1.0 and torch.equal(x, torch.zeros(6, dtype=torch.float64))


def test_jacobi_preconditioner(problem):
    D, A, _ = problem
    M = ts.jacobi_preconditioner_bsr(A)
    r = rhs(49, seed=5)
    assert torch.allclose(M(r), r / torch.diagonal(D), rtol=0, atol=1e-15)
    singular = D.clone()
    singular[3, 3] = 0.0
    with pytest.raises(ValueError):
        ts.jacobi_preconditioner_bsr(ts.BSRMatrix.from_dense(singular, block_size=8))


def _template_coeffs(lmin, lmax, K):
    """The Chebyshev iteration of Barrett et al., "Templates", written out in float64."""
    d, c = (lmax + lmin) / 2, (lmax - lmin) / 2
    alpha, beta = [], []
    for k in range(K):
        if k == 0:
            b = 0.0
        elif k == 1:
            b = (c * alpha[0]) ** 2 / 2
        else:
            b = (c * alpha[k - 1] / 2) ** 2
        alpha.append(1 / d if k == 0 else 1 / (d - b / alpha[k - 1]))
        beta.append(b)
    return alpha, beta


def test_chebyshev_coeffs_convention():
    alpha, beta = ts.chebyshev_coeffs(0.5, 7.5, 12)
    assert alpha.dtype == torch.float32 and beta.dtype == torch.float32 and alpha.shape == beta.shape == (12,)
    assert alpha[0].item() == pytest.approx(1 / 4.0) and beta[0].item() == 0.0
    ref_alpha, ref_beta = _template_coeffs(0.5, 7.5, 12)
    assert torch.allclose(alpha.double(), torch.tensor(ref_alpha, dtype=torch.float64), rtol=1e-6, atol=0)
    assert torch.allclose(beta.double(), torch.tensor(ref_beta, dtype=torch.float64), rtol=1e-6, atol=0)
    assert ts.chebyshev_coeffs(1.0, 2.0, 0)[0].shape == (0,)
    for lmin, lmax in [(0.0, 1.0), (2.0, 1.0), (-1.0, 1.0)]:
        with pytest.raises(ValueError):
            ts.chebyshev_coeffs(lmin, lmax, 5)


@pytest.mark.parametrize("dtype", REAL, ids=["float32", "float64"])
def test_chebyshev_meets_its_error_bound(dtype):
    D = poisson2d(7)
    A, b = ts.BSRMatrix.from_dense(D.to(dtype), block_size=8), rhs(49, seed=6, dtype=dtype)
    lam = torch.linalg.eigvalsh(D)
    lmin, lmax, K = float(lam[0]), float(lam[-1]), 25
    x, steps, rel = ts.chebyshev_bsr(A, b, lmin, lmax, K=K)
    assert x.dtype == dtype and steps == K and type(steps) is int and type(rel) is float
    exact = torch.linalg.solve(D, b.double())

    def a_norm(e):
        return math.sqrt(float(e @ D @ e))

    sigma = (lmax + lmin) / (lmax - lmin)
    bound = 1 / math.cosh(K * math.acosh(sigma))  # 1 / T_K(σ)
    slack = 1e-9 if dtype == torch.float64 else 1e-4
    assert a_norm(x.double() - exact) <= bound * a_norm(exact) + slack
    assert rel == pytest.approx(float((b.double() - D @ x.double()).norm() / b.double().norm()), rel=1e-3, abs=1e-6)
    x_warm, _, _ = ts.chebyshev_bsr(A, b, lmin, lmax, K=K, x0=x)
    assert a_norm(x_warm.double() - exact) <= a_norm(x.double() - exact) + slack


def test_richardson_matches_the_dense_recurrence():
    D = poisson2d(5)
    A, b, x0 = ts.BSRMatrix.from_dense(D, block_size=4), rhs(25, seed=7), rhs(25, seed=8)
    omega, K = 1.0 / 8.0, 40
    for start in (None, x0):
        x_ref = torch.zeros(25, dtype=torch.float64) if start is None else start.clone()
        for _ in range(K):
            x_ref = x_ref + omega * (b - D @ x_ref)
        x, steps, rel = ts.richardson_bsr(A, b, omega, K=K, x0=start)
        assert steps == K and torch.allclose(x, x_ref, rtol=0, atol=1e-12)
        assert rel == pytest.approx(float((b - D @ x_ref).norm() / b.norm()), rel=1e-9)
    with pytest.raises(ValueError):
        ts.richardson_bsr(A, b, float("nan"))


@pytest.mark.parametrize("dtype", REAL, ids=["float32", "float64"])
def test_power_iteration_against_eigvalsh(dtype):
    D = spd_with_gap(20, seed=9)
    A = ts.BSRMatrix.from_dense(D.to(dtype), block_size=8)
    tol = 1e-9 if dtype == torch.float64 else 1e-5
    for v0 in (None, rhs(20, seed=10, dtype=dtype)):
        lam, v, iterations = ts.power_iteration_bsr(A, v0=v0, max_iter=500, tol=tol)
        assert type(lam) is float and type(iterations) is int and v.dtype == dtype
        assert 0 < iterations < 500
        assert lam == pytest.approx(4.0, rel=10 * tol)
        assert float(v.double().norm()) == pytest.approx(1.0, abs=10 * tol)
        assert float((D @ v.double() - lam * v.double()).norm()) <= 100 * tol * abs(lam)
    lam, v, iterations = ts.power_iteration_bsr(A, max_iter=2)
    assert iterations == 2
    with pytest.raises(ValueError):
        ts.power_iteration_bsr(A, v0=torch.zeros(20, dtype=dtype))


def test_solver_errors(problem):
    D, A, b = problem
    with pytest.raises(TypeError, match="BSRMatrix"):
        ts.cg_bsr(ts.from_dense(D), b)
    with pytest.raises(AssertionError, match="not square"):
        ts.cg_bsr(ts.BSRMatrix.from_dense(D[:48], block_size=8), b)
    with pytest.raises(AssertionError, match="entries"):
        ts.cg_bsr(A, b[:48])
    with pytest.raises(TypeError, match="dtype"):
        ts.cg_bsr(A, b.float())
    with pytest.raises(TypeError, match="bfloat16"):
        ts.cg_bsr(ts.BSRMatrix.from_dense(D.bfloat16(), block_size=8), b.bfloat16())
    with pytest.raises(AssertionError, match="M has shape"):
        ts.cg_bsr(A, b, M=torch.eye(48, dtype=torch.float64))
    with pytest.raises(AssertionError, match="M\\(r\\)"):
        ts.cg_bsr(A, b, M=lambda r: r[:3])
    with pytest.raises(ValueError, match="tol"):
        ts.cg_bsr(A, b, tol=-1.0)
    with pytest.raises(ValueError, match="tol"):
        ts.cg_bsr(A, b, tol=-1.0, M=lambda r: r)
    with pytest.raises(AssertionError, match="x0"):
        ts.chebyshev_bsr(A, b, 0.1, 8.0, x0=b[:5])
    with pytest.raises(TypeError, match="BSRMatrix"):
        ts.power_iteration_bsr(D)


# ---- several right-hand sides ------------------------------------------------------------

def rhs_block(n, k, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, k, generator=g, dtype=torch.float64) + 0.5).to(dtype)


@pytest.mark.parametrize("dtype", REAL, ids=["float32", "float64"])
def test_cg_several_right_hand_sides_match_dense_solve_and_single_columns(dtype):
    D = poisson2d(7, dtype)
    A = ts.BSRMatrix.from_dense(D, block_size=8)
    B = rhs_block(49, 4, seed=5, dtype=dtype)
    B[:, 2] *= 1e3  # columns of different scales converge independently
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    X, iterations, rel = ts.cg_bsr(A, B, tol=tol)
    assert X.dtype == dtype and X.shape == (49, 4)
    assert iterations.dtype == torch.int64 and iterations.shape == (4,)
    assert rel.dtype == torch.float64 and rel.shape == (4,)
    exact = torch.linalg.solve(D.double(), B.double())
    for j in range(4):
        assert 0 < int(iterations[j]) <= 49 and float(rel[j]) <= tol
        err = float((X[:, j].double() - exact[:, j]).norm() / exact[:, j].norm())
        assert err < 100 * tol, (j, err)
        x, its, _ = ts.cg_bsr(A, B[:, j].contiguous(), tol=tol)
        assert int(iterations[j]) == its  # one column's solve (summed in another order)
        assert float((X[:, j].double() - x.double()).norm() / x.double().norm()) < 10 * tol


def test_cg_several_right_hand_sides_with_x0_zero_columns_and_preconditioners(problem):
    D, A, _ = problem
    B = rhs_block(49, 3, seed=6)
    B[:, 1] = 0.0
    X0 = rhs_block(49, 3, seed=7)
    X, iterations, rel = ts.cg_bsr(A, B, x0=X0, tol=1e-10)
    assert torch.equal(X[:, 1], X0[:, 1]) and int(iterations[1]) == 0 and float(rel[1]) == 0.0
    exact = torch.linalg.solve(D, B)
    assert float((X[:, [0, 2]] - exact[:, [0, 2]]).abs().max()) < 1e-7
    jacobi = ts.jacobi_preconditioner_bsr(A)
    diag = torch.diagonal(D)
    for M in (jacobi, lambda r: r / diag, torch.diag(1 / diag)):
        Xm, its, rels = ts.cg_bsr(A, B, tol=1e-10, M=M)
        assert float((Xm - exact).abs().max()) < 1e-7
        assert int(its[1]) == 0 and float(rels[1]) == 0.0 and torch.equal(Xm[:, 1], torch.zeros(49, dtype=torch.float64))
        assert bool((rels <= 1e-10).all())


def test_cg_several_right_hand_sides_errors(problem):
    _, A, _ = problem
    B = rhs_block(49, 2, seed=8)
    with pytest.raises(AssertionError, match="b has 48 rows"):
        ts.cg_bsr(A, B[:48])
    with pytest.raises(AssertionError, match="x0 has shape"):
        ts.cg_bsr(A, B, x0=B[:, :1])
    with pytest.raises(TypeError, match="dtype"):
        ts.cg_bsr(A, B.float())
    with pytest.raises(ValueError, match="tol"):
        ts.cg_bsr(A, B, tol=-1.0)
