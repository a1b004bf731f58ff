"""Shared fixtures of the Python tests: seeded random sparse matrices and their dense twins."""
import pytest
import torch

DTYPES = [torch.float32, torch.float64, torch.bfloat16]
# Tolerances against a float64 reference, by dtype: accumulation order (fp32) and bf16
# rounding of inputs and outputs.
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2}


def random_dense(rows, cols, density, seed, dtype=torch.float64):
    """A rows x cols matrix with about `density` of its entries uniform in [-1, 1), the rest zero.
    Values are rounded to `dtype` first so the float64 reference sees the same operands."""
    g = torch.Generator().manual_seed(seed)
    values = torch.rand(rows, cols, generator=g, dtype=torch.float64) * 2 - 1
    keep = torch.rand(rows, cols, generator=g, dtype=torch.float64) < density
    return (values * keep).to(dtype)


def random_dense_operand(rows, cols, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(rows, cols, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)


def assert_close(actual, expected, dtype):
    """actual (any dtype) equals the float64 `expected` up to TOL[dtype] relative to its scale."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = max(1.0, float(expected.abs().max())) if expected.numel() else 1.0
    err = float((actual.double() - expected).abs().max()) if expected.numel() else 0.0
    assert err <= TOL[dtype] * scale, f"max error {err} > {TOL[dtype] * scale}"


@pytest.fixture(params=DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def dtype(request):
    return request.param
