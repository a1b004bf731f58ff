"""setup.py's choice of a CMake build tree for `pip install`: reuse TRNSPARSE_BUILD_DIR or
build/ when they build the module for this interpreter, else a tree of its own. The
helpers are imported from setup.py (its setup() call runs only as __main__)."""
import importlib.util
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def setup_py(monkeypatch, tmp_path):
    """setup.py as a module whose source directory is tmp_path/src."""
    pytest.importorskip("setuptools")  # setup.py's own import (python3-setuptools)
    spec = importlib.util.spec_from_file_location("trnsparse_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = tmp_path / "src"
    source.mkdir()
    monkeypatch.setattr(module, "ROOT", source)
    return module


def write_cache(build_dir: pathlib.Path, source: pathlib.Path, *, python=sys.executable, build_type="Release",
                with_python="ON") -> None:
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / "CMakeCache.txt").write_text(
        "# This is the CMakeCache file.\n"
        "//Source directory\n"
        f"CMAKE_HOME_DIRECTORY:INTERNAL={source}\n"
        f"CMAKE_BUILD_TYPE:STRING={build_type}\n"
        f"TRNSPARSE_BUILD_PYTHON:BOOL={with_python}\n"
        f"Python3_EXECUTABLE:FILEPATH={python}\n"
        f"TRNSPARSE_PYTHON_DIR:PATH={build_dir / 'python'}\n")


def test_reads_the_cache_and_accepts_a_tree_for_this_interpreter(setup_py, tmp_path):
    write_cache(tmp_path / "b", setup_py.ROOT)
    cache = setup_py.cmake_cache(tmp_path / "b")
    assert cache["CMAKE_BUILD_TYPE"] == "Release" and cache["TRNSPARSE_PYTHON_DIR"] == str(tmp_path / "b" / "python")
    assert setup_py.reuse_problem(cache, sys.executable) is None
    assert setup_py.cmake_cache(tmp_path / "none") == {}
    # A symlink to the interpreter (as a virtual environment's python is) is the same one.
    link = tmp_path / "python-link"
    link.symlink_to(os.path.realpath(sys.executable))
    assert setup_py.reuse_problem(cache, str(link)) is None


@pytest.mark.parametrize("change,problem", [
    ({"source": "other"}, "was configured from"),
    ({"with_python": "OFF"}, "TRNSPARSE_BUILD_PYTHON off"),
    ({"python": "/usr/bin/true"}, "builds the module for /usr/bin/true"),
])
def test_rejects_a_tree_for_another_source_or_interpreter(setup_py, tmp_path, change, problem):
    source = tmp_path / change.pop("source") if "source" in change else setup_py.ROOT
    write_cache(tmp_path / "b", source, **change)
    assert problem in setup_py.reuse_problem(setup_py.cmake_cache(tmp_path / "b"), sys.executable)


def test_chooses_build_when_it_fits_else_its_own_tree(setup_py, tmp_path, capsys):
    own = tmp_path / "own"
    assert setup_py.choose_tree(own, environ={}) == (own, {})           # no build/
    write_cache(setup_py.ROOT / "build", setup_py.ROOT, build_type="Debug")
    assert setup_py.choose_tree(own, environ={}) == (own, {})
    err = capsys.readouterr().err
    assert f"not reusing {setup_py.ROOT / 'build'}: its build type is Debug, not Release" in err
    write_cache(setup_py.ROOT / "build", setup_py.ROOT)
    tree, cache = setup_py.choose_tree(own, environ={})
    assert tree == setup_py.ROOT / "build" and cache["CMAKE_BUILD_TYPE"] == "Release"


def test_build_dir_variable(setup_py, tmp_path):
    own = tmp_path / "own"
    write_cache(setup_py.ROOT / "build", setup_py.ROOT)
    # A new directory, relative to the source directory, is configured there.
    assert setup_py.choose_tree(own, environ={"TRNSPARSE_BUILD_DIR": "fresh"}) == (setup_py.ROOT / "fresh", {})
    # A configured one is reused, whatever its build type.
    write_cache(tmp_path / "debug", setup_py.ROOT, build_type="Debug")
    tree, cache = setup_py.choose_tree(own, environ={"TRNSPARSE_BUILD_DIR": str(tmp_path / "debug")})
    assert tree == tmp_path / "debug" and cache["CMAKE_BUILD_TYPE"] == "Debug"
    # One that cannot build this interpreter's module stops the build with the reason.
    write_cache(tmp_path / "other", setup_py.ROOT, python="/usr/bin/true")
    with pytest.raises(SystemExit, match="TRNSPARSE_BUILD_DIR=.*other cannot be reused: it builds the module for "
                                         "/usr/bin/true"):
        setup_py.choose_tree(own, environ={"TRNSPARSE_BUILD_DIR": str(tmp_path / "other")})
