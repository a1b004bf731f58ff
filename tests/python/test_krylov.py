"""Krylov solves (solve(method=, precond=)) and preconditioner objects against dense
float64 references (torch.linalg.solve), scipy's solvers through as_linear_operator, and
the error rules: a failed solve raises, bad input names the argument."""
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg as sla
import torch

import trnsparse as ts

METHODS = ["cg", "gmres", "bicgstab"]
NAMED = ["none", "jacobi", "bjacobi", "ic0", "ilu0"]


def rhs(n, dtype=torch.float64, seed=0):
    return torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def relres(A, x, b):
    r = b.double() - ts.spmv(A, x).double()
    return float(r.norm() / b.double().norm())


@pytest.mark.parametrize("method", ["gmres", "bicgstab"])
@pytest.mark.parametrize("precond", NAMED[:3] + ["ilu0"])
def test_nonsymmetric_matches_dense(method, precond):
    A = ts.convdiff3d(7, 2.5)
    b = rhs(A.shape[0])
    x = ts.solve(A, b, method=method, precond=precond, tol=1e-11)
    want = torch.linalg.solve(A.to_dense(), b)
    assert torch.allclose(x, want, rtol=0, atol=1e-8 * float(want.abs().max()))
    assert relres(A, x, b) <= 1e-11 * 1.01


@pytest.mark.parametrize("precond", NAMED)
@pytest.mark.parametrize("fmt", ["csr", "bsr"])
def test_cg_every_preconditioner(precond, fmt):
    P = ts.poisson3d(6)
    A = P if fmt == "csr" else ts.BSRMatrix.from_csr(P, 3)
    b = rhs(P.shape[0])
    x = ts.solve(A, b, precond=precond, tol=1e-10)
    assert torch.allclose(x, torch.linalg.solve(P.to_dense(), b), rtol=0, atol=1e-8)


def test_preconditioner_objects():
    A = ts.convdiff3d(6, 1.0)
    M = ts.ilu0(A)
    assert M.name == "ilu0" and M.shape == tuple(A.shape) and M.dtype == torch.float64
    assert "ilu0" in repr(M)
    r = rhs(A.shape[0], seed=3)
    # ILU(0) of a matrix is exact on a tridiagonal one; here, M⁻¹ A is close to I.
    z = M(ts.spmv(A, r))
    assert float((z - r).norm() / r.norm()) < 0.5
    x = ts.solve(A, r, method="gmres", precond=M, tol=1e-10)
    assert relres(A, x, r) <= 1e-10 * 1.01
    # update: new values on the same structure give a fresh factorisation's result.
    A2 = ts.CSRMatrix(A.values * 2.0, A.col_indices, A.row_ptrs, A.shape)
    M.update(A2)
    assert torch.equal(M(r), ts.ilu0(A2)(r))
    with pytest.raises(ValueError, match="structure"):
        D = A.to_dense()
        D[0, 1] = 0.0  # one entry fewer
        M.update(ts.from_dense(D))
    with pytest.raises(ValueError, match="BSRMatrix"):
        M.update(ts.BSRMatrix.from_csr(A, 3))
    with pytest.raises(TypeError, match="dtype"):
        M.update(ts.convdiff3d(6, 1.0, dtype=torch.float32))
    with pytest.raises(ValueError, match="entries"):
        M(torch.ones(5, dtype=torch.float64))


def test_blocked_factorisations():
    A = ts.convdiff3d(12, 1.0)
    b = rhs(A.shape[0])
    for blocks in (1, 3):
        M = ts.ilu0(A, blocks=blocks)
        x = ts.solve(A, b, method="gmres", precond=M, tol=1e-10)
        assert relres(A, x, b) <= 1e-10 * 1.01
    assert not torch.equal(ts.ilu0(A, blocks=3)(b), ts.ilu0(A)(b))
    P = ts.poisson3d(10)
    x = ts.solve(P, b[:P.shape[0]], precond=ts.ic0(P, blocks=2), tol=1e-10)
    assert relres(P, x, b[:P.shape[0]]) <= 1e-10 * 1.01
    with pytest.raises(ValueError, match="blocks"):
        ts.ilu0(A, blocks=0)


def test_block_jacobi_on_elasticity():
    A = ts.elasticity3d(3)
    B = ts.BSRMatrix.from_csr(A, 3)
    b = rhs(A.shape[0])
    r1 = ts.block_jacobi(B)(b)
    r2 = ts.block_jacobi(A, 3)(b)
    assert torch.allclose(r1, r2, rtol=1e-14, atol=0)
    D = A.to_dense()
    blocks = torch.block_diag(*[D[i:i + 3, i:i + 3] for i in range(0, A.shape[0], 3)])
    assert torch.allclose(r1, torch.linalg.solve(blocks, b), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="block_size"):
        ts.block_jacobi(A, 0)
    with pytest.raises(ValueError, match="divid"):
        ts.block_jacobi(A, 5)


def test_float32():
    A = ts.convdiff3d(6, 1.0, dtype=torch.float32)
    b = rhs(A.shape[0], torch.float32)
    for method in ["gmres", "bicgstab"]:
        x = ts.solve(A, b, method=method, precond="ilu0", tol=1e-5)
        assert x.dtype == torch.float32
        assert relres(A, x, b) < 2e-5


def test_cg_with_object_is_differentiable():
    P = ts.poisson3d(5)
    A = ts.BSRMatrix.from_csr(P, 5)
    b = rhs(P.shape[0]).requires_grad_()
    x = ts.solve(A, b, precond=ts.ic0(A), tol=1e-12)
    x.sum().backward()
    # ∂(1ᵀ A⁻¹ b)/∂b = A⁻¹ 1 (A symmetric).
    want = torch.linalg.solve(P.to_dense(), torch.ones(P.shape[0], dtype=torch.float64))
    assert torch.allclose(b.grad, want, rtol=0, atol=1e-9)


def test_scipy_linear_operator():
    A = ts.convdiff3d(8, 2.0)
    b = rhs(A.shape[0]).numpy()
    op, M = ts.as_linear_operator(A), ts.as_linear_operator(ts.ilu0(A))
    S = scipy.sparse.csr_matrix((A.values.numpy(), A.col_indices.numpy(), A.row_ptrs.numpy()), shape=A.shape)
    v = rhs(A.shape[0], seed=5).numpy()
    assert np.allclose(op.matvec(v), S @ v, rtol=0, atol=1e-13)
    assert np.allclose(op.rmatvec(v), S.T @ v, rtol=0, atol=1e-13)
    x, info = sla.gmres(op, b, M=M, tol=1e-10, atol=0)
    assert info == 0
    assert np.linalg.norm(S @ x - b) / np.linalg.norm(b) < 1e-9
    # A scipy matrix goes into solve directly.
    y = ts.solve(S, torch.from_numpy(b), method="bicgstab", precond="ilu0", tol=1e-10)
    assert np.linalg.norm(S @ y.numpy() - b) / np.linalg.norm(b) < 1.1e-10
    with pytest.raises(TypeError, match="as_linear_operator"):
        ts.as_linear_operator(np.eye(3))


def test_failures_raise():
    A = ts.convdiff3d(8, 1.0)
    b = rhs(A.shape[0])
    with pytest.raises(RuntimeError, match=r"gmres with precond none did not converge \(max_iterations\).*after 3 "):
        ts.solve(A, b, method="gmres", precond="none", max_iter=3)
    # BiCGStab breaks down on [[0, 1], [1, 0]] x = e0.
    S = ts.from_dense(torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64))
    with pytest.raises(RuntimeError, match="breakdown"):
        ts.solve(S, torch.tensor([1.0, 0.0], dtype=torch.float64), method="bicgstab", precond="none")
    with pytest.raises(ValueError, match="zero pivot at row 1"):
        ts.ilu0(ts.from_dense(torch.tensor([[1.0, 1.0], [1.0, 1.0]], dtype=torch.float64)))
    with pytest.raises(ValueError, match="non-positive pivot at row 1"):
        ts.ic0(ts.from_dense(torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64)))


def test_argument_errors():
    A = ts.convdiff3d(4, 1.0)
    b = rhs(A.shape[0])
    with pytest.raises(ValueError, match="method"):
        ts.solve(A, b, method="minres")
    with pytest.raises(ValueError, match="precond"):
        ts.solve(A, b, method="gmres", precond="ssor")
    with pytest.raises(TypeError, match="precond"):
        ts.solve(A, b, method="gmres", precond=3)
    with pytest.raises(ValueError, match="restart"):
        ts.solve(A, b, method="gmres", restart=0)
    with pytest.raises(ts.ShapeError, match="b has 5 entries"):
        ts.solve(A, torch.ones(5, dtype=torch.float64), method="gmres")
    with pytest.raises(ValueError, match=r"b\[2\]"):
        bad = b.clone()
        bad[2] = float("nan")
        ts.solve(A, bad, method="bicgstab")
    with pytest.raises(ts.ShapeError, match="square"):
        ts.solve(ts.from_dense(torch.ones(2, 3, dtype=torch.float64)), torch.ones(2, dtype=torch.float64))
    with pytest.raises(TypeError, match="bfloat16"):
        ts.solve(ts.convdiff3d(3, 1.0, dtype=torch.bfloat16), torch.ones(27, dtype=torch.bfloat16), method="gmres")
    with pytest.raises(TypeError, match="dtype"):
        ts.solve(A, b, method="gmres", precond=ts.ilu0(ts.convdiff3d(4, 1.0, dtype=torch.float32)))
    with pytest.raises(ValueError, match="gradients"):
        ts.solve(A, b.clone().requires_grad_(), method="gmres")
    with pytest.raises(ValueError, match="not both"):
        ts.solve(ts.BSRMatrix.from_csr(ts.poisson3d(3), 3), torch.ones(27, dtype=torch.float64), precond="ic0",
                 M=lambda r: r)


def test_amg():
    A = ts.poisson3d(16)
    b = rhs(A.shape[0])
    M = ts.amg(A)
    assert M.name == "amg" and M.setup_seconds >= 0
    levels = M.levels
    assert levels[0][0] == A.shape[0] and len(levels) >= 2 and all(lv[2] == 1 for lv in levels)
    x = ts.solve(A, b, precond=M, tol=1e-10)
    assert relres(A, x, b) <= 1e-10 * 1.01
    # A V-cycle is symmetric: uᵀ M⁻¹ v == vᵀ M⁻¹ u.
    u, v = rhs(A.shape[0], seed=1), rhs(A.shape[0], seed=2)
    assert abs(float(u @ M(v) - v @ M(u))) < 1e-10 * float(u.norm() * M(v).norm())
    # update with scaled values: M⁻¹ scales inversely.
    A2 = ts.CSRMatrix(A.values * 4.0, A.col_indices, A.row_ptrs, A.shape)
    z = M(b)
    M.update(A2)
    assert torch.allclose(M(b), z / 4.0, rtol=1e-10, atol=0)


def test_amg_tuning():
    A = ts.poisson3d(12)
    b = rhs(A.shape[0])
    # Each option reaches the hierarchy: max_coarse and max_levels its depth and last
    # level, smoother_degree and prolongator_omega the V-cycle (a different M⁻¹ b).
    default = ts.amg(A)
    assert len(ts.amg(A, max_levels=1).levels) == 1
    assert ts.amg(A, max_coarse=10 ** 6).levels == default.levels[:1]
    assert len(ts.amg(A, max_coarse=20).levels) > len(default.levels)
    assert ts.amg(A, max_coarse=np.int64(20)).levels == ts.amg(A, max_coarse=20).levels  # any integer type
    z = default(b)
    assert torch.equal(ts.amg(A, prolongator_omega=1.6, smoother_degree=2)(b), z)  # the defaults
    # mixed_precision: poisson3d's 6 and -1 are exact in fp32, the smoothed coarse levels' values not.
    assert not torch.equal(ts.amg(A, max_coarse=20, mixed_precision=False)(b), ts.amg(A, max_coarse=20)(b))
    assert torch.equal(ts.amg(A, mixed_precision=True)(b), z)
    for tuned in (ts.amg(A, smoother_degree=3), ts.amg(A, prolongator_omega=4 / 3),
                  ts.amg(A, strength_threshold=0.25)):
        assert not torch.equal(tuned(b), z)
        x = ts.solve(A, b, precond=tuned, tol=1e-10)
        assert relres(A, x, b) <= 1e-10 * 1.01
    for name, bad in (("smoother_degree", 0), ("max_coarse", 0), ("max_levels", 0), ("prolongator_omega", 0.0),
                      ("prolongator_omega", float("nan")), ("strength_threshold", -1.0)):
        with pytest.raises(ValueError, match=f"options.{name} ="):
            ts.amg(A, **{name: bad})
    with pytest.raises(TypeError, match="smoother_degree must be an int"):
        ts.amg(A, smoother_degree=2.5)
    with pytest.raises(TypeError, match="max_levels must be an int"):
        ts.amg(A, max_levels=True)
    with pytest.raises(TypeError, match="prolongator_omega must be a float"):
        ts.amg(A, prolongator_omega="1.6")
    with pytest.raises(TypeError, match="mixed_precision must be a bool"):
        ts.amg(A, mixed_precision=1)


def test_amg_elasticity_with_rigid_body_modes():
    n = 8
    A = ts.elasticity3d(n)
    B = ts.BSRMatrix.from_csr(A, 3)
    modes = ts.rigid_body_modes(ts.elasticity3d_coordinates(n))
    assert modes.shape == (A.shape[0], 6)
    # The rigid-body modes are A's near-nullspace: away from the clamped face, A · mode ≈ 0.
    b = rhs(A.shape[0])
    its = {}
    for name, M in (("constants", ts.amg(B)), ("rigid", ts.amg(B, near_nullspace=modes))):
        x, iterations, rel = ts.cg_bsr(B, b, tol=1e-9, max_iter=500, M=M)
        assert rel <= 1e-9
        its[name] = iterations
    assert its["rigid"] <= its["constants"]
    with pytest.raises(ValueError, match="near_nullspace has 5 rows"):
        ts.amg(A, near_nullspace=torch.ones(5, 6, dtype=torch.float64), block_size=3)
    with pytest.raises(ValueError, match="block_size"):
        ts.amg(A, block_size=0)
    with pytest.raises(ts.ShapeError, match="coords"):
        ts.rigid_body_modes(torch.ones(4, 2, dtype=torch.float64))
