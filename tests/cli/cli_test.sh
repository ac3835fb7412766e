#!/usr/bin/env bash
# The opreg command's contract: output, --help everywhere, exit codes 0/2/3.
# usage: cli_test.sh path/to/opreg
set -u
opreg=$1
failures=0
passes=0

# expect CODE PATTERN -- command...: runs it, checks the exit code and that stdout+stderr match.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $code ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> exit $rc (want $code), output must match /$pattern/:"
    sed 's/^/    /' <<<"$out" | head -20
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}

unset OPREG_DEVICE OPREG_BACKEND_ORDER OPREG_DISABLE OPREG_FORCE_VARIANT OPREG_FALLBACK OPREG_VERBOSE \
  OPREG_NUM_THREADS OPREG_NPU_PROFILE OPREG_NPU_UB_BYTES

expect 0 '^backend +id +prio' -- "$opreg" devices
if "$opreg" devices | grep -q '^cuda .*available: CUDA runtime'; then
  expect 0 '^inference: cuda:0 \(first available in priority order cuda' -- "$opreg" devices
else
  expect 0 '^inference: cpu \(first available in priority order' -- "$opreg" devices
  expect 0 'skipped.*npu \(emulated' -- "$opreg" devices
fi
expect 0 '^xpu +- +- +- +not built: ' -- "$opreg" devices
expect 0 'npu:0 +Ascend 910B4 \(emulated\) \[emulated\]' -- "$opreg" devices
expect 0 '^inference: npu:0 \[emulated\] \(OPREG_DEVICE=npu' -- env OPREG_DEVICE=npu "$opreg" devices
expect 2 "OPREG_DEVICE=nonsense: invalid device 'nonsense': accepted devices are cpu" -- env OPREG_DEVICE=nonsense "$opreg" devices
expect 3 "device 'xpu': the xpu backend is not built" -- env OPREG_DEVICE=xpu "$opreg" devices
expect 2 "OPREG_VERBOSE='9'" -- env OPREG_VERBOSE=9 "$opreg" devices
expect 2 "OPREG_NPU_PROFILE='nosuch'.*accepted: 910B4" -- env OPREG_NPU_PROFILE=nosuch "$opreg" devices
expect 3 'device npu:3 does not exist' -- env OPREG_DEVICE=npu:3 "$opreg" devices
expect 0 'inference: cpu \(first available in OPREG_BACKEND_ORDER order npu,cpu; skipped npu \(emulated' -- \
  env OPREG_BACKEND_ORDER=npu,cpu "$opreg" devices
expect 3 'no device available in OPREG_BACKEND_ORDER order npu' -- env OPREG_BACKEND_ORDER=npu "$opreg" devices
expect 0 'warning: OPREG_DEVCE is not a variable' -- env OPREG_DEVCE=cpu "$opreg" devices
expect 0 '^usage: opreg devices' -- "$opreg" devices --help
expect 0 '^usage: opreg ops' -- "$opreg" ops --help
expect 0 '^usage: opreg <command>' -- "$opreg" --help
expect 0 '^usage: opreg <command>' -- "$opreg" help
expect 2 "unknown command 'bogus'" -- "$opreg" bogus
expect 2 'no command given' -- "$opreg"
expect 2 "devices: unexpected argument '--bogus'" -- "$opreg" devices --bogus
expect 2 "ops: --op needs an op name" -- "$opreg" ops --op
expect 2 "unknown op 'nosuch.fwd'" -- "$opreg" ops --op nosuch.fwd
expect 0 '.' -- "$opreg" ops

# Where a CUDA backend is built but no GPU is usable, naming it is "unavailable" (3).
if "$opreg" devices | grep -q '^cuda .*unavailable'; then
  expect 3 'device cuda:0 is unavailable' -- env OPREG_DEVICE=cuda "$opreg" devices
fi

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
