"""Sparse × sparse products (matmul, A @ B, matmul_transposed, galerkin): against dense
float64 products on ragged and empty shapes, scipy round trips, gradients (gradcheck in
float64), thread independence and errors."""
import pytest
import torch

import trnsparse as ts
from conftest import assert_close, random_dense

SHAPES = [(0, 4, 3), (5, 0, 3), (4, 6, 0), (1, 1, 1), (7, 5, 9), (23, 17, 12)]


def _pair(m, n, k, seed, dtype):
    a = random_dense(m, n, 0.3, seed=seed, dtype=dtype)
    b = random_dense(n, k, 0.3, seed=seed + 1, dtype=dtype)
    return a, b


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_csr_matmul_matches_dense(m, n, k, dtype):
    a, b = _pair(m, n, k, m + n + k, dtype)
    C = ts.matmul(ts.from_dense(a), ts.from_dense(b))
    assert isinstance(C, ts.CSRMatrix)
    assert C.dtype == (torch.float32 if dtype == torch.bfloat16 else dtype)
    assert_close(C.to_dense(), a.double() @ b.double(), dtype)
    assert_close((ts.from_dense(a) @ ts.from_dense(b)).to_dense(), a.double() @ b.double(), dtype)


@pytest.mark.parametrize("b_size", [2, 3, 5, 16])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_bsr_matmul_matches_dense(m, n, k, b_size, dtype):
    a, b = _pair(m, n, k, 3 * m + n, dtype)
    A = ts.BSRMatrix.from_dense(a, block_size=b_size)
    B = ts.BSRMatrix.from_dense(b, block_size=b_size)
    C = A @ B
    assert isinstance(C, ts.BSRMatrix) and C.block_size == b_size
    assert_close(C.to_dense(), a.double() @ b.double(), dtype)


def test_transposed_and_galerkin_match_dense(dtype):
    a = random_dense(13, 9, 0.3, seed=1, dtype=dtype)
    p = random_dense(11, 4, 0.4, seed=2, dtype=dtype)
    s = random_dense(11, 11, 0.3, seed=3, dtype=dtype)
    A = ts.from_dense(a)
    assert_close(ts.matmul_transposed(A, A).to_dense(), a.double() @ a.double().T, dtype)
    want = p.double().T @ s.double() @ p.double()
    assert_close(ts.galerkin(ts.from_dense(p), ts.from_dense(s)).to_dense(), want, dtype)
    Pb, Sb = ts.BSRMatrix.from_dense(p, block_size=2), ts.BSRMatrix.from_dense(s, block_size=2)
    assert_close(ts.galerkin(Pb, Sb).to_dense(), want, dtype)


def test_scipy_round_trip():
    a, b = _pair(20, 15, 18, 7, torch.float64)
    A, B = ts.from_dense(a), ts.from_dense(b)
    want = (A.to_scipy() @ B.to_scipy()).toarray()
    C = ts.from_scipy(A.to_scipy()) @ ts.from_scipy(B.to_scipy())
    assert abs(C.to_scipy().toarray() - want).max() < 1e-14
    Cb = ts.BSRMatrix.from_dense(a[:18, :15].clone(), block_size=3) @ ts.BSRMatrix.from_dense(b[:15, :].clone(), 3)
    assert abs(Cb.to_scipy().toarray() - (a[:18, :15] @ b[:15, :]).numpy()).max() < 1e-14


def test_drop_tolerance_leaves_out_small_entries():
    a, b = _pair(30, 20, 25, 11, torch.float64)
    full = ts.matmul(ts.from_dense(a), ts.from_dense(b))
    C = ts.matmul(ts.from_dense(a), ts.from_dense(b), drop_tolerance=0.1)
    keep = full.values.abs() > 0.1
    assert torch.equal(C.values, full.values[keep])
    assert C.nnz < full.nnz


def test_threads_give_identical_bits():
    A = ts.poisson3d(12)
    old = ts.get_num_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            ts.set_num_threads(n)
            outs.append((A @ A).values)
    finally:
        ts.set_num_threads(old)
    assert all(torch.equal(o, outs[0]) for o in outs)


@pytest.mark.parametrize("fmt", ["csr", "bsr"])
def test_results_own_their_indices(fmt):
    """A product's result and every later product of the same pair share the cached
    plan's structure in the core; what Python gets is its own, so writing into one
    result's indices leaves the next product (and the core's plan) as they were."""
    A = ts.poisson3d(6)
    if fmt == "bsr":
        A = ts.BSRMatrix.from_dense(A.to_dense(), block_size=3)
    ptr_name, idx_name = ("row_ptrs", "col_indices") if fmt == "csr" else ("block_row_ptrs", "block_col_indices")
    first = A @ A
    want_ptr, want_idx = getattr(first, ptr_name).clone(), getattr(first, idx_name).clone()
    getattr(first, idx_name)[1:] = 0
    getattr(first, ptr_name)[-1] = 0
    again = A @ A
    assert torch.equal(getattr(again, idx_name), want_idx)
    assert torch.equal(getattr(again, ptr_name), want_ptr)
    assert torch.equal(again.to_dense(), A.to_dense() @ A.to_dense())


@pytest.mark.parametrize("fmt", ["csr", "bsr2", "bsr3"])
def test_gradcheck(fmt):
    a, b = _pair(7, 6, 5, 5, torch.float64)
    if fmt == "csr":
        A, B = ts.from_dense(a), ts.from_dense(b)

        def make(template, v):
            return ts.CSRMatrix(v, template.col_indices, template.row_ptrs, template.shape)
    else:
        size = int(fmt[3:])
        A, B = ts.BSRMatrix.from_dense(a, size), ts.BSRMatrix.from_dense(b, size)

        def make(template, v):
            return ts.BSRMatrix(v, template.block_col_indices, template.block_row_ptrs, template.shape, size)

    va = (A.values if fmt == "csr" else A.blocks).clone().requires_grad_()
    vb = (B.values if fmt == "csr" else B.blocks).clone().requires_grad_()

    def f(x, y):
        C = ts.matmul(make(A, x), make(B, y))
        return C.values if fmt == "csr" else C.blocks

    assert torch.autograd.gradcheck(f, (va, vb), nondet_tol=0)


def test_gradients_match_dense_in_float32_and_bf16():
    for dtype in (torch.float32, torch.bfloat16):
        a, b = _pair(9, 8, 7, 13, dtype)
        A, B = ts.from_dense(a), ts.from_dense(b)
        va, vb = A.values.clone().requires_grad_(), B.values.clone().requires_grad_()
        C = ts.matmul(ts.CSRMatrix(va, A.col_indices, A.row_ptrs, A.shape),
                      ts.CSRMatrix(vb, B.col_indices, B.row_ptrs, B.shape))
        C.values.sum().backward()
        # d(sum of C's stored values) = 1 on C's pattern: dA = 1_C Bᵀ at A's entries.
        ones = torch.zeros(9, 7, dtype=torch.float64)
        rows = torch.repeat_interleave(torch.arange(9), C.row_ptrs[1:] - C.row_ptrs[:-1])
        ones[rows, C.col_indices] = 1.0
        da = (ones @ b.double().T)[a != 0]
        db = (a.double().T @ ones)[b != 0]
        tol = 1e-5 if dtype == torch.float32 else 3e-2
        assert float((va.grad.double() - da).abs().max()) <= tol * max(1.0, float(da.abs().max()))
        assert float((vb.grad.double() - db).abs().max()) <= tol * max(1.0, float(db.abs().max()))


def test_errors_name_both_operands():
    A = ts.from_dense(torch.ones(3, 4, dtype=torch.float64))
    B = ts.from_dense(torch.ones(5, 2, dtype=torch.float64))
    with pytest.raises(ts.ShapeError, match=r"A is 3 x 4 .*B is 5 x 2"):
        ts.matmul(A, B)
    with pytest.raises(TypeError, match="different dtypes"):
        ts.matmul(A, ts.from_dense(torch.ones(4, 2, dtype=torch.float32)))
    P = ts.BSRMatrix.from_dense(torch.ones(4, 4), block_size=2)
    Q = ts.BSRMatrix.from_dense(torch.ones(4, 4), block_size=4)
    with pytest.raises(ValueError, match="block size 2.*block size 4"):
        P @ Q
    with pytest.raises(TypeError, match="both CSR or both BSR"):
        ts.matmul(ts.from_dense(torch.ones(4, 4)), Q)
    with pytest.raises(ValueError, match="drop_tolerance"):
        ts.matmul(A, ts.from_dense(torch.ones(4, 2, dtype=torch.float64)), drop_tolerance=-1.0)
    with pytest.raises(TypeError):
        ts.matmul(A, "B")
