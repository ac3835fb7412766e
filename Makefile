# The two README commands: `make run` and `make test`. Everything sets itself up first.
SHELL := /bin/bash
BUILD      ?= build
# make test's build is a Release build with -Werror: a user's plain Release build is the same
# build less -Werror, so CI (.ci/run) does not build that one again.
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
OPREG      := $(BUILD)/tools/opreg/opreg
CLANG      := -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14
# One PoCL kernel cache for every configuration's tests (tests/CMakeLists.txt): the xpu backend
# compiles every kernel once per cache (a minute and a half of one core, twice that under ASan). The
# ctest runs also pass it to the tests that set no cache of their own (the CLI's, Python's).
POCL_CACHE := $(CURDIR)/$(BUILD)/pocl-cache
TEST_CACHE := -DOPREG_TEST_POCL_CACHE=$(POCL_CACHE)

.PHONY: all deps configure build run test release asan tsan fuzz hip aarch64 bench format clean help wheel

all: build

help:
	@echo "make run    set up, build, then the tour (scripts/tour.sh): opreg devices, opreg ops, and a"
	@echo "            checked, timed opreg run of all twelve op directions on the default device"
	@echo "make test   set up, build, all tests (ctest), the Python module's pytest suites among them"
	@echo "make release  a user's plain Release build (cmake -DCMAKE_BUILD_TYPE=Release, no -Werror) in"
	@echo "            build-release, whole suite; CXX=clang++-14 for clang"
	@echo "make asan   ASan+UBSan build (clang-14, CUDA off) in build-asan, whole suite"
	@echo "make tsan   TSan build (clang-14, CUDA off) in build-tsan: the registry tests and what they run"
	@echo "make fuzz   each libFuzzer target (tests/fuzz) for FUZZ_SECONDS (30) in build-asan's"
	@echo "            instrumented build; any crash, sanitizer report, leak or uncaught exception fails"
	@echo "make hip    the cuda backend built with HIP for AMD GPUs (hipcc, ROCm 5.2; gfx90a, gfx940) in"
	@echo "            build-hip, and its registered variants checked against the CUDA build's"
	@echo "            (tests/hip/variants.sh; compiles and links only: no AMD GPU here)"
	@echo "make aarch64  the library, the CLI and the registry and cpu tests cross-built for aarch64"
	@echo "            (Kunpeng; g++-aarch64-linux-gnu) in build-aarch64 and run under qemu-user: no avx2"
	@echo "            variants there (tests/aarch64/variants.sh), then the registry tests and the cpu tests'"
	@echo "            small shapes (AARCH64_SKIP: the reference's self-check and the long rows are left out)"
	@echo "make wheel  the Python wheel by pip (cpu and xpu backends) in build-wheel, checked as auditwheel"
	@echo "            would (NEEDED, exports, \$$ORIGIN), installed in a fresh venv and imported before torch"
	@echo "make bench  build and run the benchmarks"
	@echo "make format clang-format every source file"

deps:
	@scripts/install-deps.sh

# The Python module's build tools (nanobind, scikit-build-core: PyPI) go into $(BUILD)/python-venv.
configure: deps
	@scripts/python-venv.sh $(BUILD)
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DOPREG_WERROR=ON $(TEST_CACHE) $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/tour.sh $(BUILD)

test: build
	POCL_CACHE_DIR=$(POCL_CACHE) ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The wheel as pip builds it, from make test's venv (scripts/wheel-check.sh): its own CMake build
# in build-wheel, so a second run recompiles nothing.
wheel: configure
	scripts/wheel-check.sh $(BUILD)

release: deps
	@cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=$(CXX) $(TEST_CACHE) >/dev/null
	@cmake --build build-release -j $(JOBS)
	POCL_CACHE_DIR=$(POCL_CACHE) ctest --test-dir build-release --output-on-failure -j $(JOBS) -LE slow

# Sanitizer builds are Debug at -O1, as the sanitizers' docs advise: -O0 made the kernels' inline
# helpers ten times slower and the ASan suite over half an hour on two cores.
SAN_OPT := '-DCMAKE_CXX_FLAGS_DEBUG=-g -O1' '-DCMAKE_C_FLAGS_DEBUG=-g -O1'
ASAN_CONFIGURE = cmake -S . -B build-asan $(CLANG) $(SAN_OPT) -DOPREG_WERROR=ON -DOPREG_SANITIZE=address,undefined \
  -DOPREG_FUZZ=ON -DOPREG_WITH_CUDA=OFF -DOPREG_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug $(TEST_CACHE) >/dev/null
FUZZ_SECONDS ?= 30
FUZZERS := fuzz_parsers fuzz_env fuzz_run_args fuzz_op_check fuzz_dlpack fuzz_plugin

# The xpu backend's OpenCL in sanitizer runs: the ICD loader restricted to PoCL, and PoCL's and
# LLVM's process-lifetime allocations suppressed (tests/backends/xpu/lsan.supp).
XPU_SANITIZER_ENV := OCL_ICD_VENDORS=/etc/OpenCL/vendors/pocl.icd \
  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/backends/xpu/lsan.supp

# The HIP build: the library and the CLI only (no tests, benchmarks, npu or xpu), compared with
# the main build's cuda variants. The kernels get hipcc's -O3 whatever the build type
# (src/backends/cuda_like/hip.cmake); the host sources, which make test's build compiles with
# -Werror already, are built with no optimisation (build type None: they only have to link and
# list the variants; g++ took 4.8 s at -O0 on cpu/norm/kernels_generic.cpp against 19.7 s at the
# default RelWithDebInfo's -O2 -g).
hip: build
	@scripts/install-deps.sh hip
	@cmake -S . -B build-hip -DCMAKE_BUILD_TYPE=None -DOPREG_GPU_VENDOR=hip -DOPREG_WITH_CUDA=ON -DOPREG_WERROR=ON -DOPREG_BUILD_TESTS=OFF \
	  -DOPREG_BUILD_BENCH=OFF -DOPREG_WITH_NPU=OFF -DOPREG_WITH_XPU=OFF $(CMAKE_ARGS) >/dev/null
	@cmake --build build-hip -j $(JOBS) --target opreg_cli
	tests/hip/variants.sh $(OPREG) build-hip/tools/opreg/opreg

# The aarch64 cross build (cmake/toolchains/aarch64-linux-gnu.cmake: Debian's cross compiler, and
# qemu-user as CMake's emulator, so ctest and gtest discovery run the programs under qemu). No arm64
# package is installed: googletest (built from Debian's sources), fmt and dlpack come from
# cmake/aarch64-deps, installed into build-aarch64/deps.
AARCH64_TOOLCHAIN := -DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/toolchains/aarch64-linux-gnu.cmake
AARCH64_DEPS      := $(CURDIR)/build-aarch64/deps
AARCH64_QEMU      := qemu-aarch64 -L /usr/aarch64-linux-gnu
AARCH64_TARGETS   := opreg_registry_check opreg_cpu_conformance_tests opreg_cpu_kernel_tests opreg_cpu_isa_tests \
  opreg_ops_tests
# The cpu tests under qemu, less the two costly parts (the whole set takes about 12 minutes on two
# cores): cpu_ref* (the harness checking the reference against itself, 854 cases; the reference
# is checked against independent formulas by the ops tests, which run) and cpu.conformance_long.*
# (rows longer than any cache, outputs past 4 MB). What runs: every generic variant's cpu_fast and
# cpu_edges grids, determinism, OPREG_CPU_ISA, the ops tests.
AARCH64_SKIP      := ^cpu_ref|^cpu\.conformance_long\.

aarch64:
	@scripts/install-deps.sh aarch64
	@cmake -S cmake/aarch64-deps -B build-aarch64/deps-build $(AARCH64_TOOLCHAIN) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_INSTALL_PREFIX=$(AARCH64_DEPS) $(CMAKE_ARGS) >/dev/null
	@cmake --build build-aarch64/deps-build -j $(JOBS)
	@cmake --install build-aarch64/deps-build >/dev/null
	@cmake -S . -B build-aarch64 $(AARCH64_TOOLCHAIN) -DCMAKE_BUILD_TYPE=Release -DOPREG_WERROR=ON \
	  -DOPREG_WITH_CUDA=OFF -DOPREG_WITH_NPU=OFF -DOPREG_WITH_XPU=OFF -DOPREG_BUILD_BENCH=OFF -DOPREG_PYTHON=OFF \
	  -DGTest_DIR=$(AARCH64_DEPS)/lib/cmake/GTest -Dfmt_DIR=$(AARCH64_DEPS)/lib/cmake/fmt \
	  -Ddlpack_DIR=$(AARCH64_DEPS)/lib/cmake/dlpack $(CMAKE_ARGS) >/dev/null
	@cmake --build build-aarch64 -j $(JOBS) --target $(AARCH64_TARGETS)
	tests/aarch64/variants.sh $(AARCH64_QEMU) build-aarch64/tools/opreg/opreg
	ctest --test-dir build-aarch64 --output-on-failure -j $(JOBS) -L 'registry|cpu' -E '$(AARCH64_SKIP)'

asan: deps
	@$(ASAN_CONFIGURE)
	@cmake --build build-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(XPU_SANITIZER_ENV) POCL_CACHE_DIR=$(POCL_CACHE) ctest --test-dir build-asan --output-on-failure -j $(JOBS) -LE slow

# The fuzzers share build-asan's instrumented library (a `make asan` before costs nothing more).
# Each target runs from its seed corpus (tests/fuzz/corpus/<target>) for FUZZ_SECONDS.
fuzz: deps
	@$(ASAN_CONFIGURE)
	@cmake --build build-asan -j $(JOBS) --target $(FUZZERS)
	@for t in $(FUZZERS); do \
	  mkdir -p build-asan/fuzz-corpus/$$t; \
	  echo "== $$t ($(FUZZ_SECONDS) s)"; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $(XPU_SANITIZER_ENV) \
	    build-asan/tests/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=4096 \
	    -artifact_prefix=build-asan/fuzz-corpus/$$t- \
	    -print_final_stats=1 build-asan/fuzz-corpus/$$t tests/fuzz/corpus/$$t 2>&1 | \
	    grep -E 'stat::number_of_executed_units|stat::new_units_added|ERROR|runtime error|==[0-9]+==|Test unit written' ; \
	  status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || { echo "fuzz: $$t failed (exit $$status)"; exit 1; }; \
	done

tsan: deps
	@cmake -S . -B build-tsan $(CLANG) $(SAN_OPT) -DOPREG_WERROR=ON -DOPREG_SANITIZE=thread -DOPREG_WITH_CUDA=OFF \
	  -DOPREG_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug $(TEST_CACHE) >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target opreg_registry_check
	TSAN_OPTIONS=halt_on_error=1:allocator_may_return_null=1 $(XPU_SANITIZER_ENV) POCL_CACHE_DIR=$(POCL_CACHE) \
	  ctest --test-dir build-tsan --output-on-failure -L registry -FS xpu_kernels -j $(JOBS)

bench: build
	@for b in $(BUILD)/bench/bench_*; do echo "== $$b"; $$b --benchmark_repetitions=5 --benchmark_report_aggregates_only=true; done

format:
	@clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu')

clean:
	rm -rf $(BUILD) build-release build-asan build-tsan build-aarch64
