"""Screening: the elementwise helpers against their definitions, and screened_spmm (core
kernel) against a dense float64 masked product, with gradcheck and the error cases."""
import math

import pytest
import torch

import trnsparse as ts
from conftest import assert_close, random_dense, random_dense_operand

REAL = [torch.float32, torch.float64]


def test_schwarz_bounds_any_shape_and_dtype():
    x = random_dense_operand(6, 4, seed=1).reshape(2, 3, 4)
    for dtype in REAL:
        Q = ts.schwarz_bounds(x.to(dtype))
        assert Q.shape == (2, 3, 4) and Q.dtype == dtype
        assert_close(Q, x.to(dtype).double().abs().sqrt(), dtype)
    assert ts.schwarz_bounds(torch.tensor(-4.0)).item() == 2.0


def test_screen_quartets_is_strict_and_boolean():
    Q = torch.tensor([[0.25, 0.5], [0.75, 0.0]], dtype=torch.float64)
    mask = ts.screen_quartets(Q, threshold=0.25)  # √0.25 = 0.5: kept iff Q > 0.5
    assert mask.dtype == torch.bool
    assert mask.tolist() == [[False, False], [True, False]]
    assert bool(ts.screen_quartets(Q, threshold=0.0).sum() == 3)
    with pytest.raises(ValueError):
        ts.screen_quartets(Q, threshold=-1.0)


def test_density_screen_uses_the_global_max_of_p_times_q():
    Q = ts.schwarz_bounds(random_dense_operand(5, 5, seed=2))
    P = random_dense_operand(5, 5, seed=3)
    for threshold in [1e-10, 0.05, 0.3, 10.0]:
        bound = max(abs(float(P[i, j])) * float(Q[i, j]) for i in range(5) for j in range(5))
        expected = [[float(Q[i, j]) * bound > threshold for j in range(5)] for i in range(5)]
        assert ts.density_screen(Q, P, threshold).tolist() == expected
    assert ts.density_screen(torch.zeros(0, 0), torch.zeros(0, 0)).shape == (0, 0)
    with pytest.raises(AssertionError, match="P has shape"):
        ts.density_screen(Q, P[:4])


def test_sparsity_stats_keys_and_values():
    Q = torch.tensor([[1.0, 1e-6, 0.0], [1e-6, 2.0, 0.5], [0.0, 0.5, 3.0]], dtype=torch.float64)
    stats = ts.sparsity_stats(Q, threshold=1e-10)  # kept iff Q > 1e-5: 5 pairs
    assert list(stats) == ["n_shells", "total_pairs", "significant_pairs", "pair_sparsity", "total_quartets",
                           "significant_quartets_upper", "quartet_sparsity_lower"]
    assert stats == {"n_shells": 3, "total_pairs": 9, "significant_pairs": 5, "pair_sparsity": 1.0 - 5 / 9,
                     "total_quartets": 81, "significant_quartets_upper": 25, "quartet_sparsity_lower": 1.0 - 25 / 81}
    assert all(type(stats[k]) is int for k in ["n_shells", "total_pairs", "significant_pairs", "total_quartets",
                                               "significant_quartets_upper"])
    assert type(stats["pair_sparsity"]) is float and type(stats["quartet_sparsity_lower"]) is float
    assert ts.sparsity_stats(torch.zeros(0, 0))["pair_sparsity"] == 0.0
    with pytest.raises(AssertionError, match="square"):
        ts.sparsity_stats(torch.ones(2, 3))


def _reference(D, diag, B, threshold):
    q = diag.double().abs().sqrt()
    mask = (q[:, None] * q[None, :]) > math.sqrt(threshold)
    return (D.double() * mask) @ B.double()


def _bounds(n, kind, seed):
    if kind == "decaying":
        return torch.exp(-0.5 * torch.arange(n, dtype=torch.float64))
    return random_dense_operand(n, 1, seed=seed)[:, 0]


@pytest.mark.parametrize("dtype", REAL, ids=["float32", "float64"])
@pytest.mark.parametrize("kind", ["random", "decaying"])
@pytest.mark.parametrize("threshold", [0.0, 1e-6, 1e-2, 0.3])
def test_screened_spmm_against_dense_reference(dtype, kind, threshold):
    n, b = 37, 8
    D = random_dense(n, n, 0.5, seed=4, dtype=dtype)
    diag = _bounds(n, kind, seed=5).to(dtype)
    B = random_dense_operand(n, 3, seed=6, dtype=dtype)
    expected = _reference(D, diag, B, threshold)
    C = ts.screened_spmm(ts.BSRMatrix.from_dense(D, block_size=b), diag, B, threshold)
    assert C.dtype == dtype
    assert_close(C, expected, dtype)
    assert_close(ts.screened_spmm(D, diag, B, threshold), expected, dtype)  # dense A, as in 0.6


def test_screened_spmm_huge_threshold_gives_exact_zeros():
    D = random_dense(20, 20, 0.6, seed=7)
    C = ts.screened_spmm(ts.BSRMatrix.from_dense(D, block_size=4), torch.ones(20, dtype=torch.float64),
                         random_dense_operand(20, 2, seed=8), 1e30)
    assert torch.equal(C, torch.zeros(20, 2, dtype=torch.float64))


@pytest.mark.parametrize("threshold", [1e-3, 0.2])
def test_gradcheck_screened_spmm_bsr(threshold):
    n, b = 11, 4
    A = ts.BSRMatrix.from_dense(random_dense(n, n, 0.5, seed=9), block_size=b)
    diag = _bounds(n, "decaying", seed=0)
    blocks = A.blocks.clone().requires_grad_()
    B = random_dense_operand(n, 3, seed=10).requires_grad_()

    def f(bl, B):
        return ts.screened_spmm(ts.BSRMatrix(bl, A.block_col_indices, A.block_row_ptrs, A.shape, b), diag, B,
                                threshold)

    assert torch.autograd.gradcheck(f, (blocks, B), nondet_tol=0)


def test_gradcheck_screened_spmm_dense_a():
    n = 9
    D = random_dense(n, n, 0.7, seed=11).requires_grad_()
    B = random_dense_operand(n, 2, seed=12).requires_grad_()
    diag = _bounds(n, "random", seed=13)
    assert torch.autograd.gradcheck(lambda D, B: ts.screened_spmm(D, diag, B, 0.05), (D, B), nondet_tol=0)


def test_screened_spmm_gradients_against_dense_and_none_to_bounds():
    n = 13
    D = random_dense(n, n, 0.5, seed=14)
    diag = _bounds(n, "decaying", seed=0).requires_grad_()
    A = ts.BSRMatrix.from_dense(D, block_size=4)
    A.blocks.requires_grad_()
    B = random_dense_operand(n, 2, seed=15).requires_grad_()
    G = random_dense_operand(n, 2, seed=16)
    threshold = 1e-3
    ts.screened_spmm(A, diag, B, threshold).backward(G)
    q = diag.detach().abs().sqrt()
    mask = (q[:, None] * q[None, :]) > math.sqrt(threshold)
    assert diag.grad is None
    assert_close(B.grad, (D * mask).t() @ G, torch.float64)
    dense_grad = ts.BSRMatrix(A.blocks.grad, A.block_col_indices, A.block_row_ptrs, A.shape, 4).to_dense()
    stored = ts.BSRMatrix(torch.ones_like(A.blocks), A.block_col_indices, A.block_row_ptrs, A.shape, 4).to_dense()
    assert_close(dense_grad, (G @ B.detach().t()) * mask * stored, torch.float64)


def test_screened_spmm_errors():
    D = random_dense(6, 6, 0.5, seed=17)
    A = ts.BSRMatrix.from_dense(D, block_size=4)
    d, B = torch.ones(6, dtype=torch.float64), torch.ones(6, 2, dtype=torch.float64)
    with pytest.raises(AssertionError, match="diag_integrals"):
        ts.screened_spmm(A, torch.ones(5, dtype=torch.float64), B, 0.1)
    with pytest.raises(AssertionError, match="rows"):
        ts.screened_spmm(A, d, torch.ones(5, 2, dtype=torch.float64), 0.1)
    with pytest.raises(AssertionError, match="not square"):
        ts.screened_spmm(D[:5], d, B, 0.1)
    with pytest.raises(TypeError, match="dtype"):
        ts.screened_spmm(A, d, B.float(), 0.1)
    with pytest.raises(TypeError, match="bfloat16"):
        ts.screened_spmm(D.bfloat16(), d, B.bfloat16(), 0.1)
    with pytest.raises(ValueError, match="threshold"):
        ts.screened_spmm(A, d, B, -1.0)
