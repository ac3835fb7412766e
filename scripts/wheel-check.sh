#!/usr/bin/env bash
# The wheel as a user gets it: `pip wheel .` (scikit-build-core, the build tools from make test's
# venv, build/python-venv), checked as auditwheel would (tests/python/self_contained.py: NEEDED
# entries, exports, a run path of $ORIGIN), then installed into a fresh virtual environment and
# imported there before torch and numpy, and one op run. The wheel's CMake build keeps its own
# folder (build-wheel), so a second run recompiles nothing. The cpu and xpu backends only: the
# xpu backend is the one with a device runtime to load lazily (the ICD loader), and cuda's
# kernels would double the minutes for nothing this checks.
#   scripts/wheel-check.sh [BUILD_DIR]      (default build: its python-venv must exist)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
py=$build/python-venv/bin/python
[[ -x $py ]] || { echo "wheel-check: $py missing (make test makes it)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
t0=$SECONDS
"$py" -m pip wheel . --quiet --no-build-isolation --no-deps --no-index -w "$tmp/dist" \
  --config-settings=build-dir="$root/build-wheel" --config-settings=cmake.define.OPREG_WITH_CUDA=OFF --config-settings=cmake.define.OPREG_WITH_NPU=OFF \
  --config-settings=cmake.define.OPREG_WITH_XPU=AUTO
wheel=$(ls "$tmp"/dist/opreg-*.whl)
echo "wheel-check: built $(basename "$wheel") in $((SECONDS - t0)) s"
mkdir "$tmp/files"
(cd "$tmp/files" && python3 -m zipfile -e "$wheel" .)
mapfile -t objects < <(find "$tmp/files" -name '*.so*' -type f | sort)
python3 "$root/tests/python/self_contained.py" --wheel "${objects[@]}"
# A fresh environment: Debian's numpy and torch stay visible (--system-site-packages), nothing of
# the source or build tree is on the path.
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --no-index --no-deps "$wheel"
cd "$tmp"
"$tmp/venv/bin/python" - <<'PY'
import opreg                      # first: before torch and numpy
import numpy as np
import torch
import opreg.torch
assert "site-packages" in opreg.__file__, opreg.__file__
x = np.random.default_rng(1).standard_normal((3, 130)).astype(np.float32)
w = np.ones(130, np.float32)
y, rstd = np.empty_like(x), np.empty(3, np.float32)
r = opreg.rms_norm_fwd(x, w, y, rstd, device="cpu")
ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6)
assert np.abs(y - ref).max() < 1e-5, np.abs(y - ref).max()
xpu = next(d for d in opreg.devices() if d["backend"] == "xpu")
print("wheel-check: imported from", opreg.__file__, "| ran", r.variant, "| xpu available:", xpu["available"],
      "|", xpu["reason"][:80])
PY
echo "wheel-check: ok in $((SECONDS - t0)) s"
