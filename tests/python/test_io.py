"""Matrix Market files: read_mtx and write_mtx over the C++ reader and writer."""
import os
import pathlib
import re

import numpy as np
import pytest
import scipy.io
import scipy.sparse
import torch

import trnsparse as ts
from conftest import random_dense

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
BUS = DATA / "1138_bus.mtx"
MALFORMED = DATA / "malformed"


def scipy_csr(path) -> scipy.sparse.csr_matrix:
    """scipy's reading of a file, as CSR with sorted indices and duplicates summed."""
    m = scipy.sparse.csr_matrix(scipy.io.mmread(str(path)))
    m.sum_duplicates()
    return m


def test_read_matches_scipy_on_1138_bus():
    """The symmetric file is expanded to the full matrix, exactly as scipy reads it."""
    A = ts.read_mtx(BUS)
    S = scipy_csr(BUS)
    assert isinstance(A, ts.CSRMatrix) and A.dtype == torch.float64
    assert A.shape == S.shape == (1138, 1138) and A.nnz == S.nnz == 4054
    assert np.array_equal(A.row_ptrs.numpy(), S.indptr)
    assert np.array_equal(A.col_indices.numpy(), S.indices)
    assert np.array_equal(A.values.numpy(), S.data)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_read_rounds_once_to_the_dtype(dtype):
    A = ts.read_mtx(str(BUS), dtype=dtype)
    assert A.dtype == dtype
    assert torch.equal(A.values, torch.from_numpy(scipy_csr(BUS).data).to(dtype))


def test_read_takes_str_pathlike_and_bytes_paths():
    for path in (str(BUS), BUS, os.fsencode(BUS)):
        assert ts.read_mtx(path).nnz == 4054
    with pytest.raises(TypeError, match="^read_mtx: path must be a str or os.PathLike, got int$"):
        ts.read_mtx(3)
    with pytest.raises(TypeError, match="read_mtx: dtype torch.int32 is not supported"):
        ts.read_mtx(BUS, dtype=torch.int32)


def test_write_then_read_round_trips_exactly(tmp_path):
    dense = random_dense(40, 30, 0.2, seed=4)
    A = ts.from_dense(dense)
    path = tmp_path / "a.mtx"
    ts.write_mtx(path, A)
    assert path.read_text().splitlines()[:2] == ["%%MatrixMarket matrix coordinate real general", f"40 30 {A.nnz}"]
    B = ts.read_mtx(path)
    assert B.shape == A.shape and torch.equal(B.to_dense(), dense)  # 17 digits: the same doubles
    assert torch.equal(torch.from_numpy(scipy.io.mmread(str(path)).toarray()), dense)


def test_write_symmetric_stores_one_triangle_and_reads_back(tmp_path):
    A = ts.read_mtx(BUS)
    path = tmp_path / "bus.mtx"
    ts.write_mtx(str(path), A, symmetry="symmetric")
    lines = path.read_text().splitlines()
    assert lines[0] == "%%MatrixMarket matrix coordinate real symmetric" and lines[1] == "1138 1138 2596"
    assert torch.equal(ts.read_mtx(path).to_dense(), A.to_dense())


def test_write_other_formats_fields_and_dtypes(tmp_path):
    # COO duplicates are summed; bf16 values are widened exactly.
    coo = ts.COOMatrix(torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16), torch.tensor([1, 0, 1]),
                       torch.tensor([0, 2, 0]), (2, 3))
    ts.write_mtx(tmp_path / "coo.mtx", coo)
    assert ts.read_mtx(tmp_path / "coo.mtx").to_dense().tolist() == [[0.0, 0.0, 2.0], [4.0, 0.0, 0.0]]
    # A BSRMatrix writes its non-zero entries; "array" every element, column by column.
    bsr = ts.BSRMatrix.from_dense(torch.tensor([[1.0, 0.0], [0.0, 2.5]]), block_size=2)
    ts.write_mtx(tmp_path / "arr.mtx", bsr, format="array")
    assert (tmp_path / "arr.mtx").read_text().splitlines() == [
        "%%MatrixMarket matrix array real general", "2 2", "1", "0", "0", "2.5"]
    # Banner words are case-insensitive, as in files; pattern reads back as ones.
    ts.write_mtx(tmp_path / "pat.mtx", bsr, field="Pattern", precision=10**30)
    assert (tmp_path / "pat.mtx").read_text().splitlines()[0] == "%%MatrixMarket matrix coordinate pattern general"
    assert ts.read_mtx(tmp_path / "pat.mtx").to_dense().tolist() == [[1.0, 0.0], [0.0, 1.0]]
    ts.write_mtx(tmp_path / "p3.mtx", ts.from_dense(torch.tensor([[1.0 / 3]])), precision=3)
    assert (tmp_path / "p3.mtx").read_text().splitlines()[-1] == "1 1 0.333"


def test_read_errors_carry_the_core_message():
    missing = MALFORMED / "no_such_file.mtx"
    with pytest.raises(FileNotFoundError, match=re.escape(f"cannot read '{missing}': No such file or directory")):
        ts.read_mtx(missing)
    with pytest.raises(OSError, match=re.escape(f"cannot read '{DATA}': is a directory")):
        ts.read_mtx(DATA)
    bad = MALFORMED / "bad_banner.mtx"
    with pytest.raises(ValueError, match=re.escape(f"{bad}:1: expected the banner '%%MatrixMarket matrix <format> "
                                                   "<field> <symmetry>', found '%%MatrixMarkt")):
        ts.read_mtx(bad)
    bad = MALFORMED / "bad_format.mtx"
    with pytest.raises(ValueError, match=re.escape(f"{bad}:1: expected the format 'coordinate' or 'array' in the "
                                                   "banner, found 'sparse'")):
        ts.read_mtx(bad)
    bad = MALFORMED / "index_out_of_range.mtx"
    with pytest.raises(ValueError, match=re.escape(f"{bad}:5: expected a row index in [1, 3], found '4'")) as info:
        ts.read_mtx(bad)
    assert not isinstance(info.value, (OSError, NotImplementedError))
    with pytest.raises(NotImplementedError, match="complex.mtx:1: complex matrices are not supported"):
        ts.read_mtx(MALFORMED / "complex.mtx")


def test_write_errors_name_the_argument_and_leave_the_file(tmp_path):
    path = tmp_path / "keep.mtx"
    path.write_text("unchanged")
    A = ts.from_dense(torch.tensor([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=re.escape("A is not symmetric: A(0, 1) = 2 but A(1, 0) = 0")):
        ts.write_mtx(path, A, symmetry="symmetric")
    with pytest.raises(ValueError, match="^write_mtx: symmetry = 'hermitian' is not one of general, symmetric, "
                                         "skew-symmetric$"):
        ts.write_mtx(path, A, symmetry="hermitian")
    with pytest.raises(ValueError, match="^write_mtx: field = 'complex' is not one of real, integer, pattern$"):
        ts.write_mtx(path, A, field="complex")
    with pytest.raises(ValueError, match="^write_mtx: format = 'sparse' is not one of coordinate, array$"):
        ts.write_mtx(path, A, format="sparse")
    with pytest.raises(ValueError, match="^write_mtx: precision = 0 must be >= 1$"):
        ts.write_mtx(path, A, precision=0)
    with pytest.raises(ValueError, match="integer"):
        ts.write_mtx(path, ts.from_dense(torch.tensor([[1.5]])), field="integer")
    with pytest.raises(TypeError, match="^write_mtx: matrix must be a CSRMatrix, COOMatrix or BSRMatrix, got Tensor$"):
        ts.write_mtx(path, torch.eye(2))
    with pytest.raises(TypeError, match="^write_mtx: path must be a str or os.PathLike, got NoneType$"):
        ts.write_mtx(None, A)
    assert path.read_text() == "unchanged" and os.listdir(tmp_path) == ["keep.mtx"]
    with pytest.raises(OSError, match="cannot write"):
        ts.write_mtx(tmp_path / "no_dir" / "a.mtx", A)
