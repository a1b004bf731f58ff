"""Autograd of spmm / spmv / bsr_spmm through the core's spmm_backward: gradcheck in
float64 (nondet_tol=0) and gradients against dense references in every dtype."""
import pytest
import torch

import trnsparse as ts
from conftest import assert_close, random_dense, random_dense_operand


def _csr(m, n, seed):
    return ts.from_dense(random_dense(m, n, 0.4, seed=seed))


def _bsr(m, n, b, seed):
    return ts.BSRMatrix.from_dense(random_dense(m, n, 0.4, seed=seed), block_size=b)


@pytest.mark.parametrize("m,n,k", [(5, 4, 3), (9, 7, 2)])
def test_gradcheck_spmm_csr(m, n, k):
    A = _csr(m, n, seed=m)
    values = A.values.clone().requires_grad_()
    B = random_dense_operand(n, k, seed=1).requires_grad_()

    def f(v, B):
        return ts.spmm(ts.CSRMatrix(v, A.col_indices, A.row_ptrs, A.shape), B, alpha=0.75)

    assert torch.autograd.gradcheck(f, (values, B), nondet_tol=0)


@pytest.mark.parametrize("m,n,k,b", [(5, 7, 3, 2), (8, 8, 2, 4), (6, 5, 2, 128)])
def test_gradcheck_bsr_spmm_and_bsr_spmm_product(m, n, k, b):
    A = _bsr(m, n, b, seed=n)
    blocks = A.blocks.clone().requires_grad_()
    B = random_dense_operand(n, k, seed=2).requires_grad_()

    def make(bl):
        return ts.BSRMatrix(bl, A.block_col_indices, A.block_row_ptrs, A.shape, b)

    assert torch.autograd.gradcheck(lambda bl, B: ts.bsr_spmm(make(bl), B), (blocks, B), nondet_tol=0)
    assert torch.autograd.gradcheck(lambda bl, B: ts.spmm(make(bl), B, alpha=-1.5), (blocks, B), nondet_tol=0)


def test_gradcheck_spmv_and_beta_terms():
    A = _csr(6, 5, seed=3)
    values = A.values.clone().requires_grad_()
    x = random_dense_operand(5, 1, seed=4)[:, 0].requires_grad_()
    y = random_dense_operand(6, 1, seed=5)[:, 0].requires_grad_()
    C = random_dense_operand(6, 2, seed=6).requires_grad_()
    B = random_dense_operand(5, 2, seed=7).requires_grad_()

    def matrix(v):
        return ts.CSRMatrix(v, A.col_indices, A.row_ptrs, A.shape)

    assert torch.autograd.gradcheck(lambda v, x, y: ts.spmv(matrix(v), x, 2.0, y, -0.5), (values, x, y), nondet_tol=0)
    assert torch.autograd.gradcheck(lambda v, B, C: ts.spmm(matrix(v), B, 1.0, C, 3.0), (values, B, C), nondet_tol=0)


def test_gradients_only_on_stored_positions(dtype):
    D = random_dense(7, 6, 0.4, seed=8, dtype=dtype)
    A = ts.from_dense(D)
    A.values.requires_grad_()
    B = random_dense_operand(6, 3, seed=9, dtype=dtype).requires_grad_()
    G = random_dense_operand(7, 3, seed=10, dtype=dtype)
    ts.spmm(A, B, alpha=2.0).backward(G)
    dense_grad = 2.0 * G.double() @ B.detach().double().t()
    mask = D != 0
    assert A.values.grad.dtype == dtype and A.values.grad.shape == A.values.shape
    assert_close(A.values.grad, dense_grad[mask], dtype)
    assert_close(B.grad, 2.0 * D.double().t() @ G.double(), dtype)


def test_bsr_gradients_against_dense(dtype):
    D = random_dense(10, 9, 0.3, seed=11, dtype=dtype)
    A = ts.BSRMatrix.from_dense(D, block_size=4)
    A.blocks.requires_grad_()
    B = random_dense_operand(9, 2, seed=12, dtype=dtype).requires_grad_()
    ts.bsr_spmm(A, B).sum().backward()
    # The gradient of each stored block is the matching (padded) tile of ones @ Bᵀ.
    full = torch.nn.functional.pad(torch.ones(10, 2, dtype=torch.float64) @ B.detach().double().t(), (0, 3, 0, 2))
    for k in range(A.n_blocks):
        bi = int(torch.searchsorted(A.block_row_ptrs, torch.tensor(k), right=True)) - 1
        bj = int(A.block_col_indices[k])
        tile = full[bi * 4:bi * 4 + 4, bj * 4:bj * 4 + 4].clone()
        tile[max(0, 10 - bi * 4):, :] = 0  # padding rows and columns get no gradient
        tile[:, max(0, 9 - bj * 4):] = 0
        assert_close(A.blocks.grad[k], tile, dtype)
    assert_close(B.grad, D.double().t() @ torch.ones(10, 2, dtype=torch.float64), dtype)


def test_no_graph_without_requires_grad():
    A = _csr(4, 4, seed=13)
    out = ts.spmm(A, torch.ones(4, 2, dtype=torch.float64))
    assert out.grad_fn is None and not out.requires_grad
    B = torch.ones(4, 2, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        assert ts.spmm(A, B).grad_fn is None


def test_backward_is_bitwise_reproducible():
    A = _bsr(40, 30, 8, seed=14)
    A.blocks.requires_grad_()
    B = random_dense_operand(30, 5, seed=15).requires_grad_()
    grads = []
    for _ in range(2):
        A.blocks.grad, B.grad = None, None
        ts.bsr_spmm(A, B).pow(2).sum().backward()
        grads.append((A.blocks.grad.clone(), B.grad.clone()))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
