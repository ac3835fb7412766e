#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs examples/consumer against it
# twice, through the CMake package (shared and static library) and through pkg-config.
# Usage: consumer_test.sh <build dir> <source dir> <c++ compiler>
set -euo pipefail
build=$1
src=$2
cxx=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -x "$tmp/prefix/bin/opreg"
"$tmp/prefix/bin/opreg" --version

# CMake: find_package(opreg) from the prefix, nothing from the source or build tree.
cmake -S "$src/examples/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/consumer" >/dev/null
# The installed library, not the build tree's: the consumer's run path names the prefix.
ldd "$tmp/consumer/consumer" | grep "$tmp/prefix/.*libopreg.so" >/dev/null  # not -q: an early exit would SIGPIPE ldd under pipefail
OPREG_DEVICE=cpu "$tmp/consumer/consumer"
OPREG_DEVICE=cpu "$tmp/consumer/consumer_static"

# pkg-config: the three lines of a Makefile-based consumer.
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$(find "$tmp/prefix" -type d -name pkgconfig | tr '\n' ':')"
# shellcheck disable=SC2046
"$cxx" -O1 "$src/examples/consumer/main.cpp" -o "$tmp/pc_consumer" $(pkg-config --cflags --libs opreg)
LD_LIBRARY_PATH="$(pkg-config --variable=libdir opreg)" OPREG_DEVICE=cpu "$tmp/pc_consumer"
echo "consumer_test: ok"
