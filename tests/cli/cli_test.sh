#!/usr/bin/env bash
# The opreg command's contract: output, --help everywhere, exit codes 0/1/2/3, `opreg run`'s result line.
# usage: cli_test.sh path/to/opreg
set -u
opreg=$1
. "$(dirname "$0")/expect.sh"

unset OPREG_DEVICE OPREG_BACKEND_ORDER OPREG_DISABLE OPREG_FORCE_VARIANT OPREG_FALLBACK OPREG_VERBOSE \
  OPREG_NUM_THREADS OPREG_NPU_PROFILE OPREG_NPU_UB_BYTES

expect 0 '^backend +id +prio' -- "$opreg" devices
if "$opreg" devices | grep -q '^cuda .*available: CUDA runtime'; then
  expect 0 '^inference: cuda:0 \(first available in priority order cuda' -- "$opreg" devices
else
  expect 0 '^inference: cpu \(first available in priority order' -- "$opreg" devices
  expect 0 'skipped.*npu \(emulated' -- "$opreg" devices
fi
xpu_built=1
"$opreg" devices | grep -q '^xpu .*not built' && xpu_built=0
if ((xpu_built)); then
  # An OpenCL CPU device (PoCL) is emulated: listed as such, never inferred, used when named.
  expect 0 '  xpu:[0-9]+ +.*\(emulated, OpenCL CPU device\) \[emulated\]|^xpu .*unavailable: ' -- "$opreg" devices
else
  expect 0 '^xpu +- +- +- +not built: ' -- "$opreg" devices
fi
expect 0 'npu:0 +Ascend910B4 \(emulated\) \[emulated\]' -- "$opreg" devices
expect 0 '^inference: npu:0 \[emulated\] \(OPREG_DEVICE=npu' -- env OPREG_DEVICE=npu "$opreg" devices
expect 2 "OPREG_DEVICE='nonsense': invalid device 'nonsense': accepted devices are cpu" -- env OPREG_DEVICE=nonsense "$opreg" devices
((xpu_built)) || expect 3 "device 'xpu': the xpu backend is not built" -- env OPREG_DEVICE=xpu "$opreg" devices
expect 2 "OPREG_VERBOSE='9'" -- env OPREG_VERBOSE=9 "$opreg" devices
expect 2 "OPREG_NPU_PROFILE='nosuch'.*accepted: Ascend910B4, Ascend910B2" -- env OPREG_NPU_PROFILE=nosuch "$opreg" devices
expect 3 'device npu:3 does not exist' -- env OPREG_DEVICE=npu:3 "$opreg" devices
expect 0 'inference: cpu \(first available in OPREG_BACKEND_ORDER order npu,cpu; skipped npu \(emulated' -- \
  env OPREG_BACKEND_ORDER=npu,cpu "$opreg" devices
expect 3 'no device available in OPREG_BACKEND_ORDER order npu' -- env OPREG_BACKEND_ORDER=npu "$opreg" devices
expect 0 "warning: 'OPREG_DEVCE' is not a variable" -- env OPREG_DEVCE=cpu "$opreg" devices
# The documented default order names backends a build may lack: they are skipped with a note.
expect 0 '^inference: .*\(first available in OPREG_BACKEND_ORDER order cuda,npu,xpu,cpu' -- \
  env OPREG_BACKEND_ORDER=cuda,npu,xpu,cpu "$opreg" devices
# Device indices: a malformed one is bad input (2), one beyond the device count is unavailable (3) whatever its size.
expect 3 "device 'cpu:99999' does not exist: cpu has 1 device" -- "$opreg" run rms_norm.fwd --device cpu:99999
expect 3 'device cpu:32767 does not exist: cpu has 1 device' -- "$opreg" run rms_norm.fwd --device cpu:32767
expect 3 "does not exist" -- "$opreg" run rms_norm.fwd --device cpu:123456789012345678901234567890
expect 2 "invalid device 'cpu:-1'" -- "$opreg" run rms_norm.fwd --device cpu:-1
# Errors are one line: no warning before them, control characters escaped.
expect_one_line() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -ne $code || $(wc -l <<<"$out") -ne 1 ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> exit $rc (want $code), stderr must be one line matching /$pattern/:"
    sed 's/^/    /' <<<"$out" | head -10
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}
expect_one_line 2 "^opreg: error: plugin '/nonexistent/x.so': cannot load: No such file or directory" -- \
  env OPREG_PLUGINS=/nonexistent/x.so "$opreg" devices
expect_one_line 2 "^opreg: error: OPREG_DEVICE='nonsense': invalid device" -- \
  env OPREG_DEVICE=nonsense "$opreg" run rms_norm.fwd --shape 3x5
expect_one_line 2 "OPREG_DEVICE='cpu\\\\nX'" -- env OPREG_DEVICE=$'cpu\nX' "$opreg" devices
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

# ---- opreg run

# expect_result PATTERN -- command...: exit 0, exactly one stdout line matching PATTERN, empty stderr.
expect_result() {
  local pattern=$1
  shift 2
  local out err rc
  err=$(mktemp)
  out=$("$@" 2>"$err")
  rc=$?
  if [[ $rc -ne 0 || $(wc -l <<<"$out") -ne 1 || -s $err ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> exit $rc (want 0), one stdout line must match /$pattern/ and stderr be empty:"
    sed 's/^/    out: /' <<<"$out" | head -10
    sed 's/^/    err: /' "$err" | head -10
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
  rm -f "$err"
}

num='[0-9][0-9.e+-]*'
for base in rms_norm fused_add_rms_norm layer_norm group_norm geglu swiglu rope; do
  for dir in fwd bwd; do
    op=$base.$dir
    shape=(--shape 3x5)
    [[ $base == group_norm ]] && shape=(--shape 2x6x5 --groups 3)
    [[ $base == rope ]] && shape=(--shape 2x3x5x8 --kv-heads 1 --style interleaved --table positions --transposed)
    wdtype=f32
    [[ $base == geglu || $base == swiglu ]] && wdtype=-
    expect_result "^result op=$op device=cpu emulated=0 variant=cpu\.$op\.[a-z0-9_]+ dtype=f32 wdtype=$wdtype \
shape=${shape[1]} err=$num time_us=$num gbps=$num status=pass\$" -- "$opreg" run "$op" --device cpu "${shape[@]}"
  done
done
# Mixed precision, the other dtypes, the rms_norm modes, in place, on the inferred device.
expect_result '^result op=rms_norm\.fwd device=cpu .* dtype=bf16 wdtype=f32 shape=3x5 .*status=pass$' -- \
  "$opreg" run rms_norm.fwd --device cpu --dtype bf16 --wdtype f32 --shape 3x5
expect_result ' dtype=f16 wdtype=f16 shape=4x7 .*status=pass$' -- \
  "$opreg" run layer_norm.bwd --device cpu --dtype f16 --shape 4x7 --inplace --repeat 1
expect_result ' dtype=bf16 wdtype=- shape=2x3x9 .*status=pass$' -- \
  "$opreg" run swiglu.bwd --device cpu --dtype bf16 --shape 2x3x9 --inplace --seed 42
expect_result 'op=fused_add_rms_norm\.bwd .*status=pass$' -- "$opreg" run fused_add_rms_norm.bwd --device=cpu \
  --shape=3x5 --casting=gemma --offset=1 --eps=1e-5
expect_result 'op=rms_norm\.fwd .*status=pass$' -- "$opreg" run rms_norm.fwd --device cpu --shape 3x5 --casting none
expect_result '^result op=group_norm\.fwd device=cpu .* shape=2x64x3 .*status=pass$' -- \
  "$opreg" run group_norm.fwd --device cpu --shape 2x64x3
expect_result ' shape=0x5 .*status=pass$' -- "$opreg" run rms_norm.fwd --device cpu --shape 0x5
expect_result '^result op=rms_norm\.fwd device=cpu emulated=0 variant=cpu\.rms_norm\.fwd\.ref dtype' -- \
  env OPREG_FORCE_VARIANT=cpu.rms_norm.fwd.ref "$opreg" run rms_norm.fwd --device cpu --shape 3x5
# The emulated npu, named; with no npu variant for the op it falls back to the cpu (npu's policy: warn).
npu_geglu='^result op=geglu\.fwd device=npu:0 emulated=1 '
npu_geglu+='variant=(npu\.geglu\.fwd\.[a-z0-9_]+|cpu\.geglu\.fwd\.[a-z0-9_]+ fallback=1) '
npu_geglu+='dtype=f32 wdtype=- shape=3x5 .*status=pass( .*)?$'
expect 0 "$npu_geglu" -- "$opreg" run geglu.fwd --device npu --shape 3x5
expect 0 "$npu_geglu" -- env OPREG_DEVICE=npu "$opreg" run geglu.fwd --shape 3x5
# A disabled backend's tensors always fall back, whatever variants it has.
npu_fallback='op=rms_norm\.bwd device=npu:0 emulated=1 variant=cpu\.rms_norm\.bwd\.[a-z0-9_]+ fallback=1 '
expect_result "$npu_fallback" -- \
  env OPREG_DISABLE=npu OPREG_FALLBACK=silent "$opreg" run rms_norm.bwd --device npu --shape 3x5
expect 0 'falls back to the cpu' -- env OPREG_DISABLE=npu "$opreg" run geglu.fwd --device npu --shape 3x5
expect 3 'geglu\.fwd on npu:0.*no variant accepted' -- \
  env OPREG_DISABLE=npu OPREG_FALLBACK=error "$opreg" run geglu.fwd --device npu --shape 3x5
# No --device: the inferred one (where that is a GPU, whether the op runs depends on its variants).
if "$opreg" devices | grep -q '^inference: cpu '; then
  expect_result '^result op=rms_norm\.fwd device=cpu ' -- "$opreg" run rms_norm.fwd --shape 3x5
fi

expect 0 '^usage: opreg run OP' -- "$opreg" run --help
expect 0 '^usage: opreg run OP' -- "$opreg" run rms_norm.fwd -h
expect 0 '^  run ' -- "$opreg" --help
expect 2 "run: no op given" -- "$opreg" run
expect 2 "run: unknown option '--bogus'.*opreg run --help" -- "$opreg" run rms_norm.fwd --bogus
expect 2 "run: unexpected argument 'layer_norm.fwd'" -- "$opreg" run rms_norm.fwd layer_norm.fwd
expect 2 "run: invalid --dtype 'f64'; accepted: f32, f16, bf16" -- "$opreg" run rms_norm.fwd --dtype f64
expect 2 "run: invalid --wdtype 'bf16'; accepted: same" -- "$opreg" run rms_norm.fwd --wdtype bf16
expect 2 "run: --shape: invalid shape '0x'" -- "$opreg" run rms_norm.fwd --shape 0x
expect 2 "run: --shape: invalid shape '3x-5'" -- "$opreg" run rms_norm.fwd --shape 3x-5
expect 2 "run: invalid --groups '0'" -- "$opreg" run group_norm.fwd --groups 0
expect 2 "run: invalid --eps 'inf'" -- "$opreg" run rms_norm.fwd --eps inf
expect 2 "run: invalid --offset '1x'" -- "$opreg" run rms_norm.fwd --offset 1x
expect 2 "run: invalid --casting 'mistral'; accepted: llama, gemma, none" -- "$opreg" run rms_norm.fwd --casting mistral
expect 2 "run: invalid --seed '-1'" -- "$opreg" run rms_norm.fwd --seed -1
expect 2 "run: invalid --repeat '0'" -- "$opreg" run rms_norm.fwd --repeat 0
expect 2 "run: --repeat needs a value" -- "$opreg" run rms_norm.fwd --repeat
expect 2 "run: --inplace takes no value" -- "$opreg" run rms_norm.bwd --inplace=yes
expect 2 "run: --groups does not apply to layer_norm\.fwd \(it applies to group_norm\.fwd, group_norm\.bwd\)" -- \
  "$opreg" run layer_norm.fwd --groups 2
expect 2 "run: --wdtype does not apply to geglu\.fwd" -- "$opreg" run geglu.fwd --wdtype f32
expect 2 "run: --eps does not apply to swiglu\.bwd" -- "$opreg" run swiglu.bwd --eps 1e-5
expect 2 "run: --offset does not apply to layer_norm\.fwd" -- "$opreg" run layer_norm.fwd --offset 1
expect 2 "run: --casting does not apply to group_norm\.bwd" -- "$opreg" run group_norm.bwd --casting gemma
expect 2 "run: --inplace does not apply to rms_norm\.fwd" -- "$opreg" run rms_norm.fwd --inplace
# The op's own check refuses the problem: exit 2 with its message.
expect 2 'group_norm\.fwd: num_groups = 5 with 6 channels' -- \
  "$opreg" run group_norm.fwd --device cpu --shape 2x6x5 --groups 5
expect 2 'group_norm\.bwd: .*at least 2 dims' -- "$opreg" run group_norm.bwd --device cpu --shape 5
expect 2 "invalid device 'gpu'" -- "$opreg" run rms_norm.fwd --device gpu
((xpu_built)) || expect 3 "device 'xpu': the xpu backend is not built" -- "$opreg" run rms_norm.fwd --device xpu
expect 3 'device npu:3 does not exist' -- "$opreg" run rms_norm.fwd --device npu:3
expect 3 "op 'nosuch\.fwd' is not defined; defined ops: rms_norm\.fwd, rms_norm\.bwd, " -- "$opreg" run nosuch.fwd
expect 3 "op 'rms_norm' is not defined" -- "$opreg" run rms_norm
if "$opreg" devices | grep -q '^cuda .*unavailable'; then
  expect 3 'device cuda:0 is unavailable' -- "$opreg" run rms_norm.fwd --device cuda
elif "$opreg" devices | grep -q '^cuda .*not built'; then
  expect 3 "device 'cuda'" -- "$opreg" run rms_norm.fwd --device cuda
fi
# Exit 1: a real check failure. --tol-scale 0 demands equality with the double-precision
# reference, which the f32-accumulating kernel does not reach (its rstd differs in the last bits).
expect 1 'status=fail' -- "$opreg" run rms_norm.fwd --device cpu --dtype bf16 --shape 64x1000 --tol-scale 0
expect 1 'check failed: .*rstd err=inf; rstd\[[0-9]+\] got=.* want=.*replay: opreg run rms_norm\.fwd .*--tol-scale 0' -- \
  "$opreg" run rms_norm.fwd --device cpu --dtype bf16 --shape 64x1000 --tol-scale 0
expect 0 'status=pass' -- "$opreg" run rms_norm.fwd --device cpu --dtype bf16 --shape 64x1000 --tol-scale 0.5
expect 2 "invalid --tol-scale '-1'" -- "$opreg" run rms_norm.fwd --tol-scale -1

# Optional parameters, edge-case inputs, --version.
expect 0 'weight=none .*wdtype=- .*status=pass' -- "$opreg" run rms_norm.bwd --device cpu --no-weight --shape 5x9 --repeat 1
expect 0 'weight=none bias=none .*status=pass' -- \
  "$opreg" run layer_norm.bwd --device cpu --no-weight --no-bias --shape 5x9 --repeat 1
expect 2 "run: --no-bias does not apply to rms_norm\.fwd" -- "$opreg" run rms_norm.fwd --no-bias
expect 2 "run: --wdtype does not apply: rms_norm\.fwd runs without a weight" -- \
  "$opreg" run rms_norm.fwd --no-weight --wdtype f32
expect 2 'offset = 1 without a weight' -- "$opreg" run rms_norm.fwd --device cpu --no-weight --offset 1 --shape 2x3
expect 0 'status=pass' -- "$opreg" run layer_norm.fwd --device cpu --values equal --shape 6x33 --repeat 1
expect 0 'status=pass' -- "$opreg" run swiglu.bwd --device cpu --values special --shape 6x33 --repeat 1
expect 2 "run: invalid --values 'huge'; accepted: random, large, equal, special" -- "$opreg" run rms_norm.fwd --values huge
expect 0 '^opreg [0-9]+\.[0-9]+\.[0-9]+$' -- "$opreg" --version
expect 0 '^rms_norm\.fwd$' -- "$opreg" ops --op rms_norm
# Every value is looked at: a repeated option is refused, OPREG_DEVICE is checked under --device.
expect 2 "run: --device is given twice \('nonsense' and 'cpu'\)" -- "$opreg" run rms_norm.fwd --device nonsense --device cpu
expect 2 "run: --inplace is given twice" -- "$opreg" run rms_norm.bwd --inplace --inplace
expect 2 "invalid device 'nonsense'" -- env OPREG_DEVICE=nonsense "$opreg" run rms_norm.fwd --device cpu --shape 2x3
# Errors are one line, with control characters escaped.
expect 3 "^opreg: error: op 'nosuch\.fwd.nX' is not defined" -- "$opreg" run $'nosuch.fwd\nX'
lines=$("$opreg" run $'nosuch.fwd\nX' 2>&1 | wc -l)
if [[ $lines -ne 1 ]]; then echo "FAIL: an error spans $lines lines"; failures=$((failures + 1)); fi
# Sizes are overflow-checked with zero extents too (2^64 rows of nothing is not a problem to run).
expect 2 'shape \[4294967296x4294967296x0\]: the product of its extents' -- \
  "$opreg" run rms_norm.fwd --shape 4294967296x4294967296x0
expect 2 'group_norm\.fwd: num_groups = 1099511627776 with 6 channels' -- \
  "$opreg" run group_norm.fwd --device cpu --shape 2x6x4 --groups 1099511627776
expect 2 'group_norm\.fwd: num_groups = 9223372036854775807 with 6 channels' -- \
  "$opreg" run group_norm.fwd --device cpu --shape 2x6x4 --groups 9223372036854775807
# More memory than the machine has: refused at once, naming both numbers (exit 3).
expect 3 'rms_norm\.fwd of \[200000x200000\] .*needs 640003200000 bytes .* on the host, which has [0-9]+ bytes' -- \
  "$opreg" run rms_norm.fwd --device cpu --shape 200000x200000
# An output that cannot be written is an error (exit 1), not a silent success.
if [[ -w /dev/full ]]; then
  expect 1 'cannot write to standard output' -- sh -c "\"$opreg\" run rms_norm.fwd --device cpu --shape 2x3 >/dev/full"
fi

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
