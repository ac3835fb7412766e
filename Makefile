# The two README commands: `make run` and `make test`. Everything sets itself up first.
BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
OPREG      := $(BUILD)/tools/opreg/opreg
CLANG      := -DCMAKE_CXX_COMPILER=clang++-14

.PHONY: all deps configure build run test release asan tsan bench format clean help

all: build

help:
	@echo "make run    set up, build, then the tour (scripts/tour.sh): opreg devices, opreg ops, and a"
	@echo "            checked, timed opreg run of all twelve op directions on the default device"
	@echo "make test   set up, build, all tests (ctest)"
	@echo "make release  a user's plain Release build (cmake -DCMAKE_BUILD_TYPE=Release, no -Werror) in"
	@echo "            build-release, whole suite; CXX=clang++-14 for clang"
	@echo "make asan   ASan+UBSan build (clang-14, CUDA off) in build-asan, whole suite"
	@echo "make tsan   TSan build (clang-14, OpenMP and CUDA off) in build-tsan, registry tests"
	@echo "make bench  build and run the benchmarks"
	@echo "make format clang-format every source file"

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DOPREG_WERROR=ON $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/tour.sh $(BUILD)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

release: deps
	@cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=$(CXX) >/dev/null
	@cmake --build build-release -j $(JOBS)
	ctest --test-dir build-release --output-on-failure -j $(JOBS)

asan: deps
	@cmake -S . -B build-asan $(CLANG) -DOPREG_WERROR=ON -DOPREG_SANITIZE=address,undefined -DOPREG_WITH_CUDA=OFF \
	  -DOPREG_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build build-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS)

tsan: deps
	@cmake -S . -B build-tsan $(CLANG) -DOPREG_WERROR=ON -DOPREG_SANITIZE=thread -DOPREG_WITH_OPENMP=OFF -DOPREG_WITH_CUDA=OFF \
	  -DOPREG_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1:allocator_may_return_null=1 ctest --test-dir build-tsan --output-on-failure -L registry -j $(JOBS)

bench: build
	@for b in $(BUILD)/bench/bench_*; do echo "== $$b"; $$b --benchmark_repetitions=5 --benchmark_report_aggregates_only=true; done

format:
	@clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu')

clean:
	rm -rf $(BUILD) build-release build-asan build-tsan
