"""Differentiable solves: cg_bsr and solve in b and A.blocks against torch.linalg.solve on
the same blocks densified differentiably (float64 and float32), gradcheck in float64
(b, and A.blocks along symmetric perturbations that keep A SPD), several right-hand
sides, every kind of preconditioner, the no-grad path unchanged, and the inverse-problem
example."""
import importlib.util
import pathlib

import pytest
import torch

import trnsparse as ts

N, BS = 21, 4  # 6 block rows, the last one padded
TOL = 1e-13
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "inverse_diffusion.py"


def spd_block_sparse(n=N, bs=BS, seed=0):
    """A dense SPD matrix (symmetric, diagonally dominant) whose zero blocks follow a
    symmetric block pattern that holds every diagonal block and leaves others out."""
    g = torch.Generator().manual_seed(seed)
    nb = -(-n // bs)
    keep = torch.rand(nb, nb, generator=g) < 0.4
    keep = keep | keep.t() | torch.eye(nb, dtype=torch.bool)
    mask = keep.repeat_interleave(bs, 0).repeat_interleave(bs, 1)[:n, :n]
    S = (torch.rand(n, n, generator=g, dtype=torch.float64) * 2 - 1) * mask
    S = (S + S.t()) / 2
    return S + torch.diag(S.abs().sum(1) + 1.0)


def densify(blocks, A):
    """A's dense logical matrix from `blocks` on A's pattern, differentiable in blocks."""
    bs = A.block_size
    br, bc = A.block_grid
    rows = torch.repeat_interleave(torch.arange(br), A.block_row_ptrs.diff())
    grid = torch.zeros(br, bc, bs, bs, dtype=blocks.dtype).index_put((rows, A.block_col_indices), blocks)
    return grid.permute(0, 2, 1, 3).reshape(br * bs, bc * bs)[:A.shape[0], :A.shape[1]]


def with_blocks(A, blocks):
    return ts.BSRMatrix(blocks, A.block_col_indices, A.block_row_ptrs, A.shape, A.block_size)


def symmetric_blocks(A):
    """θ -> (θ + θ mirrored) / 2, the block (i, j) mirrored from block (j, i) transposed:
    symmetric A for any θ, so a gradcheck perturbation keeps A SPD."""
    rows = torch.repeat_interleave(torch.arange(A.block_grid[0]), A.block_row_ptrs.diff()).tolist()
    position = {(i, j): k for k, (i, j) in enumerate(zip(rows, A.block_col_indices.tolist()))}
    mirror = torch.tensor([position[(j, i)] for (i, j) in position])
    return lambda theta: (theta + theta[mirror].transpose(-1, -2)) / 2


def rhs(shape, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)


def loss(x, weights):
    """A scalar with a non-trivial ∂L/∂x (quadratic and linear terms)."""
    return (weights * x).sum() + (x ** 2).sum()


def gradients(solve, A, b, weights):
    """(∂L/∂A.blocks, ∂L/∂b) of loss(solve(A, b)) for fresh leaves."""
    blocks = A.blocks.detach().clone().requires_grad_()
    b = b.detach().clone().requires_grad_()
    loss(solve(with_blocks(A, blocks), b), weights).backward()
    return blocks.grad, b.grad


def dense_solve(A, b):
    return torch.linalg.solve(densify(A.blocks, A), b)


@pytest.mark.parametrize("k", [None, 3], ids=["vector", "block"])
@pytest.mark.parametrize("preconditioner", ["none", "jacobi", "callable", "dense"])
def test_gradients_match_dense_solve(k, preconditioner):
    D = spd_block_sparse()
    A = ts.BSRMatrix.from_dense(D, block_size=BS)
    d = torch.diagonal(D)
    M = {"none": None, "jacobi": ts.jacobi_preconditioner_bsr(A), "callable": lambda r: r / d,
         "dense": torch.diag(1.0 / d)}[preconditioner]
    shape = (N,) if k is None else (N, k)
    b, weights = rhs(shape, seed=1), rhs(shape, seed=2)
    dA, db = gradients(lambda A, b: ts.cg_bsr(A, b, tol=TOL, M=M)[0], A, b, weights)
    dA_ref, db_ref = gradients(dense_solve, A, b, weights)
    assert dA.shape == A.blocks.shape and db.shape == b.shape
    assert torch.allclose(db, db_ref, rtol=0, atol=1e-11)
    assert torch.allclose(dA, dA_ref, rtol=0, atol=1e-11)  # the padded entries too: zero in both


@pytest.mark.parametrize("k", [None, 2], ids=["vector", "block"])
def test_gradcheck_b(k):
    A = ts.BSRMatrix.from_dense(spd_block_sparse(), block_size=BS)
    b = rhs((N,) if k is None else (N, k), seed=3).requires_grad_()
    assert torch.autograd.gradcheck(lambda b: ts.cg_bsr(A, b, tol=TOL)[0], (b,), nondet_tol=0)
    assert torch.autograd.gradcheck(lambda b: ts.solve(A, b, tol=TOL), (b,), nondet_tol=0)


@pytest.mark.parametrize("k", [None, 2], ids=["vector", "block"])
def test_gradcheck_symmetric_blocks(k):
    A = ts.BSRMatrix.from_dense(spd_block_sparse(n=13, seed=4), block_size=BS)
    sym = symmetric_blocks(A)
    theta = A.blocks.detach().clone().requires_grad_()
    b = rhs((13,) if k is None else (13, k), seed=5).requires_grad_()

    def f(theta, b):
        return ts.cg_bsr(with_blocks(A, sym(theta)), b, tol=TOL, M=ts.jacobi_preconditioner_bsr(A))[0]

    assert torch.autograd.gradcheck(f, (theta, b), nondet_tol=0)


@pytest.mark.parametrize("k", [None, 3], ids=["vector", "block"])
def test_float32_against_float64_reference(k):
    D = spd_block_sparse()
    A32 = ts.BSRMatrix.from_dense(D.float(), block_size=BS)
    A64 = ts.BSRMatrix.from_dense(A32.to_dense().double(), block_size=BS)
    shape = (N,) if k is None else (N, k)
    b, weights = rhs(shape, seed=6, dtype=torch.float32), rhs(shape, seed=7, dtype=torch.float32)
    dA, db = gradients(lambda A, b: ts.solve(A, b, tol=1e-6), A32, b, weights)
    dA_ref, db_ref = gradients(dense_solve, A64, b.double(), weights.double())
    assert dA.dtype == db.dtype == torch.float32
    assert float((db.double() - db_ref).abs().max()) <= 1e-4 * float(db_ref.abs().max())
    assert float((dA.double() - dA_ref).abs().max()) <= 1e-4 * float(dA_ref.abs().max())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("k", [None, 3], ids=["vector", "block"])
def test_forward_identical_with_and_without_autograd(dtype, k):
    A = ts.BSRMatrix.from_dense(spd_block_sparse().to(dtype), block_size=BS)
    b = rhs((N,) if k is None else (N, k), seed=8, dtype=dtype)
    for M in (None, ts.jacobi_preconditioner_bsr(A), lambda r: r):
        for tol, max_iter in ((1e-6, 1000), (1e-14, 3)):
            plain = ts.cg_bsr(A, b, tol=tol, max_iter=max_iter, M=M)
            assert plain[0].grad_fn is None
            tracked = ts.cg_bsr(A, b.clone().requires_grad_(), tol=tol, max_iter=max_iter, M=M)
            assert tracked[0].grad_fn is not None
            with torch.no_grad():
                untracked = ts.cg_bsr(A, b.clone().requires_grad_(), tol=tol, max_iter=max_iter, M=M)
            assert untracked[0].grad_fn is None and not untracked[0].requires_grad
            for run in (tracked, untracked):
                assert torch.equal(run[0].detach(), plain[0])
                if k is None:
                    assert run[1:] == plain[1:] and type(run[1]) is int and type(run[2]) is float
                else:
                    assert torch.equal(run[1], plain[1]) and torch.equal(run[2], plain[2])
                    assert not run[1].requires_grad and not run[2].requires_grad


def test_only_x_is_differentiable_and_x0_gets_no_gradient():
    A = ts.BSRMatrix.from_dense(spd_block_sparse(), block_size=BS)
    A.blocks.requires_grad_()
    b = rhs(N, seed=9).requires_grad_()
    x0 = rhs(N, seed=10).requires_grad_()
    x, iterations, residual = ts.cg_bsr(A, b, x0=x0, tol=TOL)
    x.sum().backward()
    assert x0.grad is None and b.grad is not None
    # The gradient lives on the stored blocks only: A.blocks' shape, no dense n x n.
    assert A.blocks.grad.shape == A.blocks.shape == (A.n_blocks, BS, BS)
    B = rhs((N, 2), seed=11).requires_grad_()
    X, its, rels = ts.cg_bsr(A, B, tol=TOL)
    assert X.requires_grad and not its.requires_grad and not rels.requires_grad


def test_unconverged_forward_gradient_is_the_adjoint_formula_at_x():
    D = spd_block_sparse()
    A = ts.BSRMatrix.from_dense(D, block_size=BS)
    A.blocks.requires_grad_()
    b = rhs(N, seed=12).requires_grad_()
    x, iterations, residual = ts.cg_bsr(A, b, tol=TOL, max_iter=2)
    assert iterations == 2 and residual > TOL
    g = rhs(N, seed=13)
    x.backward(g)
    lam = ts.cg_bsr(A, g, tol=TOL, max_iter=2)[0]  # the backward's own two steps
    assert torch.equal(b.grad, lam)
    expected = -torch.outer(lam, x.detach())
    assert torch.allclose(densify(A.blocks.grad, A), expected * (densify(A.blocks.detach(), A) != 0), atol=1e-14)


def test_solve_matches_jacobi_cg_and_reports_non_convergence():
    D = spd_block_sparse()
    A = ts.BSRMatrix.from_dense(D, block_size=BS)
    b = rhs((N, 2), seed=14)
    x = ts.solve(A, b)
    assert torch.equal(x, ts.cg_bsr(A, b, tol=1e-10, max_iter=10 * N, M=ts.jacobi_preconditioner_bsr(A))[0])
    assert torch.allclose(x, torch.linalg.solve(D, b), rtol=0, atol=1e-9)
    with pytest.raises(RuntimeError, match=r"solve: .*right-hand side 0.* did not converge: relative residual .* "
                                           r"after 1 iterations"):
        ts.solve(A, b, max_iter=1)
    with pytest.raises(TypeError, match="solve: A must be a CSRMatrix, BSRMatrix or scipy.sparse matrix"):
        ts.solve(D, b)
    with pytest.raises(TypeError, match="solve: b has dtype torch.float32"):
        ts.solve(A, b.float())
    # The backward's adjoint solve is held to tol too: here M is exact for the forward's
    # one preconditioning and the identity after, so one iteration solves only the forward.
    calls = []

    def exact_once(r):
        calls.append(r)
        return torch.linalg.solve(D, r) if len(calls) == 1 else r

    blocks = A.blocks.clone().requires_grad_()
    x = ts.solve(with_blocks(A, blocks), b[:, 0], max_iter=1, M=exact_once)
    with pytest.raises(RuntimeError, match=r"solve: CG for the gradient .* did not converge: relative residual .* "
                                           r"after 1 iterations"):
        x.sum().backward()


def test_inverse_diffusion_example_loss_decreases():
    spec = importlib.util.spec_from_file_location("inverse_diffusion", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    losses, error = example.main(steps=5, log_every=0)
    assert len(losses) == 5 and losses[-1] < losses[0]
    assert error < 1.0
