"""Builds trnsparse._core with the project's CMake (see pyproject.toml).

The extension is the CMake target `trnsparse_python`, configured for the interpreter that
runs this build (so a virtual environment gets a module for its own Python) and written
straight into the package directory setuptools assembles.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def version() -> str:
    text = (ROOT / "include" / "trnsparse" / "version.hpp").read_text()
    return re.search(r'version_string = "([0-9.]+)"', text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        package_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = Path(self.build_temp).resolve() / "cmake"
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DTRNSPARSE_BUILD_PYTHON=ON", "-DTRNSPARSE_BUILD_TESTS=OFF", "-DTRNSPARSE_BUILD_TOOLS=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DTRNSPARSE_PYTHON_DIR={package_dir.parent}",
        ]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "trnsparse_python", "-j", jobs], check=True)


setup(
    version=version(),
    packages=["trnsparse"],
    package_dir={"": "python"},
    ext_modules=[Extension("trnsparse._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build/pip"}},
    zip_safe=False,
)
