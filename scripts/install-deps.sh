#!/usr/bin/env bash
# Installs the Debian packages opreg needs that are missing, and nothing else.
# The lists: scripts/packages-base.txt, then the "# packages:" line of each enabled backend's
# CMakeLists.txt (a backend is enabled unless OPREG_WITH_<NAME>=OFF in the environment).
# Arguments name optional lists, scripts/packages-<name>.txt (`install-deps.sh hip` for make hip).
# Idempotent: when everything is present it installs nothing and says so.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

wanted=()
read_list() { for p in $1; do [[ -n "$p" ]] && wanted+=("$p"); done; }
read_list "$(grep -v '^#' "$root/scripts/packages-base.txt" | tr '\n' ' ')"
for extra in "$@"; do
  list="$root/scripts/packages-$extra.txt"
  [[ -f "$list" ]] || { echo "install-deps: no list $list (accepted: $(cd "$root/scripts" && ls packages-*.txt | sed 's/packages-//; s/\.txt//' | grep -v base | tr '\n' ' '))" >&2; exit 2; }
  read_list "$(grep -v '^#' "$list" | tr '\n' ' ')"
done
for dir in "$root"/src/backends/*/; do
  name=$(basename "$dir")
  case "$name" in cuda_like) var=OPREG_WITH_CUDA ;; *) var="OPREG_WITH_${name^^}" ;; esac
  [[ "${!var:-AUTO}" == "OFF" ]] && continue
  [[ -f "$dir/CMakeLists.txt" ]] || continue
  read_list "$(sed -n 's/^# packages:\(.*\)$/\1/p' "$dir/CMakeLists.txt")"
done

missing=()
for p in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#wanted[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
