"""bench/plot.py turns bench JSON lines into decodable PNGs, and fails clearly without data.

The fixture data/bench_sample.jsonl holds rows of `trnsparse bench --json` at tiny sizes
(sections bsr fp32 and bf16, spmv, solve, attn, krylov), rows of bench/attention_models.py's
schema written by hand, a progress line and a blank line.
"""
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pytest

ROOT = Path(__file__).resolve().parents[2]
PLOT = ROOT / "bench" / "plot.py"
SAMPLE = Path(__file__).resolve().parent / "data" / "bench_sample.jsonl"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_plot(*args):
    return subprocess.run([sys.executable, str(PLOT), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_all_plots_from_the_sample(tmp_path):
    result = run_plot(SAMPLE, "--out-dir", tmp_path)
    assert result.returncode == 0, result.stderr
    names = ("crossover", "roofline", "attention", "solvers")
    assert result.stdout.split() == [str(tmp_path / f"{n}.png") for n in names]
    assert "skipped 1 line" in result.stderr  # the progress line; the blank one is not counted
    for name in names:
        path = tmp_path / f"{name}.png"
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        image = matplotlib.image.imread(path)
        height, width, channels = image.shape
        assert 300 <= height <= 3000 and 400 <= width <= 4000 and channels in (3, 4), (name, image.shape)
        assert image.std() > 0.01, f"{name}.png is blank"


def test_which_selects_plots(tmp_path):
    result = run_plot(SAMPLE, "--out-dir", tmp_path, "--which", "roofline")
    assert result.returncode == 0, result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["roofline.png"]


@pytest.mark.parametrize("text", ["progress: n = 512 ...\n\n", '{"op": "sgemm", "gflops": 300}\n[1, 2]\n'])
def test_no_usable_rows_fails_with_a_message(tmp_path, text):
    data = tmp_path / "empty.jsonl"
    data.write_text(text)
    result = run_plot(data, "--out-dir", tmp_path / "out")
    assert result.returncode != 0
    assert "no plot had data" in result.stderr
    assert not (tmp_path / "out").exists()
