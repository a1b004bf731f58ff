"""Importing the package from the source tree, where the compiled module is not, says
what to build instead of Python's circular-import message."""
import os
import subprocess
import sys

SOURCE_TREE = os.path.join(os.path.dirname(__file__), "..", "..", "python")


def test_source_tree_import_names_the_missing_module_and_the_build():
    env = {**os.environ, "PYTHONPATH": os.path.abspath(SOURCE_TREE)}
    result = subprocess.run([sys.executable, "-c", "import trnsparse"], capture_output=True, text=True, env=env,
                            cwd=os.path.dirname(__file__), timeout=120)
    assert result.returncode != 0
    assert "ImportError: trnsparse: the compiled module trnsparse._core is not in" in result.stderr
    assert "PYTHONPATH=build/python" in result.stderr
    assert "circular import" not in result.stderr
