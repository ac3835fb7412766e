#!/usr/bin/env bash
# The HIP build of the cuda backend (OPREG_GPU_VENDOR=hip, `make hip`) registers every cuda
# variant the CUDA build does, less the thread-block cluster ones (sm_90 only), and runs on HIP's
# runtime. No GPU is needed: `opreg ops` lists what was registered.
# usage: tests/hip/variants.sh CUDA_BUILD_OPREG HIP_BUILD_OPREG
set -euo pipefail
if (($# != 2)); then
  echo "usage: $0 CUDA_BUILD_OPREG HIP_BUILD_OPREG" >&2
  exit 2
fi
cuda_variants() { "$1" ops | sed -n 's/^ *\(cuda\.[^ ]*\) .*/\1/p' | sort; }
cuda=$(cuda_variants "$1")
hip=$(cuda_variants "$2")
if [[ -z "$cuda" ]]; then
  echo "FAIL: $1 lists no cuda variants (built without a CUDA toolkit?): nothing to compare with" >&2
  exit 1
fi
expected=$(grep -v '\.cluster$' <<<"$cuda" || true)
if [[ "$hip" != "$expected" ]]; then
  echo "FAIL: the HIP build's cuda variants differ from the CUDA build's less the cluster ones" >&2
  diff <(echo "$expected") <(echo "$hip") >&2 || true
  exit 1
fi
# The listing is captured first: `devices | grep -q` under pipefail fails when grep exits at its
# first match and the writer then dies of SIGPIPE (what CI's first run of this script hit).
devices=$("$2" devices)
if ! grep -q '^cuda .*HIP' <<<"$devices"; then
  echo "FAIL: the HIP build's cuda backend does not report HIP's runtime:" >&2
  echo "$devices" >&2
  exit 1
fi
echo "hip: $(wc -l <<<"$hip") cuda variants registered, the CUDA build's $(wc -l <<<"$cuda") less the cluster ones:" \
  "$(grep '\.cluster$' <<<"$cuda" | tr '\n' ' ')"
