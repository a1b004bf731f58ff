"""The Python example of README.md runs as written."""
from snippets import ROOT, run_python_blocks


def test_readme_python_example_runs():
    scope = run_python_blocks(ROOT / "README.md")
    assert scope["Z"].shape == (300, 8) and scope["Ab"].blocks.grad is not None and scope["X"].grad is not None
