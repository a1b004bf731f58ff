"""Matrix Market files through the C++ reader and writer (the CLI's `info`, `convert`).

`read_mtx` returns the file's full matrix as a CSRMatrix: symmetric and skew-symmetric
files are expanded, pattern entries are 1, duplicates are summed, explicit zeros are
kept. `write_mtx` writes a CSR, COO or BSR matrix with the banner words given. Both
raise the core's errors with the core's messages, which name the file and, for
malformed content, the 1-based line.
"""
from __future__ import annotations

import os

import torch

from . import _core
from ._formats import BSRMatrix, COOMatrix, CSRMatrix
from ._interop import dtype_name, int_arg

_FORMATS = ("coordinate", "array")
_FIELDS = ("real", "integer", "pattern")
_SYMMETRIES = ("general", "symmetric", "skew-symmetric")


def _path(path, who: str) -> str:
    """A str or os.PathLike (bytes too) as the str the core opens."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{who}: path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fsdecode(os.fspath(path))


def _banner_word(value, choices: tuple[str, ...], who: str, name: str) -> str:
    """`value` as the banner word the core takes; the banner is case-insensitive, so is this."""
    if not isinstance(value, str):
        raise TypeError(f"{who}: {name} must be a str, got {type(value).__name__}")
    word = value.lower()
    if word not in choices:
        raise ValueError(f"{who}: {name} = {value!r} is not one of {', '.join(choices)}")
    return word


def read_mtx(path, dtype: torch.dtype = torch.float64) -> CSRMatrix:
    """The matrix of a Matrix Market file as a CSRMatrix of `dtype` (float64, float32 or
    bfloat16; values are read as float64 and rounded once).

    Reads `coordinate` and `array` files with `real`, `integer` or `pattern` values and
    `general`, `symmetric` or `skew-symmetric` symmetry. The result is the full matrix:
    a symmetric file's mirror entries are added, a pattern entry is 1, duplicates are
    summed and explicit zeros are kept.

    Raises FileNotFoundError (an OSError) for a missing file and OSError for one that
    cannot be read, ValueError for malformed content (the message names the file and
    line, e.g. "bad.mtx:5: expected a row index in [1, 3], found '4'") and NotImplementedError
    for `complex` or `hermitian` files.
    """
    who = "read_mtx"
    path = _path(path, who)
    name = dtype_name(dtype, who)
    try:
        handle = _core.read_matrix_market(path, name)
    except OSError as e:
        # The core reports every file it cannot open as an OSError; a missing one is the
        # common case and has Python's own subclass.
        if not os.path.lexists(path):
            raise FileNotFoundError(str(e)) from None
        raise
    return CSRMatrix._from_handle(handle)


def write_mtx(path, matrix, *, symmetry: str = "general", field: str = "real", format: str = "coordinate",
              precision: int = 17) -> None:
    """Writes a CSRMatrix, COOMatrix or BSRMatrix as a Matrix Market file.

    - symmetry: "general", "symmetric" or "skew-symmetric". The symmetric kinds write
      the lower triangle (strictly lower for skew-symmetric) and require the matrix to
      be so, or raise ValueError naming the first pair that differs.
    - field: "real", "integer" (every value an integer) or "pattern" (positions only;
      not with "array" or "skew-symmetric").
    - format: "coordinate" (the stored entries, row by row) or "array" (every element,
      column by column).
    - precision: significant digits of real values; 17 (the default) writes the
      shortest text that reads back as the same float64.

    COO duplicates are summed and explicit zeros are written; a BSRMatrix writes its
    non-zero entries (as `to_csr()`). Values are widened to float64, so every dtype is
    written exactly. The file is written to a temporary beside `path` and renamed over
    it: a failure leaves no partial file and an existing file unchanged.
    """
    who = "write_mtx"
    path = _path(path, who)
    if not isinstance(matrix, (CSRMatrix, COOMatrix, BSRMatrix)):
        raise TypeError(f"{who}: matrix must be a CSRMatrix, COOMatrix or BSRMatrix, got {type(matrix).__name__}")
    words = (_banner_word(format, _FORMATS, who, "format"), _banner_word(field, _FIELDS, who, "field"),
             _banner_word(symmetry, _SYMMETRIES, who, "symmetry"))
    # The core writes the shortest exact text from 17 digits on, so larger values mean 17
    # (and need not fit the core's int).
    digits = min(int_arg(precision, who, "precision", 1), 17)
    csr = matrix if isinstance(matrix, CSRMatrix) else matrix.to_csr()
    _core.write_matrix_market(path, csr._handle(), *words, digits)


__all__ = ["read_mtx", "write_mtx"]
