"""The sparse formats: plain mutable dataclasses of torch tensors (int64 indices).

Each converts to the C++ core's matrix on use (`_handle()`: the arrays are checked
here, copied and validated there) and is rebuilt from the core's results without a
copy (`_from_handle`: the tensors are views of the result's memory).

Conversion cache: CSRMatrix and BSRMatrix keep the core matrix of their last use
(`_core_cache`). The next use compares the current arrays with it bit for bit: equal
arrays reuse it without a copy or a validation, equal index arrays reuse its validated
structure with the new values, anything else (arrays changed in place, through numpy
views or `.data`, or tensors replaced) builds and validates a new one. The comparison
is of contents, not of tensor identities or version counters, so no change can be
missed. The cost is one private copy of the arrays kept while the matrix lives.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import _core
from ._interop import (
    ShapeError,
    as_tensor,
    check,
    dense_arg,
    dtype_name,
    dtype_of_name,
    from_array,
    index_tensor,
    int_arg,
    values_tensor,
)

DEFAULT_BLOCK_SIZE = 128


def _shape(shape, who: str) -> tuple[int, int]:
    if len(shape) != 2:
        raise ShapeError(f"{who}: shape must have two entries, got {tuple(shape)}")
    rows, cols = (int(s) for s in shape)
    if rows < 0 or cols < 0:
        raise ValueError(f"{who}: shape {rows} x {cols} is negative")
    return rows, cols


def _dense_input(A, who: str) -> torch.Tensor:
    A = as_tensor(A, who, "A")
    if A.dim() != 2:
        raise ShapeError(f"{who}: A must be 2-D, got shape {tuple(A.shape)}")
    dtype_name(A.dtype, who)
    return A.contiguous()


def _scipy():
    import scipy.sparse

    return scipy.sparse


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor (no copy); bf16 has no numpy type and is widened."""
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _from_core(cls, **fields):
    """An instance of the dataclass `cls` over arrays the core returned, which it has
    checked already: __post_init__'s normalisation is skipped (a measurable part of a
    small product's call)."""
    m = object.__new__(cls)
    m.__dict__.update(fields, _core_cache=None)
    return m


def _state_without_cache(m) -> dict:
    """The attributes to copy or pickle: the conversion cache is the core's, not data."""
    return {**m.__dict__, "_core_cache": None}


class _EntryMatrix:
    """What CSRMatrix and COOMatrix share: one stored value per entry in `values`, a
    logical `shape`, and the properties and repr derived from them. A plain base class
    (not a dataclass), so each subclass's dataclass fields stay exactly its own."""

    _name = ""  # the class name repr shows, set by each format

    def _check_entries(self, index_fields: tuple[str, ...]) -> None:
        """Normalises shape, values and the named index tensors (errors name the class)."""
        self.shape = _shape(self.shape, self._name)
        self.values = as_tensor(self.values, self._name, "values")
        for field in index_fields:
            setattr(self, field, index_tensor(getattr(self, field), self._name, field))

    @property
    def nnz(self) -> int:
        return int(self.values.numel())

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def density(self) -> float:
        """Stored entries over all entries (0.0 for an empty shape)."""
        rows, cols = self.shape
        return self.nnz / (rows * cols) if rows * cols else 0.0

    def __repr__(self) -> str:
        return f"{self._name}(shape={self.shape}, nnz={self.nnz}, density={self.density:.4g}, dtype={self.dtype})"


@dataclass(repr=False)
class CSRMatrix(_EntryMatrix):
    """Compressed sparse rows: row i holds `values[row_ptrs[i]:row_ptrs[i+1]]` at columns
    `col_indices[...]` (strictly increasing within a row). Operations reuse the core's
    validated copy of the arrays while they hold the same bits (the conversion cache)."""

    values: torch.Tensor
    col_indices: torch.Tensor
    row_ptrs: torch.Tensor
    shape: tuple[int, int]
    _name = "CSRMatrix"

    def __post_init__(self):
        self._check_entries(("col_indices", "row_ptrs"))
        self._core_cache = None

    def __getstate__(self):
        return _state_without_cache(self)

    def __matmul__(self, other):
        """`A @ B`: trnsparse.matmul for a sparse B, spmm (spmv) for a 2-D (1-D) tensor."""
        return _spgemm.matmul_operator(self, other)

    def _handle(self, values: torch.Tensor | None = None):
        """The core's copy of this matrix (with `values` in place of self.values if given):
        the cached one while the arrays hold the same bits (see the module docstring)."""
        who = "CSRMatrix"
        rows, cols = self.shape
        v = values_tensor(self.values if values is None else values, self.dtype, who, "values")
        ci = index_tensor(self.col_indices, who, "col_indices")
        rp = index_tensor(self.row_ptrs, who, "row_ptrs")
        nnz = v.numel()
        if v.dim() != 1:
            raise ShapeError(f"{who}: values must be 1-D, got shape {tuple(v.shape)}")
        if rp.dim() != 1 or rp.numel() != rows + 1:
            raise ShapeError(f"{who}: row_ptrs has {rp.numel()} entries, expected rows + 1 = {rows + 1}")
        if ci.numel() != nnz:
            raise ShapeError(f"{who}: col_indices has {ci.numel()} entries but values has {nnz}")
        h = _core.csr(dtype_name(v.dtype, who), rows, cols, rp.data_ptr(), ci.data_ptr(), v.data_ptr(), nnz, False,
                      self._core_cache)
        self._core_cache = h
        return h

    @classmethod
    def _from_handle(cls, h) -> "CSRMatrix":
        rp, ci, v = h.arrays()
        return _from_core(cls, values=from_array(v, dtype_of_name(h.dtype)), col_indices=from_array(ci),
                          row_ptrs=from_array(rp), shape=(h.rows, h.cols))

    def to_dense(self) -> torch.Tensor:
        return from_array(_core.to_dense(self._handle()), self.dtype)

    def to_coo(self) -> "COOMatrix":
        counts = self.row_ptrs[1:] - self.row_ptrs[:-1]
        rows = torch.repeat_interleave(torch.arange(self.shape[0], dtype=torch.int64), counts)
        return COOMatrix(self.values.clone(), rows, self.col_indices.clone(), self.shape)

    def to_csr(self) -> "CSRMatrix":
        return self

    def to_bsr(self, block_size: int | str = DEFAULT_BLOCK_SIZE, threshold: float = 0.0, *,
               width: int = 1) -> "BSRMatrix":
        return BSRMatrix.from_csr(self, block_size, threshold, width=width)

    def to_scipy(self):
        """A scipy.sparse.csr_matrix sharing this matrix's arrays (bf16 is widened to float32)."""
        return _scipy().csr_matrix(
            (_to_numpy(self.values), _to_numpy(self.col_indices), _to_numpy(self.row_ptrs)), shape=self.shape)

    def numpy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(values, col_indices, row_ptrs) as numpy views of the tensors."""
        return _to_numpy(self.values), _to_numpy(self.col_indices), _to_numpy(self.row_ptrs)

    @classmethod
    def from_scipy(cls, m) -> "CSRMatrix":
        return from_scipy(m)

    @classmethod
    def from_dense(cls, A, threshold: float = 0.0) -> "CSRMatrix":
        return from_dense(A, threshold)


@dataclass(repr=False)
class COOMatrix(_EntryMatrix):
    """Coordinate triplets in any order; duplicates are summed by conversions."""

    values: torch.Tensor
    row_indices: torch.Tensor
    col_indices: torch.Tensor
    shape: tuple[int, int]
    _name = "COOMatrix"

    def __post_init__(self):
        self._check_entries(("row_indices", "col_indices"))

    def to_csr(self) -> CSRMatrix:
        """Sorted row-major with duplicates summed."""
        who = "COOMatrix"
        v = values_tensor(self.values, self.dtype, who, "values")
        ri = index_tensor(self.row_indices, who, "row_indices")
        ci = index_tensor(self.col_indices, who, "col_indices")
        check(v.dim() == 1 and ri.numel() == v.numel() and ci.numel() == v.numel(),
              f"{who}: row_indices, col_indices and values have {ri.numel()}, {ci.numel()} and {v.numel()} "
              "entries; they must agree")
        rows, cols = self.shape
        return CSRMatrix._from_handle(_core.csr_from_coo(dtype_name(self.dtype, who), rows, cols, ri.data_ptr(),
                                                         ci.data_ptr(), v.data_ptr(), v.numel()))

    def to_coo(self) -> "COOMatrix":
        return self

    def to_dense(self) -> torch.Tensor:
        return self.to_csr().to_dense()

    def to_scipy(self):
        """A scipy.sparse.coo_matrix sharing this matrix's arrays (bf16 is widened to float32)."""
        return _scipy().coo_matrix(
            (_to_numpy(self.values), (_to_numpy(self.row_indices), _to_numpy(self.col_indices))), shape=self.shape)

    def numpy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(values, row_indices, col_indices) as numpy views of the tensors."""
        return _to_numpy(self.values), _to_numpy(self.row_indices), _to_numpy(self.col_indices)


@dataclass(repr=False)
class BSRMatrix:
    """Block sparse rows: `blocks` (n_blocks, b, b), block row bi holds blocks
    `block_row_ptrs[bi]:block_row_ptrs[bi+1]` at block columns `block_col_indices[...]`.
    `shape` is the logical shape; edge blocks are zero-padded past it. Operations reuse
    the core's validated copy of the arrays while they hold the same bits (the conversion
    cache)."""

    blocks: torch.Tensor
    block_col_indices: torch.Tensor
    block_row_ptrs: torch.Tensor
    shape: tuple[int, int]
    block_size: int = DEFAULT_BLOCK_SIZE

    def __post_init__(self):
        self.shape = _shape(self.shape, "BSRMatrix")
        self.block_size = int(self.block_size)
        self.blocks = as_tensor(self.blocks, "BSRMatrix", "blocks")
        self.block_col_indices = index_tensor(self.block_col_indices, "BSRMatrix", "block_col_indices")
        self.block_row_ptrs = index_tensor(self.block_row_ptrs, "BSRMatrix", "block_row_ptrs")
        self._core_cache = None

    def __getstate__(self):
        return _state_without_cache(self)

    def __matmul__(self, other):
        """`A @ B`: trnsparse.matmul for a sparse B, spmm (spmv) for a 2-D (1-D) tensor."""
        return _spgemm.matmul_operator(self, other)

    @property
    def n_blocks(self) -> int:
        return int(self.blocks.shape[0]) if self.blocks.dim() else 0

    @property
    def nnz(self) -> int:
        """Stored values: n_blocks * block_size²."""
        return self.n_blocks * self.block_size * self.block_size

    @property
    def dtype(self) -> torch.dtype:
        return self.blocks.dtype

    @property
    def block_grid(self) -> tuple[int, int]:
        """(block rows, block columns): the padded shape in blocks."""
        b = self.block_size
        return -(-self.shape[0] // b), -(-self.shape[1] // b)

    @property
    def density(self) -> float:
        """Stored blocks over all blocks of the grid (0.0 for an empty grid)."""
        br, bc = self.block_grid
        return self.n_blocks / (br * bc) if br * bc else 0.0

    def __repr__(self) -> str:
        return (f"BSRMatrix(shape={self.shape}, block_size={self.block_size}, n_blocks={self.n_blocks}, "
                f"density={self.density:.4g}, dtype={self.dtype})")

    def _handle(self, blocks: torch.Tensor | None = None):
        """The core's copy of this matrix (with `blocks` in place of self.blocks if given):
        the cached one while the arrays hold the same bits (see the module docstring)."""
        who = "BSRMatrix"
        rows, cols = self.shape
        b = self.block_size
        if b < 1:
            raise ValueError(f"{who}: block_size = {b} must be >= 1")
        v = values_tensor(self.blocks if blocks is None else blocks, self.dtype, who, "blocks")
        ci = index_tensor(self.block_col_indices, who, "block_col_indices")
        rp = index_tensor(self.block_row_ptrs, who, "block_row_ptrs")
        n = ci.numel()
        if v.dim() != 3 or tuple(v.shape) != (n, b, b):
            raise ShapeError(f"{who}: blocks has shape {tuple(v.shape)}, expected (n_blocks, b, b) = ({n}, {b}, {b})")
        block_rows = -(-rows // b)
        if rp.dim() != 1 or rp.numel() != block_rows + 1:
            raise ShapeError(f"{who}: block_row_ptrs has {rp.numel()} entries, expected block rows + 1 = "
                             f"{block_rows + 1}")
        h = _core.bsr(dtype_name(v.dtype, who), rows, cols, b, rp.data_ptr(), rp.numel(), ci.data_ptr(), v.data_ptr(),
                      n, self._core_cache)
        self._core_cache = h
        return h

    @classmethod
    def _from_handle(cls, h) -> "BSRMatrix":
        rp, ci, blocks = h.arrays()
        return _from_core(cls, blocks=from_array(blocks, dtype_of_name(h.dtype)), block_col_indices=from_array(ci),
                          block_row_ptrs=from_array(rp), shape=(h.rows, h.cols), block_size=int(h.block_size))

    @classmethod
    def from_dense(cls, A, block_size: int = DEFAULT_BLOCK_SIZE, threshold: float = 0.0) -> "BSRMatrix":
        """Pads A to whole blocks and stores a block iff its largest magnitude is strictly
        above `threshold`; blocks in block-row, then block-column order."""
        A = _dense_input(A, "BSRMatrix.from_dense")
        return cls._from_handle(_core.bsr_from_dense(dtype_name(A.dtype, "BSRMatrix.from_dense"), dense_arg(A),
                                                     int(block_size), float(threshold)))

    @classmethod
    def from_csr(cls, csr: CSRMatrix, block_size: int | str = DEFAULT_BLOCK_SIZE, threshold: float = 0.0, *,
                 width: int = 1) -> "BSRMatrix":
        """Stores a block iff one of csr's entries in it has magnitude strictly above `threshold`.
        block_size="auto" is the block size of choose_format(csr, width)'s fastest BSR
        candidate, with the calibration in the default cache file (the first use for a
        dtype and width measures this machine for a few seconds)."""
        who = "BSRMatrix.from_csr"
        width = int_arg(width, who, "width", 1)
        if isinstance(block_size, str):
            if block_size != "auto":
                raise ValueError(f'{who}: block_size = {block_size!r} must be an int or "auto"')
            return cls._from_handle(_core.csr_to_bsr_auto(csr._handle(), width, float(threshold)))
        return cls._from_handle(_core.csr_to_bsr(csr._handle(), int(block_size), float(threshold)))

    def to_dense(self) -> torch.Tensor:
        """The logical shape (padding dropped)."""
        return from_array(_core.to_dense(self._handle()), self.dtype)

    def to_csr(self) -> CSRMatrix:
        """Every non-zero entry of the logical shape (zeros inside blocks are dropped)."""
        return CSRMatrix._from_handle(_core.bsr_to_csr(self._handle()))

    def to_coo(self) -> COOMatrix:
        return self.to_csr().to_coo()

    def to_scipy(self):
        """scipy's bsr_matrix sharing the arrays when the shape is whole blocks; scipy cannot
        hold a padded shape, so otherwise a csr_matrix of the logical shape."""
        b = self.block_size
        if self.shape[0] % b or self.shape[1] % b:
            return self.to_csr().to_scipy()
        return _scipy().bsr_matrix(
            (_to_numpy(self.blocks), _to_numpy(self.block_col_indices), _to_numpy(self.block_row_ptrs)),
            shape=self.shape, blocksize=(b, b))

    def numpy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(blocks, block_col_indices, block_row_ptrs) as numpy views of the tensors."""
        return _to_numpy(self.blocks), _to_numpy(self.block_col_indices), _to_numpy(self.block_row_ptrs)


def from_dense(A, threshold: float = 0.0) -> CSRMatrix:
    """CSR of the entries with magnitude strictly above `threshold`, row-major."""
    A = _dense_input(A, "from_dense")
    return CSRMatrix._from_handle(_core.csr_from_dense(dtype_name(A.dtype, "from_dense"), dense_arg(A),
                                                       float(threshold)))


def from_scipy(m) -> CSRMatrix:
    """CSR from any scipy.sparse matrix (sorted, duplicates summed). float32 and float64
    keep their dtype; other real types become float64."""
    sp = _scipy()
    if not sp.issparse(m):
        raise TypeError(f"from_scipy: expected a scipy.sparse matrix, got {type(m).__name__}")
    m = m.tocsr()
    data = m.data if m.data.dtype in (np.float32, np.float64) else m.data.astype(np.float64)
    values = torch.from_numpy(np.ascontiguousarray(data))
    col = torch.from_numpy(np.ascontiguousarray(m.indices, dtype=np.int64))
    ptr = torch.from_numpy(np.ascontiguousarray(m.indptr, dtype=np.int64))
    rows, cols = m.shape
    h = _core.csr(dtype_name(values.dtype, "from_scipy"), rows, cols, ptr.data_ptr(), col.data_ptr(),
                  values.data_ptr(), values.numel(), True, None)
    return CSRMatrix._from_handle(h)


def eye_sparse(n: int, dtype: torch.dtype = torch.float32) -> CSRMatrix:
    """The n x n identity as CSR."""
    return CSRMatrix._from_handle(_core.eye_csr(dtype_name(dtype, "eye_sparse"), int(n)))


def poisson3d(n: int, dtype: torch.dtype = torch.float64) -> CSRMatrix:
    """The 7-point Laplacian on an n x n x n grid (Dirichlet), n^3 rows, SPD."""
    return CSRMatrix._from_handle(_core.generate("poisson3d", int(n), 1, dtype_name(dtype, "poisson3d")))


def elasticity3d(n: int, dtype: torch.dtype = torch.float64) -> CSRMatrix:
    """Linear elasticity on n^3 trilinear hexahedra clamped at x = 0: 3 unknowns per free
    node, natural 3 x 3 blocks (BSRMatrix.from_csr(A, 3) stores them exactly), 27 nodes
    coupled per block row; SPD, 3 n (n + 1)^2 rows."""
    return CSRMatrix._from_handle(_core.generate("elasticity3d", int(n), 3, dtype_name(dtype, "elasticity3d")))


def elasticity3d_coordinates(n: int) -> torch.Tensor:
    """The (x, y, z) coordinates of elasticity3d(n)'s free nodes in its node order, a
    float64 tensor (nodes, 3): what the rigid-body modes of AMG's near-nullspace need."""
    return from_array(_core.elasticity3d_coordinates(int(n)), torch.float64)


def convdiff3d(n: int, peclet: float = 1.0, dtype: torch.dtype = torch.float64) -> CSRMatrix:
    """Upwind convection–diffusion on an n x n x n grid: poisson3d's stencil plus
    first-order upwind convection along v = (1, 1/2, 1/4) at cell Péclet number `peclet`
    (an M-matrix, nonsymmetric for peclet > 0); n^3 rows."""
    return named_problem(f"convdiff3d:{int(n)}:{float(peclet)!r}", dtype)


def block_stencil3d(n: int, fields: int = 5, dtype: torch.dtype = torch.float64) -> CSRMatrix:
    """A CFD-like 7-point stencil on an n x n x n grid with `fields` unknowns per node,
    coupled by dense fields x fields blocks; nonsymmetric, fields n^3 rows."""
    return CSRMatrix._from_handle(_core.generate("block_stencil3d", int(n), int(fields),
                                                 dtype_name(dtype, "block_stencil3d")))


def random_blocks(n: int, block_size: int, block_density: float, seed: int = 0,
                  dtype: torch.dtype = torch.float64) -> CSRMatrix:
    """An n x n matrix of block_size x block_size blocks, each present with probability
    `block_density` and then full (edge blocks cut at n), values uniform in [-1, 1): the
    same matrix for a seed on every platform."""
    seed = int_arg(seed, "random_blocks", "seed", 0)
    if seed >= 1 << 64:
        raise ValueError(f"random_blocks: seed = {seed} must be < 2**64")
    return CSRMatrix._from_handle(_core.random_blocks(int(n), int(block_size), float(block_density), seed,
                                                      dtype_name(dtype, "random_blocks")))


def named_problem(spec: str, dtype: torch.dtype = torch.float64) -> CSRMatrix:
    """The matrix a problem specification names, as the CLI's --problem takes it:
    "poisson3d:N", "elasticity3d:N", "convdiff3d:N[:PECLET]", "block_stencil3d:N[:FIELDS]"
    or "random_blocks:N:B:DENSITY" (seed 0)."""
    if not isinstance(spec, str):
        raise TypeError(f"named_problem: spec must be a str, got {type(spec).__name__}")
    return CSRMatrix._from_handle(_core.named_problem(spec, dtype_name(dtype, "named_problem")))


# `A @ B` calls into _spgemm, which imports this module's classes: it is imported here, once
# they exist, rather than in __matmul__, which runs on every product. _spgemm reads the
# modules that import this one (_ops) as modules, so any of them may be imported first.
from . import _spgemm  # noqa: E402
