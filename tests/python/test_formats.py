"""Formats: construction, conversions, properties, scipy / numpy interop."""
import numpy as np
import pytest
import scipy.sparse
import torch

import trnsparse as ts
from conftest import random_dense


def test_from_dense_keeps_entries_strictly_above_threshold_sorted(dtype):
    D = torch.tensor([[0.5, 0.0, -2.0], [0.0, 0.0, 0.0], [1.0, -0.5, 3.0]], dtype=dtype)
    A = ts.from_dense(D, threshold=0.5)
    assert A.values.dtype == dtype and A.col_indices.dtype == torch.int64 and A.row_ptrs.dtype == torch.int64
    assert A.row_ptrs.tolist() == [0, 1, 1, 3]
    assert A.col_indices.tolist() == [2, 0, 2]
    assert A.values.double().tolist() == [-2.0, 1.0, 3.0]
    assert A.shape == (3, 3) and A.nnz == 3 and isinstance(A.nnz, int)
    assert A.density == pytest.approx(3 / 9) and isinstance(A.density, float)
    assert A.dtype == dtype


@pytest.mark.parametrize("shape,b", [((7, 5), 3), ((8, 8), 4), ((1, 9), 128), ((0, 4), 2)])
def test_round_trips_through_every_format(dtype, shape, b):
    D = random_dense(*shape, 0.4, seed=11).to(dtype)
    A = ts.from_dense(D)
    assert torch.equal(A.to_dense(), D)
    assert torch.equal(A.to_coo().to_dense(), D)
    assert torch.equal(A.to_coo().to_csr().to_dense(), D)
    B = ts.BSRMatrix.from_dense(D, block_size=b)
    assert B.blocks.dtype == dtype and B.block_size == b and B.shape == shape
    assert torch.equal(B.to_dense(), D)
    assert torch.equal(B.to_csr().to_dense(), D)
    assert torch.equal(B.to_coo().to_dense(), D)
    assert torch.equal(ts.BSRMatrix.from_csr(A, block_size=b).to_dense(), D)


def test_bsr_from_dense_pads_and_stores_blocks_above_threshold_in_order():
    D = torch.zeros(5, 5, dtype=torch.float64)
    D[0, 4] = 0.3   # block (0, 2): not strictly above 0.3
    D[3, 1] = -0.7  # block (1, 0)
    D[4, 4] = 2.0   # block (2, 2), padded
    D[2, 3] = 0.9   # block (1, 1)
    B = ts.BSRMatrix.from_dense(D, block_size=2, threshold=0.3)
    assert B.block_row_ptrs.tolist() == [0, 0, 2, 3]
    assert B.block_col_indices.tolist() == [0, 1, 2]
    assert tuple(B.blocks.shape) == (3, 2, 2)
    assert B.blocks[2].tolist() == [[2.0, 0.0], [0.0, 0.0]]  # padding is zero
    assert B.n_blocks == 3 and B.nnz == 12
    assert B.density == pytest.approx(3 / 9)
    expected = D.clone()
    expected[0, 4] = 0.0
    assert torch.equal(B.to_dense(), expected)


def test_bsr_default_block_size_is_128():
    B = ts.BSRMatrix.from_dense(torch.eye(130))
    assert B.block_size == 128 and B.block_row_ptrs.tolist() == [0, 1, 2]
    assert torch.equal(B.to_dense(), torch.eye(130))


def test_coo_duplicates_are_summed_and_sorted():
    C = ts.COOMatrix(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2, 0, 2]), torch.tensor([1, 1, 1]), (3, 2))
    A = C.to_csr()
    assert A.row_ptrs.tolist() == [0, 1, 1, 2]
    assert A.col_indices.tolist() == [1, 1]
    assert A.values.tolist() == [2.0, 4.0]
    assert C.to_dense().tolist() == [[0.0, 2.0], [0.0, 0.0], [0.0, 4.0]]


def test_eye_sparse():
    I = ts.eye_sparse(4)
    assert I.dtype == torch.float32 and I.nnz == 4
    assert torch.equal(I.to_dense(), torch.eye(4))
    assert ts.eye_sparse(3, dtype=torch.float64).to_dense().dtype == torch.float64


def test_reprs_name_the_shape_and_dtype():
    A = ts.from_dense(torch.eye(3))
    assert repr(A) == "CSRMatrix(shape=(3, 3), nnz=3, density=0.3333, dtype=torch.float32)"
    assert repr(A.to_coo()).startswith("COOMatrix(shape=(3, 3), nnz=3")
    B = ts.BSRMatrix.from_dense(torch.eye(3), block_size=2)
    assert repr(B) == "BSRMatrix(shape=(3, 3), block_size=2, n_blocks=2, density=0.5, dtype=torch.float32)"



@pytest.mark.parametrize("shape", [(3, 4), (0, 4)])
def test_csr_and_coo_share_their_entry_properties(shape):
    """CSR and COO take nnz, dtype, density, repr and their argument checks from one base:
    the same matrix in both formats agrees, and each names itself in repr and errors."""
    A = ts.from_dense(torch.eye(*shape, dtype=torch.float64))
    C = A.to_coo()
    assert (C.nnz, C.dtype, C.density) == (A.nnz, A.dtype, A.density) == (min(shape), torch.float64,
                                                                          min(shape) / 12 if shape[0] else 0.0)
    assert repr(C) == repr(A).replace("CSRMatrix", "COOMatrix", 1)
    assert [f for f in vars(A) if not f.startswith("_")] == ["values", "col_indices", "row_ptrs", "shape"]
    assert [f for f in vars(C)] == ["values", "row_indices", "col_indices", "shape"]
    with pytest.raises(AssertionError, match="^CSRMatrix: shape must have two entries"):
        ts.CSRMatrix(torch.ones(0), [], [0], (1, 1, 1))
    with pytest.raises(AssertionError, match="^COOMatrix: shape must have two entries"):
        ts.COOMatrix(torch.ones(0), [], [], (1,))
    with pytest.raises(TypeError, match="^COOMatrix: row_indices must hold integers"):
        ts.COOMatrix(torch.ones(1), torch.tensor([0.0]), torch.tensor([0]), (1, 1))
    with pytest.raises(TypeError, match="^CSRMatrix: row_ptrs must hold integers"):
        ts.CSRMatrix(torch.ones(1), torch.tensor([0]), torch.tensor([0.0, 1.0]), (1, 1))

def test_dataclasses_are_mutable_and_accept_lists():
    A = ts.CSRMatrix([1.0, 2.0], [0, 1], [0, 1, 2], (2, 2))
    assert A.col_indices.dtype == torch.int64
    A.values = torch.tensor([5.0, 6.0])
    assert A.to_dense().tolist() == [[5.0, 0.0], [0.0, 6.0]]
    A.values.mul_(2)
    assert A.to_dense().tolist() == [[10.0, 0.0], [0.0, 12.0]]


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
def test_scipy_round_trip_keeps_dtype(np_dtype):
    m = scipy.sparse.random(9, 7, density=0.3, format="csr", dtype=np_dtype, random_state=3)
    A = ts.from_scipy(m)
    assert A.dtype == (torch.float32 if np_dtype == np.float32 else torch.float64)
    np.testing.assert_array_equal(A.to_dense().numpy(), m.toarray())
    np.testing.assert_array_equal(A.to_scipy().toarray(), m.toarray())
    np.testing.assert_array_equal(ts.CSRMatrix.from_scipy(m.tocoo()).to_dense().numpy(), m.toarray())


def test_from_scipy_sorts_and_sums_duplicates():
    m = scipy.sparse.coo_matrix(([1.0, 2.0, 4.0], ([1, 1, 0], [2, 2, 0])), shape=(2, 3))
    A = ts.from_scipy(m)
    assert A.col_indices.tolist() == [0, 2] and A.values.tolist() == [4.0, 3.0]


def test_to_scipy_shares_memory_and_numpy_views():
    A = ts.from_dense(torch.tensor([[1.0, 0.0], [2.0, 3.0]], dtype=torch.float64))
    s = A.to_scipy()
    A.values[0] = 7.0
    assert s.toarray()[0, 0] == 7.0
    values, cols, ptrs = A.numpy()
    assert np.shares_memory(values, A.values.numpy()) and cols.dtype == np.int64
    B = ts.BSRMatrix.from_dense(torch.eye(4, dtype=torch.float64), block_size=2)
    np.testing.assert_array_equal(B.to_scipy().toarray(), np.eye(4))
    assert isinstance(ts.BSRMatrix.from_dense(torch.eye(3), block_size=2).to_scipy(), scipy.sparse.csr_matrix)
    C = A.to_coo()
    np.testing.assert_array_equal(C.to_scipy().toarray(), A.to_dense().numpy())


def test_from_dense_accepts_numpy():
    A = ts.from_dense(np.array([[0.0, 1.5]]))
    assert A.dtype == torch.float64 and A.values.tolist() == [1.5]


def test_malformed_arrays_raise_typed_errors():
    with pytest.raises(AssertionError, match="row_ptrs has 2 entries, expected rows \\+ 1 = 3"):
        ts.CSRMatrix(torch.ones(1), torch.tensor([0]), torch.tensor([0, 1]), (2, 2)).to_dense()
    with pytest.raises(IndexError, match="out of range"):
        ts.CSRMatrix(torch.ones(1), torch.tensor([5]), torch.tensor([0, 1, 1]), (2, 2)).to_dense()
    with pytest.raises(IndexError):
        ts.CSRMatrix(torch.ones(2), torch.tensor([1, 0]), torch.tensor([0, 2, 2]), (2, 2)).to_dense()
    with pytest.raises(AssertionError, match="blocks has shape"):
        ts.BSRMatrix(torch.ones(1, 2, 2), torch.tensor([0, 1]), torch.tensor([0, 2]), (2, 4), 2).to_dense()
    with pytest.raises(ValueError, match="block_size"):
        ts.BSRMatrix.from_dense(torch.eye(2), block_size=0)
    with pytest.raises(TypeError, match="dtype"):
        ts.from_dense(torch.eye(2, dtype=torch.float16))
    with pytest.raises(TypeError, match="integers"):
        ts.CSRMatrix(torch.ones(1), torch.tensor([0.0]), torch.tensor([0, 1]), (1, 1))
    with pytest.raises(ValueError, match="negative"):
        ts.CSRMatrix(torch.ones(0), torch.tensor([], dtype=torch.int64), torch.tensor([0]), (-1, 2))


def test_generated_problems():
    """poisson3d, elasticity3d and block_stencil3d reach Python as CSR matrices; the
    elasticity matrix is symmetric with natural 3 x 3 blocks, the block stencil's 5 x 5
    blocks are full."""
    P = ts.poisson3d(4)
    assert P.shape == (64, 64) and P.nnz == 64 * 7 - 6 * 16 and P.dtype == torch.float64
    E = ts.elasticity3d(3, dtype=torch.float32)
    assert E.shape == (3 * 3 * 16, 3 * 3 * 16) and E.dtype == torch.float32
    D = E.to_dense()
    assert torch.allclose(D, D.T, atol=1e-6)
    assert ts.BSRMatrix.from_csr(E, 3).blocks.shape[0] * 9 == E.nnz
    S = ts.block_stencil3d(3, fields=5)
    assert S.shape == (135, 135) and ts.BSRMatrix.from_csr(S, 5).blocks.shape[0] * 25 == S.nnz
    with pytest.raises(ValueError, match="elasticity3d"):
        ts.elasticity3d(0)
    with pytest.raises(ValueError, match="fields"):
        ts.block_stencil3d(3, fields=0)
