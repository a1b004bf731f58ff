# trnsparse: the two commands the README shows (`make demo`, `make test`) and the builds
# behind them. Each build tree comes from a preset in CMakePresets.json.
#
#   make deps      install the missing Debian packages (through sudo when not root)
#   make bench-deps  also those only the benchmarks need (PETSc)
#   make build     Release build into build/ (the tool is build/bin/trnsparse)
#   make demo      build the tool alone (the library, its benchmark and the CLI; not the
#                  tests, MPI or Python), then run `build/bin/trnsparse demo`
#   make check     the whole test suite of build/
#   make asan      Debug build with ASan + UBSan into build-asan/ (no MPI, no Python: their
#                  tests do not run there), its "unit", "cli" and "oom" tests
#   make fuzz      clang build into build-fuzz/ of the fuzzers and the library layer they
#                  reach (formats, Matrix Market), each for FUZZ_SECONDS on its seed corpus
#   make tsan      clang ThreadSanitizer build into build-tsan/, the unit tests of threaded code
#                  (not part of `make test`: run it before each release; see docs/architecture.md)
#   make coverage  gcc --coverage build into build-coverage/, its tests, then line and branch
#                  coverage of src/ (gcovr; not part of `make test`)
#   make test      check, asan and fuzz in turn, then one summary line
#   make install   build, then install into PREFIX
#   make clean     remove the build trees
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

JOBS ?= 2
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 30

# Every Debian package the build and the tests need, in one list (clang, libclang-rt-14-dev:
# the fuzz build; python3: the interpreter of the cli tests; pybind11-dev to
# python3-pytest: the Python package and its tests; libint2-dev, psi4-data, liblapack-dev:
# the Hartree-Fock example and `trnsparse hf`; libopenmpi-dev, openmpi-bin: the MPI layer;
# python3-matplotlib: bench/plot.py and its test).
DEB_PACKAGES := build-essential cmake ninja-build g++ clang libclang-rt-14-dev \
                libgtest-dev libgmock-dev libcli11-dev libopenblas-dev libeigen3-dev pkg-config python3 \
                pybind11-dev python3-dev python3-numpy python3-scipy python3-torch python3-pytest python3-matplotlib \
                libint2-dev psi4-data liblapack-dev libopenmpi-dev openmpi-bin
# What only the benchmarks need (PETSc, the baseline of trnsparse-mpi-bench): large, and
# not needed by the tests, so not in `make deps`.
BENCH_PACKAGES := libpetsc-real-dev
APT_GET := $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: deps bench-deps build demo check asan fuzz tsan coverage test install clean

# A package counts as present only when installed (not merely known with its config files).
deps:
	@$(MAKE) --no-print-directory install-missing PACKAGES="$(DEB_PACKAGES)"

bench-deps: deps
	@$(MAKE) --no-print-directory install-missing PACKAGES="$(BENCH_PACKAGES)"

.PHONY: install-missing
install-missing:
	@missing=(); \
	for p in $(PACKAGES); do \
	  [[ "$$(dpkg-query -W -f='$${db:Status-Status}' "$$p" 2>/dev/null)" == installed ]] || missing+=("$$p"); \
	done; \
	if (( $${#missing[@]} )); then \
	  echo "deps: installing $${missing[*]}"; \
	  $(APT_GET) update; \
	  $(APT_GET) install -y --no-install-recommends "$${missing[@]}"; \
	fi

build: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS)

demo: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS) --target trnsparse_cli
	build/bin/trnsparse demo

check: build
	ctest --preset release -j $(JOBS)

asan: deps
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

fuzz: deps
	cmake --preset fuzz -D TRNSPARSE_FUZZ_SECONDS=$(FUZZ_SECONDS)
	cmake --build --preset fuzz -j $(JOBS)
	ctest --preset fuzz -j $(JOBS)

# The tests of code that runs on several threads: the plan cache, the thread pool and
# UnitRanges, the solver passes, the symmetric product, attention and every
# bitwise-determinism test.
TSAN_FILTER := *Plan*:*Cache*:*Parallel*:*Thread*:*Determinism*:*Solver*:*Symmetric*:*ttention*:*Screen*:*Spgemm*
tsan: deps
	cmake --preset tsan
	cmake --build --preset tsan -j $(JOBS) --target trnsparse_tests
	TRNSPARSE_NUM_THREADS=3 build-tsan/bin/trnsparse_tests --gtest_filter='$(TSAN_FILTER)'

# Coverage of src/ by the release test suite (unit, CLI, Python, HF, MPI). The per-ISA
# kernels (src/kernels/cpu/) count too, but only the instruction sets this CPU has can run.
coverage: deps
	@$(MAKE) --no-print-directory install-missing PACKAGES="gcovr"
	cmake --preset coverage
	cmake --build --preset coverage -j $(JOBS)
	find build-coverage -name '*.gcda' -delete
	ctest --preset coverage -j $(JOBS)
	gcovr --root . --object-directory build-coverage --filter 'src/' --exclude-unreachable-branches \
	  --exclude-throw-branches --sort-percentage --print-summary

# Runs every phase even after a failure, so one run reports them all.
test: deps
	@failed=(); summary=""; \
	for phase in check asan fuzz; do \
	  start=$$SECONDS; \
	  $(MAKE) --no-print-directory $$phase || failed+=("$$phase"); \
	  summary+="$${summary:+, }$$phase $$((SECONDS - start)) s"; \
	done; \
	echo; \
	if (( $${#failed[@]} )); then echo "==== make test: FAILED in $${failed[*]} ($$summary) ===="; exit 1; fi; \
	echo "==== make test: PASSED ($$summary) ===="

install: build
	cmake --install build --prefix "$(PREFIX)"

clean:
	rm -rf build build-asan build-fuzz build-tsan build-coverage
