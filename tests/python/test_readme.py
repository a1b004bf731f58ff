"""The Python example of README.md runs as written."""
import re
from pathlib import Path

import trnsparse as ts


def test_readme_python_example_runs():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert blocks, "README.md has no python example"
    scope = {}
    try:
        for block in blocks:
            exec(compile(block, "README.md", "exec"), scope)
    finally:
        ts.set_backend("auto")
    assert scope["Z"].shape == (300, 8) and scope["Ab"].blocks.grad is not None and scope["X"].grad is not None
