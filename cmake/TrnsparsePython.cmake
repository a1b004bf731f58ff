# Defines TRNSPARSE_BUILD_PYTHON: the Python package in python/, ON by default when the
# interpreter's headers and pybind11 are found (Debian: python3-dev, pybind11-dev), for a
# top-level build that is neither a sanitizer nor a fuzzing build. The interpreter is
# /usr/bin/python3 unless Python3_EXECUTABLE says otherwise (`pip install` passes its own):
# the first python3 on PATH may be another installation without numpy and torch.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Interpreter the Python package is built and tested for")
endif()
set(PYBIND11_FINDPYTHON ON)
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
find_package(pybind11 2.6 CONFIG QUIET)
set(_trnsparse_python_default OFF)
if(Python3_FOUND AND pybind11_FOUND AND PROJECT_IS_TOP_LEVEL AND NOT TRNSPARSE_SANITIZE AND NOT TRNSPARSE_BUILD_FUZZERS)
  set(_trnsparse_python_default ON)
endif()
option(TRNSPARSE_BUILD_PYTHON "Build the Python package (pybind11 module + python/trnsparse)" ${_trnsparse_python_default})
