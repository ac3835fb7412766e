#!/usr/bin/env bash
# Every conformance case's outputs as digests, to show that a change leaves every kernel's bits
# as they were: run it on the build before and after the change and diff the two files.
#
#   tests/conformance/digests.sh BUILD_DIR OUT_FILE [ctest arguments, e.g. -L npu or -R conformance]
#
# Runs ctest in BUILD_DIR with CONFORMANCE_DIGESTS set (harness.cpp: each ConformanceTest case
# appends "<test> <FNV-1a of each output>" to a file per process) and writes the sorted, unique
# lines to OUT_FILE. Fixed seeds, so equal lines mean equal bits.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 BUILD_DIR OUT_FILE [ctest arguments]" >&2; exit 2; }
build=$1 out=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
CONFORMANCE_DIGESTS=$dir ctest --test-dir "$build" -j "${JOBS:-2}" --output-on-failure "$@" >"$dir/ctest.log" 2>&1 ||
  { tail -20 "$dir/ctest.log"; echo "digests: ctest failed (log above)" >&2; exit 1; }
cat "$dir"/[0-9]*.txt 2>/dev/null | sort -u >"$out"
echo "digests: $(wc -l <"$out") cases in $out ($(grep -c "tests passed" "$dir/ctest.log" || true) ctest summary; $(tail -1 "$dir/ctest.log"))"
