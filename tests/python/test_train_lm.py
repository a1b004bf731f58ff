"""Smoke test of examples/python/train_lm.py at a tiny size: the dense torch run and the
trnsparse causal run follow the same loss curve, the JSON and PNG are written, and a data
path without text stops it with a message. Needs matplotlib (python3-matplotlib)."""
import importlib.util
import json
import math
import pathlib

import pytest
import torch

import trnsparse as ts

pytest.importorskip("matplotlib")

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "python" / "train_lm.py"
TINY = ["--layers", "2", "--width", "32", "--heads", "2", "--context", "256", "--batch", "1", "--steps", "3"]


@pytest.fixture
def train_lm():
    """The example as a module; the thread counts its main() sets are put back after."""
    spec = importlib.util.spec_from_file_location("train_lm", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    threads = torch.get_num_threads(), ts.get_num_threads()
    yield module
    torch.set_num_threads(threads[0])
    ts.set_num_threads(threads[1])


def test_dense_and_causal_train_alike(train_lm, tmp_path):
    out_json, out_png = tmp_path / "curves.json", tmp_path / "curves.png"
    # The package's own sources: a directory of *.py files, present wherever the tests are.
    report = train_lm.main(TINY + ["--runs", "dense,causal", "--data", str(ROOT / "python" / "trnsparse"),
                                   "--out-json", str(out_json), "--out-png", str(out_png)])

    written = json.loads(out_json.read_text())
    assert written == json.loads(json.dumps(report))
    runs = written["runs"]
    assert set(runs) == {"dense", "causal"}
    dense, causal = runs["dense"]["loss"], runs["causal"]["loss"]
    assert len(dense) == len(causal) == 3 and all(math.isfinite(x) for x in dense + causal)
    assert dense[-1] < dense[0]
    assert max(abs(a - b) / abs(a) for a, b in zip(dense, causal)) <= 1e-4
    assert runs["causal"]["max_abs_diff_vs_dense"] == max(abs(a - b) for a, b in zip(dense, causal))
    for r in runs.values():
        assert len(r["seconds"]) == 3 and r["seconds"] == sorted(r["seconds"]) and r["mean_tokens_per_s"] > 0
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_text_exits_with_message(train_lm, tmp_path):
    with pytest.raises(SystemExit, match="no text"):
        train_lm.main(TINY + ["--data", str(tmp_path), "--out-json", str(tmp_path / "x.json"),
                              "--out-png", str(tmp_path / "x.png")])
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(SystemExit, match="no text"):
        train_lm.main(TINY + ["--data", str(tmp_path / "empty.txt")])
