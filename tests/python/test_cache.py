"""The conversion cache of CSRMatrix and BSRMatrix (the core matrix of the last use, kept
on the Python object): repeated products reuse it, and no change to the arrays, however
made, gives a stale result. Each product is compared bit for bit with the same product
on a freshly built matrix, which has no cache."""
import copy
import pickle

import pytest
import torch

import trnsparse as ts
from conftest import random_dense, random_dense_operand


def csr(D):
    return ts.from_dense(D)


def bsr(D):
    return ts.BSRMatrix.from_dense(D, block_size=4)


FORMATS = {"csr": csr, "bsr": bsr}


def fresh(A):
    """A new matrix over copies of A's arrays: its products build their core matrix anew."""
    if isinstance(A, ts.BSRMatrix):
        return ts.BSRMatrix(A.blocks.clone(), A.block_col_indices.clone(), A.block_row_ptrs.clone(), A.shape,
                            A.block_size)
    return ts.CSRMatrix(A.values.clone(), A.col_indices.clone(), A.row_ptrs.clone(), A.shape)


def products(A, B):
    """Every product of A with B (and its first column)."""
    out = [ts.spmm(A, B), ts.spmm(A, B, alpha=-0.5), ts.spmv(A, B[:, 0].contiguous())]
    if isinstance(A, ts.BSRMatrix):
        out.append(ts.bsr_spmm(A, B))
    return out


def assert_same_as_fresh(A, B):
    for got, want in zip(products(A, B), products(fresh(A), B)):
        assert got.dtype == want.dtype and torch.equal(got, want)


def stored(A):
    return A.blocks if isinstance(A, ts.BSRMatrix) else A.values


@pytest.fixture(params=list(FORMATS))
def fmt(request):
    return request.param


def test_repeated_products_reuse_the_core_matrix(fmt, dtype):
    A = FORMATS[fmt](random_dense(13, 10, 0.4, seed=1, dtype=dtype))
    B = random_dense_operand(10, 3, seed=2, dtype=dtype)
    first = products(A, B)
    h = A._handle()
    assert A._handle() is h
    for got, want in zip(products(A, B), first):
        assert torch.equal(got, want)
    assert A._handle() is h


def test_values_changed_in_place(fmt, dtype):
    A = FORMATS[fmt](random_dense(13, 10, 0.4, seed=3, dtype=dtype))
    B = random_dense_operand(10, 3, seed=4, dtype=dtype)
    before = products(A, B)
    stored(A).add_(1.0)
    assert_same_as_fresh(A, B)
    assert not torch.equal(products(A, B)[0], before[0])
    stored(A).mul_(-2.0)
    assert_same_as_fresh(A, B)


def test_values_changed_without_a_version_bump(fmt):
    """Writes through numpy views and `.data` do not bump the tensor's version counter."""
    A = FORMATS[fmt](random_dense(13, 10, 0.4, seed=5))
    B = random_dense_operand(10, 3, seed=6)
    products(A, B)
    version = stored(A)._version
    A.numpy()[0].reshape(-1)[0] += 3.0
    stored(A).data.reshape(-1)[-1] = -7.0
    assert stored(A)._version == version
    assert_same_as_fresh(A, B)


def test_values_are_compared_bit_for_bit():
    """-0.0 == 0.0, but the cache must not keep the old bits."""
    A = ts.CSRMatrix(torch.tensor([0.0, 2.0], dtype=torch.float64), [0, 1], [0, 1, 2], (2, 2))
    assert not torch.signbit(A.to_dense()[0, 0])
    A.values[0] = -0.0
    assert torch.signbit(A.to_dense()[0, 0])


def test_new_tensors_assigned(fmt, dtype):
    D = random_dense(13, 10, 0.4, seed=7, dtype=dtype)
    A = FORMATS[fmt](D)
    B = random_dense_operand(10, 3, seed=8, dtype=dtype)
    products(A, B)
    other = FORMATS[fmt](random_dense(13, 10, 0.6, seed=9, dtype=dtype))
    if fmt == "bsr":
        A.blocks = other.blocks
        A.block_col_indices = other.block_col_indices
        A.block_row_ptrs = other.block_row_ptrs
    else:
        A.values = other.values
        A.col_indices = other.col_indices
        A.row_ptrs = other.row_ptrs
    assert_same_as_fresh(A, B)
    for got, want in zip(products(A, B), products(other, B)):
        assert torch.equal(got, want)


def test_csr_indices_changed_in_place():
    D = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]], dtype=torch.float64)
    A = csr(D)
    B = random_dense_operand(3, 2, seed=10)
    products(A, B)
    A.col_indices[1] = 1  # row 0: columns 0, 1 (was 0, 2)
    assert_same_as_fresh(A, B)
    # Against torch's dense product to rounding (its summation order is the BLAS's, which
    # differs between CPUs); a stale structure would be off by whole entries.
    torch.testing.assert_close(ts.spmm(A, B), torch.tensor([[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]], dtype=torch.float64) @ B,
                               rtol=1e-14, atol=0)
    A.row_ptrs[1] = 1  # row 0 ends after one entry: column 1 moves to row 1
    torch.testing.assert_close(ts.spmm(A, B), torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 3.0]], dtype=torch.float64) @ B,
                               rtol=1e-14, atol=0)
    assert_same_as_fresh(A, B)


def test_bsr_indices_changed_in_place():
    D = random_dense(8, 12, 1.0, seed=11)
    A = ts.BSRMatrix(torch.stack([D[0:4, 0:4], D[4:8, 4:8]]), torch.tensor([0, 1]), torch.tensor([0, 1, 2]), (8, 12),
                     4)
    B = random_dense_operand(12, 3, seed=12)
    products(A, B)
    A.block_col_indices[1] = 2  # the second block moves to block column 2
    moved = torch.zeros(8, 12, dtype=torch.float64)
    moved[0:4, 0:4], moved[4:8, 8:12] = D[0:4, 0:4], D[4:8, 4:8]
    assert torch.equal(A.to_dense(), moved)
    assert_same_as_fresh(A, B)
    A.block_row_ptrs[1] = 2  # both blocks in block row 0 (columns 0 and 2)
    assert_same_as_fresh(A, B)


def test_indices_made_invalid_in_place_are_rejected(fmt):
    A = FORMATS[fmt](random_dense(12, 12, 0.5, seed=13))
    B = random_dense_operand(12, 2, seed=14)
    products(A, B)
    index = A.block_col_indices if fmt == "bsr" else A.col_indices
    index[0] = 1000
    with pytest.raises(IndexError):
        ts.spmm(A, B)


def test_shape_changed(fmt):
    A = FORMATS[fmt](random_dense(8, 8, 0.5, seed=15))
    products(A, random_dense_operand(8, 2, seed=16))
    A.shape = (8, 7) if fmt == "bsr" else (8, 9)  # BSR: same block grid, padding past column 7
    B = random_dense_operand(A.shape[1], 2, seed=17)
    if fmt == "bsr":
        A.blocks[:, :, 3] = 0.0  # what the padding of the new shape holds
    assert_same_as_fresh(A, B)
    assert ts.spmm(A, B).shape == (8, 2)


def test_dtype_changed(fmt):
    A = FORMATS[fmt](random_dense(9, 9, 0.5, seed=18))
    products(A, random_dense_operand(9, 2, seed=19))
    if fmt == "bsr":
        A.blocks = A.blocks.float()
    else:
        A.values = A.values.float()
    B = random_dense_operand(9, 2, seed=19, dtype=torch.float32)
    assert ts.spmm(A, B).dtype == torch.float32
    assert_same_as_fresh(A, B)


def test_writes_into_a_result_do_not_reach_the_cache():
    """A BSR result may share its structure with A's cached core matrix in the core: the
    result's index tensors are its own copies, so writing into them cannot make A's cache
    hold unvalidated indices."""
    A = bsr(random_dense(12, 12, 0.5, seed=20))
    B = random_dense_operand(12, 2, seed=21)
    products(A, B)
    C = ts.sparse_scale(A, 2.0)
    C.block_col_indices[0] = 1000
    A.block_col_indices[0] = 1000
    with pytest.raises(IndexError):
        ts.bsr_spmm(A, B)


def test_backward_uses_the_values_of_the_forward(fmt):
    A = FORMATS[fmt](random_dense(7, 6, 0.6, seed=22))
    B = random_dense_operand(6, 2, seed=23).requires_grad_()
    ref = fresh(A)
    out = ts.spmm(A, B)
    stored(A).add_(5.0)  # after the forward: the gradient is still of the forward's A
    out.sum().backward()
    B_ref = B.detach().clone().requires_grad_()
    ts.spmm(ref, B_ref).sum().backward()
    assert torch.equal(B.grad, B_ref.grad)


def test_copies_and_pickles_leave_the_cache_behind(fmt):
    A = FORMATS[fmt](random_dense(6, 6, 0.5, seed=24))
    B = random_dense_operand(6, 2, seed=25)
    want = ts.spmm(A, B)
    for other in (copy.copy(A), copy.deepcopy(A), pickle.loads(pickle.dumps(A))):
        assert other._core_cache is None
        assert torch.equal(ts.spmm(other, B), want)
