"""Package surface: version, backends, the trnsparse.nki shim, the GIL released by kernels."""
import sys
import threading
import time

import pytest
import torch

import trnsparse as ts
import trnsparse.nki


def test_version_matches_the_library():
    assert isinstance(ts.__version__, str) and ts.__version__.count(".") == 2
    assert ts.__version__ == ts._core.__version__


def test_backends():
    assert ts.HAS_NKI is False
    assert ts.get_backend() == "auto"
    A = ts.BSRMatrix.from_dense(torch.randn(50, 40, generator=torch.Generator().manual_seed(1)), block_size=8)
    B = torch.randn(40, 6, generator=torch.Generator().manual_seed(2))
    try:
        results = {}
        for name in ("reference", "cpu", "pytorch", "auto"):
            ts.set_backend(name)
            assert ts.get_backend() == name
            results[name] = ts.bsr_spmm(A, B)
        for name in ("cpu", "pytorch"):
            torch.testing.assert_close(results[name], results["reference"], rtol=1e-5, atol=1e-5)
        with pytest.raises(RuntimeError, match="not available"):
            ts.set_backend("nki")
        assert ts.get_backend() == "auto"
        with pytest.raises(ValueError, match="unknown backend"):
            ts.set_backend("gpu")
    finally:
        ts.set_backend("auto")


def test_nki_shim_exports_the_same_objects():
    assert trnsparse.nki.HAS_NKI is ts.HAS_NKI
    assert trnsparse.nki.set_backend is ts.set_backend and trnsparse.nki.get_backend is ts.get_backend


def test_public_names():
    for name in ("CSRMatrix", "COOMatrix", "BSRMatrix", "from_dense", "from_scipy", "eye_sparse", "spmv", "spmm",
                 "spmv_symmetric", "sparse_add", "sparse_scale", "sparse_transpose", "nnz_per_row", "bsr_spmm",
                 "bsr_diagonal", "set_backend", "get_backend", "HAS_NKI", "__version__", "choose_format",
                 "named_problem", "random_blocks", "triangle"):
        assert hasattr(ts, name), name


def test_kernels_release_the_gil():
    # With an endless switch interval, the GIL changes hands only when its holder lets it
    # go. The counting thread yields it after every tick; the main thread then holds it
    # except where the core releases it, so the counter moves during the kernel call
    # (a bare _core call: torch operations release the GIL themselves) only if the
    # kernel runs without the GIL.
    A = ts.BSRMatrix.from_dense(torch.ones(512, 512), block_size=64)._handle()
    B = torch.ones(512, 256)
    arg = ts._interop.dense_arg(B)
    done = threading.Event()
    ticks = []

    def count():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    t = threading.Thread(target=count)
    t.start()
    try:
        # The counter may not be scheduled before a call ends on a busy machine: up to 50
        # calls. With the GIL held, every one of them sees exactly zero ticks.
        during = 0
        for _ in range(50):
            before = len(ticks)
            ts._core.bsr_spmm(A, arg)
            during = len(ticks) - before
            if during:
                break
    finally:
        done.set()
        t.join()
        sys.setswitchinterval(interval)
    assert during > 0
