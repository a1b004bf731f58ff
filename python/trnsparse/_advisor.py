"""The format advisor: which format (CSR, or BSR with a block size) runs a matrix's
products fastest on this machine, predicted from its sampled fill ratios and this
machine's speed per stored entry (a calibration measured once per dtype and width, then
read from a cache file). The advice is the CLI's `trnsparse advise --json`."""
from __future__ import annotations

import os

from . import _core
from ._formats import BSRMatrix, COOMatrix, CSRMatrix, _scipy, from_scipy
from ._interop import int_arg

_WHO = "choose_format"


def _csr_input(A) -> CSRMatrix:
    """A as CSR: COO and BSR are converted (BSR drops the zeros inside its blocks), as is
    a scipy.sparse matrix (from_scipy)."""
    if isinstance(A, CSRMatrix):
        return A
    if isinstance(A, (COOMatrix, BSRMatrix)):
        return A.to_csr()
    if type(A).__module__.startswith("scipy.sparse") and _scipy().issparse(A):
        return from_scipy(A)
    raise TypeError(f"{_WHO}: A must be a CSRMatrix, COOMatrix, BSRMatrix or scipy.sparse matrix, "
                    f"got {type(A).__name__}")


def _calibration_path(calibration) -> str | bytes:
    """The cache file's path; "" asks the core for its default."""
    if calibration is None:
        return ""
    if not isinstance(calibration, (str, bytes, os.PathLike)):
        raise TypeError(f"{_WHO}: calibration must be a path (str or os.PathLike) or None, "
                        f"got {type(calibration).__name__}")
    path = os.fspath(calibration)
    if not path:
        raise ValueError(f"{_WHO}: calibration is an empty path; pass None for the default cache file")
    return path


def choose_format(A, width: int = 1, *, calibration: str | os.PathLike | None = None, recalibrate: bool = False,
                  measure: bool = False) -> dict:
    """Which format runs A's products with `width` columns (1: SpMV) fastest, predicted:
    `{"candidates": [{"format", "block_size", "fill", "predicted_ms"}, ...], "choice":
    {"format", "block_size"}, "predicted_speedup_vs_csr", "calibration"}`, CSR first
    (block_size 1), then BSR by block size; the choice has the smallest predicted_ms.

    The calibration for A's dtype and `width` is read from the file `calibration`
    ($XDG_CACHE_HOME/trnsparse/calibration.txt by default), or measured (a few seconds)
    and saved when the file is missing, invalid, lacks them, or `recalibrate` is set; the
    "calibration" entry says which ("cached" or "measured: <reason>"). `measure` also
    times one product in each candidate format ("measured_ms")."""
    A = _csr_input(A)
    width = int_arg(width, _WHO, "width", 1)
    path = _calibration_path(calibration)
    candidates, (fmt, block_size), speedup, status = _core.choose_format(A._handle(), width, path, bool(recalibrate),
                                                                         bool(measure))
    out = []
    for c_fmt, c_block, fill, predicted, measured in candidates:
        c = {"format": c_fmt, "block_size": c_block, "fill": fill, "predicted_ms": predicted}
        if measure:
            c["measured_ms"] = measured
        out.append(c)
    return {"candidates": out, "choice": {"format": fmt, "block_size": block_size},
            "predicted_speedup_vs_csr": speedup, "calibration": status}
