"""Runs the Python examples of Markdown files: every ```python block, in order, in one
namespace (so a block may use what earlier blocks of the same file defined).

Blocks fenced ```python-norun (or ```text) are shown, not run. Each block is compiled
with the Markdown file as its file name and padded to its own line numbers, so a
traceback points at the line of the .md file, and a failure names the block's first line.
"""
from __future__ import annotations

import re
import traceback
from pathlib import Path

import trnsparse as ts

ROOT = Path(__file__).resolve().parents[2]

# A fence opening a block at the start of a line: its info string, then the code up to
# the closing fence.
_BLOCK = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)


def fenced_blocks(path: Path) -> list[tuple[str, int, str]]:
    """(info string, line number of the first code line, code) of every fenced block."""
    text = Path(path).read_text(encoding="utf-8")
    return [(m.group(1).strip(), text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in _BLOCK.finditer(text)]


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """(line number of the first code line, code) of every ```python block."""
    return [(line, code) for info, line, code in fenced_blocks(path) if info == "python"]


def run_python_blocks(path: Path) -> dict:
    """Executes the ```python blocks of `path` in order in one namespace and returns it.
    A failing block raises AssertionError naming the file, the block's first line and the
    failing line (chained to the original exception). The backend and the thread count
    are restored afterwards, whatever the blocks set."""
    path = Path(path)
    blocks = python_blocks(path)
    assert blocks, f"{path.name} has no ```python block"
    backend, threads = ts.get_backend(), ts.get_num_threads()
    scope: dict = {"__name__": f"doc:{path.name}"}
    try:
        for line, code in blocks:
            try:
                exec(compile("\n" * (line - 1) + code, str(path), "exec"), scope)
            except Exception as e:
                at = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == str(path)]
                where = f" (line {at[-1]})" if at else ""
                raise AssertionError(f"{path.name}: the ```python block at line {line} failed{where}: "
                                     f"{type(e).__name__}: {e}") from e
    finally:
        ts.set_backend(backend)
        ts.set_num_threads(threads)
    return scope
