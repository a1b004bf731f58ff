"""The format advisor from Python: choose_format's advice (the shape of `trnsparse advise
--json`), its calibration cache, BSRMatrix.from_csr(A, "auto"), and the named_problem and
random_blocks generators.

A calibration measures this machine for a second or more per (dtype, width), so the tests
share one cache file (the default one under a temporary XDG_CACHE_HOME) and two pairs
only: float64 at widths 1 and 8. Tests that corrupt a cache use a copy of it.
"""
import os
import threading
import time

import pytest
import torch

import trnsparse as ts

BLOCK_SIZES = [2, 3, 4, 5, 6, 8, 16, 32, 64, 128]
CANDIDATE_KEYS = {"format", "block_size", "fill", "predicted_ms"}


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory):
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(scope="module")
def cache_file(cache_home):
    """The default cache file under cache_home, as the core names it."""
    return cache_home / "trnsparse" / "calibration.txt"


@pytest.fixture(autouse=True)
def isolated_cache(cache_home, monkeypatch):
    """The default cache (from_csr(A, "auto"), calibration=None) is cache_home's, never
    the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))


@pytest.fixture(scope="module")
def elasticity():
    return ts.elasticity3d(3)  # 144 x 144, natural 3 x 3 blocks


@pytest.fixture(scope="module")
def first_advice(cache_file, elasticity):
    """The module's first call: no cache file yet, so it measures and writes one."""
    assert not cache_file.exists()
    return ts.choose_format(elasticity, calibration=cache_file)


def advice(A, **kwargs):
    """choose_format on the module's cache file (given by path, as a str)."""
    kwargs.setdefault("calibration", os.path.join(os.environ["XDG_CACHE_HOME"], "trnsparse", "calibration.txt"))
    return ts.choose_format(A, **kwargs)


def structure(a: dict) -> list:
    """The candidates without their predicted times, which depend on the calibration."""
    return [(c["format"], c["block_size"], c["fill"]) for c in a["candidates"]]


def test_advice_has_the_cli_json_shape(first_advice, cache_file):
    a = first_advice
    assert set(a) == {"candidates", "choice", "predicted_speedup_vs_csr", "calibration"}
    # (a suffix says so when it was measured under load: the tests run side by side)
    assert a["calibration"].startswith(f"measured: no cache file {cache_file}")
    assert isinstance(a["candidates"], list) and a["candidates"]
    for c in a["candidates"]:
        assert set(c) == CANDIDATE_KEYS
        assert c["format"] in ("csr", "bsr") and isinstance(c["block_size"], int)
        assert isinstance(c["fill"], float) and c["fill"] >= 1.0
        assert isinstance(c["predicted_ms"], float) and c["predicted_ms"] > 0.0
    assert set(a["choice"]) == {"format", "block_size"}
    assert isinstance(a["predicted_speedup_vs_csr"], float) and a["predicted_speedup_vs_csr"] >= 1.0


def test_choice_is_the_fastest_candidate(first_advice):
    a = first_advice
    best = min(a["candidates"], key=lambda c: c["predicted_ms"])
    assert a["choice"] == {"format": best["format"], "block_size": best["block_size"]}
    csr_ms = a["candidates"][0]["predicted_ms"]
    assert a["predicted_speedup_vs_csr"] == pytest.approx(csr_ms / best["predicted_ms"])


def test_candidates_are_csr_then_bsr_by_block_size(first_advice):
    c = first_advice["candidates"]
    assert (c[0]["format"], c[0]["block_size"], c[0]["fill"]) == ("csr", 1, 1.0)
    sizes = [k["block_size"] for k in c[1:]]
    assert all(k["format"] == "bsr" for k in c[1:])
    assert sizes == sorted(sizes) and set(sizes) <= set(BLOCK_SIZES) and 3 in sizes
    # 48 block rows of 3 are all sampled, so the estimate is exact: the blocks are full.
    assert next(k for k in c if k["block_size"] == 3)["fill"] == 1.0


def test_the_cache_is_written_then_read(first_advice, cache_file, elasticity):
    assert cache_file.read_text().startswith("trnsparse-calibration ")
    again = advice(elasticity)
    assert again["calibration"] == "cached"
    assert structure(again) == structure(first_advice)
    assert advice(elasticity) == again  # no timing: a cached calibration gives the same advice
    # calibration=None: the default file, under XDG_CACHE_HOME.
    assert ts.choose_format(elasticity)["calibration"] == "cached"


def test_a_second_width_is_added_to_the_cache(first_advice, elasticity):
    wide = advice(elasticity, width=8)
    assert wide["calibration"].startswith("measured: no speeds for fp64 width 8")
    assert structure(wide) == structure(first_advice)  # fills depend on A only
    assert advice(elasticity, width=8)["calibration"] == "cached"
    assert advice(elasticity, width=1)["calibration"] == "cached"


def test_recalibrate_measures_again_without_the_gil(first_advice, elasticity):
    # The main thread ticks every 10 ms while another measures for a second or more: a
    # measurement holding the GIL would let it tick once or twice.
    result = {}
    t = threading.Thread(target=lambda: result.update(advice(elasticity, recalibrate=True)))
    ticks = 0
    t.start()
    while t.is_alive():
        ticks += 1
        time.sleep(0.01)
    t.join()
    assert result["calibration"].startswith("measured: refresh asked")
    assert ticks > 10
    assert advice(elasticity)["calibration"] == "cached"


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupted_cache_is_measured_again_and_rewritten(first_advice, cache_file, elasticity, tmp_path, damage):
    path = tmp_path / "calibration.txt"
    text = cache_file.read_bytes()
    path.write_bytes(bytes(range(256)) * 8 if damage == "garbage" else text[: len(text) // 2])
    a = ts.choose_format(elasticity, calibration=str(path))
    assert a["calibration"].startswith("measured: ") and a["calibration"] != "measured: refresh asked"
    assert structure(a) == structure(first_advice)
    assert path.read_text().endswith("end\n")
    assert ts.choose_format(elasticity, calibration=path)["calibration"] == "cached"


def test_measure_times_every_candidate(first_advice, elasticity):
    a = advice(elasticity, measure=True)
    assert structure(a) == structure(first_advice)
    for c in a["candidates"]:
        assert set(c) == CANDIDATE_KEYS | {"measured_ms"}
        assert isinstance(c["measured_ms"], float) and c["measured_ms"] >= 0.0


def test_other_formats_are_advised_as_their_csr(first_advice, elasticity):
    expected = structure(first_advice)
    assert structure(advice(elasticity.to_coo())) == expected
    assert structure(advice(elasticity.to_scipy())) == expected
    B = ts.BSRMatrix.from_csr(elasticity, 3)  # its CSR drops the stored zeros of the blocks
    assert structure(advice(B)) == structure(advice(B.to_csr()))


def test_from_csr_auto_takes_the_fastest_bsr_candidate(first_advice, elasticity):
    a = advice(elasticity)
    bsr = [c for c in a["candidates"] if c["format"] == "bsr"]
    best = min(bsr, key=lambda c: c["predicted_ms"])["block_size"]
    B = ts.BSRMatrix.from_csr(elasticity, "auto")
    assert isinstance(B, ts.BSRMatrix) and B.block_size == best
    assert torch.equal(B.to_dense(), elasticity.to_dense())
    assert elasticity.to_bsr("auto").block_size == best
    # A threshold keeps the advised block size and drops the blocks at or under it.
    T = ts.BSRMatrix.from_csr(elasticity, "auto", threshold=0.05)
    assert T.block_size == best
    assert torch.equal(T.to_dense(), ts.BSRMatrix.from_csr(elasticity, best, threshold=0.05).to_dense())


def test_bad_arguments(elasticity, cache_file):
    with pytest.raises(ValueError, match="block_size"):
        ts.BSRMatrix.from_csr(elasticity, "bogus")
    with pytest.raises(ValueError, match="block_size"):
        ts.BSRMatrix.from_csr(elasticity, 0)
    with pytest.raises(ValueError, match="width"):
        ts.BSRMatrix.from_csr(elasticity, "auto", width=0)
    with pytest.raises(ValueError, match="width"):
        ts.choose_format(elasticity, 0, calibration=cache_file)
    for width in (1.5, True, "8"):
        with pytest.raises(TypeError, match="width"):
            ts.choose_format(elasticity, width, calibration=cache_file)
    with pytest.raises(TypeError, match="A must be"):
        ts.choose_format(elasticity.to_dense(), calibration=cache_file)
    with pytest.raises(TypeError, match="calibration"):
        ts.choose_format(elasticity, calibration=3)
    with pytest.raises(ValueError, match="calibration"):
        ts.choose_format(elasticity, calibration="")


def test_named_problem():
    assert torch.equal(ts.named_problem("elasticity3d:3").to_dense(), ts.elasticity3d(3).to_dense())
    P = ts.named_problem("poisson3d:4", dtype=torch.float32)
    assert P.shape == (64, 64) and P.nnz == 64 * 7 - 6 * 16 and P.dtype == torch.float32
    assert ts.named_problem("block_stencil3d:3:2").shape == (54, 54)
    R = ts.named_problem("random_blocks:64:8:0.25")
    assert torch.equal(R.to_dense(), ts.random_blocks(64, 8, 0.25).to_dense())
    for spec in ("nosuch:3", "poisson3d:x", "poisson3d", "poisson3d:0"):
        with pytest.raises(ValueError, match=spec):
            ts.named_problem(spec)
    with pytest.raises(TypeError, match="spec"):
        ts.named_problem(3)


def test_random_blocks():
    R = ts.random_blocks(64, 8, 0.25, seed=3)
    assert R.shape == (64, 64) and R.dtype == torch.float64
    B = ts.BSRMatrix.from_csr(R, 8)
    assert 0 < B.n_blocks < 64 and R.nnz == B.n_blocks * 64  # stored blocks are full
    assert bool((R.values >= -1).all() and (R.values < 1).all())
    assert torch.equal(ts.random_blocks(64, 8, 0.25, seed=3).to_dense(), R.to_dense())
    assert not torch.equal(ts.random_blocks(64, 8, 0.25, seed=4).to_dense(), R.to_dense())
    assert ts.random_blocks(50, 8, 1.0, dtype=torch.bfloat16).nnz == 50 * 50  # edge blocks cut at n
    assert ts.random_blocks(50, 8, 0.0).nnz == 0
    for args in ((-1, 8, 0.5), (64, 0, 0.5), (64, 8, 1.5)):
        with pytest.raises(ValueError, match="random_blocks"):
            ts.random_blocks(*args)
    with pytest.raises(ValueError, match="seed"):
        ts.random_blocks(64, 8, 0.5, seed=-1)
    with pytest.raises(TypeError, match="dtype"):
        ts.random_blocks(64, 8, 0.5, dtype=torch.float16)
