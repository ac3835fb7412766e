#!/usr/bin/env bash
# The Python module's build tools, which Debian bookworm does not package: a virtual environment
# at $1/python-venv (default build/python-venv) made from /usr/bin/python3 with
# --system-site-packages (so Debian's python3-torch and python3-numpy stay visible), with the
# pinned nanobind and scikit-build-core from PyPI. CMake's python/ finds nanobind through this
# interpreter. Idempotent: an environment that already has the pins is left as it is. Without
# /usr/bin/python3 or its venv module, or when PyPI cannot be reached, it says so and exits 0:
# the C++ build goes on and CMake skips the module, saying why.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
venv=$build/python-venv
pins=(nanobind==2.9.2 scikit-build-core==0.11.6)
python=${OPREG_PYTHON:-/usr/bin/python3}

if [[ ! -x $python ]]; then
  echo "python-venv: $python not found: the Python module will not be built"
  exit 0
fi
# pip's list is captured first: piped into grep -q under pipefail, pip could die of SIGPIPE.
if [[ -x $venv/bin/python ]]; then
  have=$("$venv/bin/python" -m pip freeze 2>/dev/null)
  if grep -qxF -e "${pins[0]}" <<<"$have" && grep -qxF -e "${pins[1]}" <<<"$have"; then
    exit 0
  fi
fi
mkdir -p "$build"
if ! "$python" -m venv --system-site-packages "$venv" >/dev/null 2>&1; then
  echo "python-venv: '$python -m venv' failed (python3-venv missing?): the Python module will not be built"
  rm -rf "$venv"
  exit 0
fi
echo "python-venv: installing ${pins[*]} into $venv"
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"; then
  echo "python-venv: pip could not install ${pins[*]}: the Python module will not be built"
  rm -rf "$venv"
fi
exit 0
