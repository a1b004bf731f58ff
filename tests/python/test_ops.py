"""Products and algebra against dense float64 references, for every dtype; shape,
dtype and error rules."""
import numpy as np
import pytest
import torch

import trnsparse as ts
from conftest import assert_close, random_dense, random_dense_operand

SHAPES = [(1, 1, 1), (7, 5, 3), (33, 17, 4), (130, 70, 9)]


def formats(D, b=4):
    """The same matrix as CSR, COO and BSR (block size b)."""
    A = ts.from_dense(D)
    return {"csr": A, "coo": A.to_coo(), "bsr": ts.BSRMatrix.from_dense(D, block_size=b)}


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("fmt", ["csr", "coo", "bsr"])
def test_spmm_and_spmv_match_dense(dtype, m, n, k, fmt):
    D = random_dense(m, n, 0.3, seed=m * n, dtype=dtype)
    A = formats(D)[fmt]
    B = random_dense_operand(n, k, seed=1, dtype=dtype)
    C0 = random_dense_operand(m, k, seed=2, dtype=dtype)
    ref = D.double() @ B.double()
    out = ts.spmm(A, B)
    assert out.dtype == dtype and out.shape == (m, k)
    assert_close(out, ref, dtype)
    assert_close(ts.spmm(A, B, alpha=-2.0, C=C0, beta=0.5), -2.0 * ref + 0.5 * C0.double(), dtype)
    assert_close(ts.spmm(A, B, alpha=3.0, C=C0), 3.0 * ref, dtype)  # beta = 0: C ignored
    x, y0 = B[:, 0].contiguous(), C0[:, 0].contiguous()
    assert_close(ts.spmv(A, x), ref[:, 0], dtype)
    assert_close(ts.spmv(A, x, alpha=0.5, y=y0, beta=-1.0), 0.5 * ref[:, 0] - y0.double(), dtype)
    assert ts.spmv(A, x).dtype == dtype


def test_spmm_does_not_modify_its_inputs():
    D = random_dense(6, 6, 0.5, seed=4)
    B, C = random_dense_operand(6, 2, seed=5), random_dense_operand(6, 2, seed=6)
    B0, C0 = B.clone(), C.clone()
    ts.spmm(ts.from_dense(D), B, C=C, beta=1.0)
    assert torch.equal(B, B0) and torch.equal(C, C0)


def test_large_spmm_outputs_on_pooled_memory_have_the_same_bits(monkeypatch):
    """CSR spmm outputs of 4 MiB and more (and their autograd forward) come from the core's
    buffer pool, NaN-filled beforehand: the same bits as on torch's memory."""
    import trnsparse._interop as interop

    A = ts.from_dense(random_dense(1100, 300, 0.02, seed=12).float())
    B = torch.randn(300, 1000)
    leaf = B.clone().requires_grad_()

    def run():
        dirty = [interop.empty((1100, 1000), torch.float32, "test").fill_(float("nan")) for _ in range(4)]
        del dirty
        return ts.spmm(A, B), ts.spmm(A, leaf).detach()

    assert 1100 * 1000 * 4 >= interop.POOLED_BYTES
    pooled = run()
    monkeypatch.setattr(interop, "POOLED_BYTES", 1 << 62)
    for a, b in zip(pooled, run()):
        assert torch.equal(a, b)


def test_strided_and_numpy_operands():
    D = random_dense(9, 8, 0.4, seed=7)
    A = ts.from_dense(D)
    wide = random_dense_operand(8, 10, seed=8)
    view = wide[:, 2:5]  # rows contiguous, row stride 10: read in place
    assert_close(ts.spmm(A, view), D @ view, torch.float64)
    transposed = random_dense_operand(3, 8, seed=9).t()  # not row-major: copied
    assert_close(ts.spmm(A, transposed), D @ transposed, torch.float64)
    assert_close(ts.spmv(A, wide[:, 0]), D @ wide[:, 0], torch.float64)  # strided vector
    assert_close(ts.spmm(A, wide.numpy()), D @ wide, torch.float64)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_bsr_spmm_matches_dense(dtype, m, n, k):
    D = random_dense(m, n, 0.3, seed=m + n, dtype=dtype)
    B = random_dense_operand(n, k, seed=3, dtype=dtype)
    for b in (1, 4, 128):
        A = ts.BSRMatrix.from_dense(D, block_size=b)
        out = ts.bsr_spmm(A, B)
        assert out.dtype == dtype and out.shape == (m, k)
        assert_close(out, D.double() @ B.double(), dtype)


def test_bsr_spmm_converts_b_to_the_dtype_of_a():
    A = ts.BSRMatrix.from_dense(torch.eye(3, dtype=torch.float64), block_size=2)
    out = ts.bsr_spmm(A, torch.ones(3, 2, dtype=torch.float32))
    assert out.dtype == torch.float64 and torch.equal(out, torch.ones(3, 2, dtype=torch.float64))


@pytest.mark.parametrize("uplo", ["upper", "lower"])
def test_spmv_symmetric(dtype, uplo):
    S = random_dense(11, 11, 0.4, seed=12)
    S = S + S.t()
    half = torch.triu(S) if uplo == "upper" else torch.tril(S)
    A = ts.from_dense(half.to(dtype))
    x = random_dense_operand(11, 1, seed=13, dtype=dtype)[:, 0]
    S = (torch.triu(half) + torch.triu(half, 1).t()) if uplo == "upper" else (torch.tril(half) + torch.tril(half, -1).t())
    S = S.to(dtype).double()
    out = ts.spmv_symmetric(A, x, alpha=1.5, uplo=uplo)
    assert out.dtype == dtype
    assert_close(out, 1.5 * S @ x.double(), dtype)


@pytest.mark.parametrize("uplo", ["upper", "lower"])
@pytest.mark.parametrize("block_size", [2, 3, 5, 7])
def test_bsr_spmv_symmetric_from_the_element_or_the_block_triangle(dtype, uplo, block_size):
    """The BSR half storage: the element triangle converted to blocks (triangular diagonal
    blocks) and `triangle` of the full BSR matrix (whole diagonal blocks) are both S; 13
    rows, so the last block row is partial."""
    S = random_dense(13, 13, 0.4, seed=14)
    S = (S + S.t()).to(dtype)
    x = random_dense_operand(13, 1, seed=15, dtype=dtype)[:, 0]
    half = torch.triu(S) if uplo == "upper" else torch.tril(S)
    for A in (ts.BSRMatrix.from_dense(half, block_size=block_size),
              ts.triangle(ts.BSRMatrix.from_dense(S, block_size=block_size), uplo)):
        out = ts.spmv_symmetric(A, x, alpha=-2.0, uplo=uplo)
        assert out.dtype == dtype
        assert_close(out, -2.0 * S.double() @ x.double(), dtype)


def test_triangle_keeps_one_side_of_the_diagonal(dtype):
    D = random_dense(7, 9, 0.6, seed=16).to(dtype)
    assert torch.equal(ts.triangle(ts.from_dense(D), "upper").to_dense(), torch.triu(D))
    assert torch.equal(ts.triangle(ts.from_dense(D).to_coo(), "lower").to_dense(), torch.tril(D))
    blocks = ts.triangle(ts.BSRMatrix.from_dense(D, block_size=3), "upper").to_dense()
    rows, cols = torch.arange(7)[:, None] // 3, torch.arange(9)[None, :] // 3
    assert torch.equal(blocks, torch.where(cols >= rows, D, torch.zeros((), dtype=dtype)))
    with pytest.raises(ValueError, match="uplo"):
        ts.triangle(ts.from_dense(D), "diagonal")


def test_spmv_symmetric_rejects_the_other_triangle_and_bad_uplo():
    A = ts.from_dense(torch.tensor([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(IndexError):
        ts.spmv_symmetric(A, torch.ones(2), uplo="lower")
    with pytest.raises(ValueError, match="uplo"):
        ts.spmv_symmetric(A, torch.ones(2), uplo="both")
    with pytest.raises(AssertionError, match="not square"):
        ts.spmv_symmetric(ts.from_dense(torch.ones(2, 3)), torch.ones(3))
    B = ts.BSRMatrix.from_dense(torch.ones(4, 4), block_size=2)  # blocks on both sides
    with pytest.raises(IndexError, match="block triangle"):
        ts.spmv_symmetric(B, torch.ones(4), uplo="upper")


@pytest.mark.parametrize("fmt", ["csr", "coo", "bsr"])
def test_sparse_add_on_the_union_pattern(dtype, fmt):
    Da = random_dense(10, 12, 0.3, seed=20, dtype=dtype)
    Db = random_dense(10, 12, 0.3, seed=21, dtype=dtype)
    A, B = formats(Da)[fmt], formats(Db)[fmt]
    S = ts.sparse_add(A, B, alpha=2.0, beta=-0.5)
    assert type(S) is (ts.BSRMatrix if fmt == "bsr" else ts.CSRMatrix) and S.dtype == dtype
    assert_close(S.to_dense(), 2.0 * Da.double() - 0.5 * Db.double(), dtype)
    assert_close(ts.sparse_add(A, B).to_dense(), Da.double() + Db.double(), dtype)
    if fmt != "bsr":  # the union is kept even where the sum is zero
        assert ts.sparse_add(A, A, 1.0, -1.0).nnz == formats(Da)["csr"].nnz


@pytest.mark.parametrize("fmt", ["csr", "coo", "bsr"])
def test_scale_transpose_nnz_per_row(dtype, fmt):
    D = random_dense(9, 13, 0.3, seed=30, dtype=dtype)
    A = formats(D, b=4)[fmt]
    scaled = ts.sparse_scale(A, -3.0)
    assert type(scaled) is type(A) and scaled.dtype == dtype
    assert_close(scaled.to_dense(), -3.0 * D.double(), dtype)
    T = ts.sparse_transpose(A)
    assert type(T) is type(A) and T.shape == (13, 9)
    assert torch.equal(T.to_dense(), D.t())
    counts = ts.nnz_per_row(A)
    assert counts.dtype == torch.int64
    if fmt == "bsr":  # logical columns covered by each row's stored blocks
        covered = torch.zeros(9, 13, dtype=torch.bool)
        rows, cols = torch.nonzero(D, as_tuple=True)
        for r, c in zip((rows // 4).tolist(), (cols // 4).tolist()):
            covered[r * 4:r * 4 + 4, c * 4:c * 4 + 4] = True
        assert counts.tolist() == covered.sum(1).tolist()
    else:
        assert counts.tolist() == (D != 0).sum(1).tolist()


def test_bsr_diagonal(dtype):
    D = random_dense(10, 7, 0.5, seed=40, dtype=dtype)
    d = ts.bsr_diagonal(ts.BSRMatrix.from_dense(D, block_size=3))
    assert d.dtype == dtype and torch.equal(d, torch.diagonal(D))


def test_shape_mismatches_are_assertion_errors():
    A = ts.from_dense(torch.ones(3, 4))
    bsr = ts.BSRMatrix.from_dense(torch.ones(3, 4), block_size=2)
    cases = [
        lambda: ts.spmv(A, torch.ones(3)),
        lambda: ts.spmm(A, torch.ones(3, 2)),
        lambda: ts.spmm(A, torch.ones(4, 2), C=torch.ones(2, 2), beta=1.0),
        lambda: ts.spmv(A, torch.ones(4), y=torch.ones(4), beta=1.0),
        lambda: ts.bsr_spmm(bsr, torch.ones(3, 2)),
        lambda: ts.spmm(A, torch.ones(4)),
        lambda: ts.sparse_add(A, ts.from_dense(torch.ones(4, 3))),
    ]
    for case in cases:
        with pytest.raises(AssertionError) as info:
            case()
        assert isinstance(info.value, ValueError) and isinstance(info.value, ts.ShapeError)
        assert " is " in str(info.value) or "must be" in str(info.value) or "has shape" in str(info.value)


def test_dtype_and_type_errors():
    A = ts.from_dense(torch.ones(2, 2))
    with pytest.raises(TypeError, match="dtype"):
        ts.spmv(A, torch.ones(2, dtype=torch.float64))
    with pytest.raises(TypeError, match="dtype"):
        ts.sparse_add(A, ts.from_dense(torch.ones(2, 2, dtype=torch.float64)))
    with pytest.raises(TypeError, match="BSRMatrix"):
        ts.bsr_spmm(A, torch.ones(2, 2))
    with pytest.raises(TypeError, match="BSRMatrix"):
        ts.bsr_diagonal(A)
    with pytest.raises(TypeError):
        ts.sparse_add(A, ts.BSRMatrix.from_dense(torch.ones(2, 2), block_size=2))
    with pytest.raises(TypeError):
        ts.spmv(torch.ones(2, 2), torch.ones(2))
    with pytest.raises(ValueError):
        ts.sparse_add(ts.BSRMatrix.from_dense(torch.ones(4, 4), block_size=2),
                      ts.BSRMatrix.from_dense(torch.ones(4, 4), block_size=4))


def test_results_do_not_depend_on_the_thread_count():
    D = random_dense(300, 260, 0.2, seed=50, dtype=torch.float32)
    A = ts.BSRMatrix.from_dense(D, block_size=32)
    B = random_dense_operand(260, 16, seed=51, dtype=torch.float32)
    before = ts.get_num_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            ts.set_num_threads(n)
            outs.append((ts.spmm(A, B), ts.bsr_spmm(A, B), ts.spmm(A.to_csr(), B)))
        for other in outs[1:]:
            assert all(torch.equal(a, b) for a, b in zip(outs[0], other))
    finally:
        ts.set_num_threads(before)


def test_scalars_come_back_as_python_numbers():
    A = ts.BSRMatrix.from_dense(torch.eye(4), block_size=2)
    assert type(A.nnz) is int and type(A.n_blocks) is int and type(A.density) is float
    assert type(ts.from_dense(torch.eye(3)).nnz) is int


def test_empty_matrices():
    A = ts.from_dense(torch.zeros(3, 4))
    assert A.nnz == 0
    assert torch.equal(ts.spmm(A, torch.ones(4, 2)), torch.zeros(3, 2))
    assert torch.equal(ts.spmv(A, torch.ones(4)), torch.zeros(3))
    assert ts.spmm(ts.from_dense(torch.zeros(0, 4)), torch.ones(4, 2)).shape == (0, 2)
    assert ts.spmm(A, torch.ones(4, 0)).shape == (3, 0)
    assert np.array_equal(ts.nnz_per_row(A).numpy(), np.zeros(3))
