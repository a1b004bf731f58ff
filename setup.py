"""Builds trnsparse._core with the project's CMake (see pyproject.toml).

The extension is the CMake target `trnsparse_python`. Where it is built:

- TRNSPARSE_BUILD_DIR=DIR (relative to this directory): in DIR. A configured tree is
  reused as it is, and must be one that builds the module for this interpreter; an empty
  or new DIR is configured like the tree of its own below.
- otherwise `build/` (the tree of `make build` and `cmake --preset release`) when it is a
  Release tree that builds the module for this interpreter: only what changed since its
  last build is compiled.
- otherwise a tree of its own, build/pip/.../cmake, configured for the interpreter that
  runs this build (so a virtual environment gets a module for its own Python).

A reused tree's module is copied into the package directory setuptools assembles; a tree
of its own writes it there. Each step is printed as it runs (and CMake's and Ninja's progress
lines), which pip shows with -v.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
TARGET = "trnsparse_python"


def version() -> str:
    text = (ROOT / "include" / "trnsparse" / "version.hpp").read_text()
    return re.search(r'version_string = "([0-9.]+)"', text).group(1)


def say(message: str) -> None:
    print(f"trnsparse: {message}", file=sys.stderr, flush=True)


def cmake_cache(build_dir: Path) -> dict:
    """The NAME -> value entries of a tree's CMakeCache.txt; {} when it has none."""
    path = build_dir / "CMakeCache.txt"
    if not path.is_file():
        return {}
    entries = {}
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(("#", "//")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        entries[key.split(":", 1)[0]] = value
    return entries


def _same_path(a: str, b) -> bool:
    return bool(a) and os.path.realpath(a) == os.path.realpath(b)


def reuse_problem(cache: dict, executable: str = sys.executable) -> str | None:
    """Why a configured tree cannot build this package's module for `executable`, or None.
    The interpreter must be the tree's own (symlinks resolved, so a virtual environment of
    it qualifies): the module is compiled against that interpreter's headers."""
    home = cache.get("CMAKE_HOME_DIRECTORY", "")
    if not _same_path(home, ROOT):
        return f"it was configured from {home or 'an unknown source'}, not {ROOT}"
    if cache.get("TRNSPARSE_BUILD_PYTHON", "").upper() not in ("ON", "1", "TRUE", "YES", "Y"):
        return "it was configured with TRNSPARSE_BUILD_PYTHON off (pybind11-dev or python3-dev missing?)"
    python = cache.get("Python3_EXECUTABLE", "")
    if not _same_path(python, executable):
        return f"it builds the module for {python or 'no interpreter'}, not for {executable}"
    return None


def choose_tree(own_tree: Path, environ=os.environ, executable: str = sys.executable) -> tuple[Path, dict]:
    """(build tree, its cache) for this build: the cache is {} for a tree to configure."""
    chosen = environ.get("TRNSPARSE_BUILD_DIR")
    if chosen:
        build_dir = (ROOT / Path(chosen).expanduser()).resolve()
        cache = cmake_cache(build_dir)
        if cache:
            problem = reuse_problem(cache, executable)
            if problem:
                raise SystemExit(f"trnsparse: TRNSPARSE_BUILD_DIR={chosen} cannot be reused: {problem}")
        return build_dir, cache
    default = ROOT / "build"
    cache = cmake_cache(default)
    if cache:
        problem = reuse_problem(cache, executable)
        if problem is None and cache.get("CMAKE_BUILD_TYPE") != "Release":
            problem = f"its build type is {cache.get('CMAKE_BUILD_TYPE') or 'not set'}, not Release"
        if problem is None:
            return default, cache
        say(f"not reusing {default}: {problem}")
    return own_tree, {}


def run(command: list) -> None:
    say("$ " + " ".join(str(c) for c in command))
    subprocess.run(command, check=True)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        module = Path(self.get_ext_fullpath(ext.name)).resolve()
        build_dir, cache = choose_tree(Path(self.build_temp).resolve() / "cmake")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
        if cache:
            say(f"reusing the {cache.get('CMAKE_BUILD_TYPE') or 'default'} build tree {build_dir} (TRNSPARSE_BUILD_DIR "
                f"chooses another)")
        else:
            say(f"configuring {build_dir}; a first build compiles the C++ library (minutes; pip install -v shows "
                f"each step)")
            configure = [
                "cmake", "-S", str(ROOT), "-B", str(build_dir),
                "-DCMAKE_BUILD_TYPE=Release",
                "-DTRNSPARSE_BUILD_PYTHON=ON", "-DTRNSPARSE_BUILD_TESTS=OFF", "-DTRNSPARSE_BUILD_TOOLS=OFF",
                f"-DPython3_EXECUTABLE={sys.executable}",
                f"-DTRNSPARSE_PYTHON_DIR={module.parent.parent}",
            ]
            if shutil.which("ninja"):
                configure += ["-G", "Ninja"]
            run(configure)
        run(["cmake", "--build", str(build_dir), "--target", TARGET, "-j", jobs])
        if cache:
            # The tree writes the module into its own package directory; a file of another
            # name there means another interpreter's extension suffix.
            built = Path(cache.get("TRNSPARSE_PYTHON_DIR", build_dir / "python")) / "trnsparse" / module.name
            if not built.is_file():
                raise SystemExit(f"trnsparse: {build_dir} built no {built}; set TRNSPARSE_BUILD_DIR to a new "
                                 f"directory to build for {sys.executable}")
            module.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, module)
            say(f"copied {built} to {module}")


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import it for its helpers
    setup(
        version=version(),
        packages=["trnsparse"],
        package_dir={"": "python"},
        ext_modules=[Extension("trnsparse._core", sources=[])],
        cmdclass={"build_ext": CMakeBuild},
        options={"build": {"build_base": "build/pip"}},
        zip_safe=False,
    )
