#!/usr/bin/env bash
# Compiles every xpu kernel program to SPIR-V with clang-15 and llvm-spirv-15 and validates it
# with spirv-val, as an Intel GPU driver would ingest it: what a GPU compiler would reject
# fails here, on a machine without one. Built for each OpenCL C standard the runtime uses and
# each fused-dweight width it sets (GPU 16, CPU 256). The translator is held to SPIR-V 1.0, the
# version OpenCL 2.0 consumes: left free, llvm-spirv-15 moves a module to 1.4 as soon as LLVM has
# marked an integer operation no-wrap (a 16-bit load widened and shifted, say), and spirv-val
# then rejects the version rather than anything in the kernels.
# usage: spirv_check.sh CLANG LLVM_SPIRV SPIRV_VAL WORK_DIR PROGRAM.cl...
set -u
clang=$1 llvm_spirv=$2 spirv_val=$3 work=$4
shift 4
for tool in "$clang" "$llvm_spirv" "$spirv_val"; do
  if ! command -v "$tool" >/dev/null; then
    echo "FAIL: $tool not found: install the xpu backend's packages (clang-15 llvm-spirv-15 spirv-tools)"
    exit 1
  fi
done
mkdir -p "$work"
failures=0
checked=0
for program in "$@"; do
  name=$(basename "$program" .cl)
  for std in CL2.0 CL3.0; do
    for fused in 16 256; do
      base="$work/$name-$std-f$fused"
      if ! out=$("$clang" -x cl -cl-std=$std -target spir64 -O2 -Wall -Werror -DOPREG_FUSED_COLUMNS=$fused \
                   -emit-llvm -c "$program" -o "$base.bc" 2>&1) ||
         ! out=$("$llvm_spirv" --spirv-max-version=1.0 "$base.bc" -o "$base.spv" 2>&1) ||
         ! out=$("$spirv_val" --target-env opencl2.0 "$base.spv" 2>&1); then
        echo "FAIL: $name ($std, OPREG_FUSED_COLUMNS=$fused):"
        sed 's/^/    /' <<<"$out" | head -30
        failures=$((failures + 1))
      else
        checked=$((checked + 1))
        echo "ok: $name ($std, OPREG_FUSED_COLUMNS=$fused): $(stat -c %s "$base.spv") bytes of valid SPIR-V"
      fi
    done
  done
done
if ((checked == 0 && failures == 0)); then
  echo "FAIL: no program given"
  exit 1
fi
echo "spirv_check: $checked valid, $failures failed"
((failures == 0))
