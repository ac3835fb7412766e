#!/usr/bin/env bash
# opreg for PyTorch users on a machine with NVIDIA GPUs (the device tool's machines): the wheel
# built by pip with the cuda backend (`pip install --no-build-isolation .`, the machine's own
# nanobind and scikit-build-core), then, each stage logged to OUT_DIR with its exit code:
#   imports   opreg before torch, numpy and transformers (and after), with pip's torch
#   selfcheck the installed files as auditwheel would see them (tests/python/self_contained.py)
#   pytest    tests/python on cuda (1 GPU, and the 2-GPU tests where there are two)
#   liger     Liger-Kernel's own op tests through the stand-in package (scripts/liger-tests.sh),
#             when LIGER_TESTS names a folder holding Liger's test/ tree
#   probe     PROBE_CMD, if set (a throwaway experiment carried beside the tree)
#
#   scripts/gpu-python.sh [OUT_DIR]    (default $OUT)     GPU_PY_STAGES=imports,selfcheck,pytest,liger,probe
#   GPU_PY_PYTEST_ARGS: more pytest arguments (-k ..., a file); LIGER_TESTS: folder with Liger's test/
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-python-out}}
mkdir -p "$out"
stages=${GPU_PY_STAGES:-imports,selfcheck,pytest,liger,probe}
has() { [[ ",$stages," == *",$1,"* ]]; }
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
summary=()
stage() {  # stage NAME LIMIT CMD...: output to OUT/NAME.log, one summary line
  local name=$1 limit=$2 t0=$SECONDS; shift 2
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  summary+=("$name: rc=$rc in $((SECONDS - t0)) s; $(tail -1 "$out/$name.log" | cut -c1-160)")
  return $rc
}
site=/tmp/opreg-site
# fmt and DLPack headers: from the system, else from carried Debian packages (as gpu-check.sh).
if [[ ! -f /usr/include/fmt/format.h || ! -f /usr/include/dlpack/dlpack.h ]]; then
  deps=${GPU_CHECK_DEPS:-deps}
  mkdir -p /tmp/deps
  for f in "$deps"/*.deb; do [[ -f $f ]] && dpkg -x "$f" /tmp/deps; done
  export CMAKE_PREFIX_PATH=/tmp/deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export CXXFLAGS="-I/tmp/deps/usr/include ${CXXFLAGS:-}"
fi
{
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "gpus", torch.cuda.device_count())'
} 2>&1 | tee "$out/machine.log"
if [[ ! -f $site/opreg/__init__.py ]]; then
  stage install 420 python3 -m pip install --no-build-isolation --no-deps --no-index --target "$site" \
    --config-settings=build-dir=/tmp/opreg-pip-build -v . || true
fi
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
if has imports; then
  imports() {  # (run through `bash -c`: exported below)
    local order rc=0
    for order in "opreg, torch, numpy, transformers" "opreg.torch, transformers" "numpy, opreg, torch" \
                 "torch, opreg" "transformers, opreg.torch"; do
      python3 -c "import $order
import torch, opreg, opreg.torch
x = torch.randn(4, 256, device='cuda', dtype=torch.bfloat16, requires_grad=True)
w = torch.ones(256, device='cuda', requires_grad=True)
y = opreg.torch.LigerRMSNormFunction.apply(x, w, 1e-6)
y.sum().backward()
torch.cuda.synchronize()
print('import $order: ok,', opreg.__file__)" || { echo "import $order: exit $?"; rc=1; }
    done
    return $rc
  }
  export -f imports
  stage imports 300 bash -c imports
fi
if has selfcheck; then
  stage selfcheck 60 bash -c "python3 tests/python/self_contained.py --wheel $site/opreg/*.so*"
fi
if has pytest; then
  # shellcheck disable=SC2086
  stage pytest 420 python3 -m pytest -q -p no:cacheprovider -rs tests/python ${GPU_PY_PYTEST_ARGS:-}
fi
if has liger && [[ -n ${LIGER_TESTS:-} ]]; then
  stage liger 420 scripts/liger-tests.sh "$LIGER_TESTS"
fi
if has probe && [[ -n ${PROBE_CMD:-} ]]; then
  stage probe 120 bash -c "$PROBE_CMD"
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.log"
