#!/usr/bin/env bash
# The bad-input matrix: every command, every option of `opreg run` and every OPREG_* variable with
# missing, empty, blank, malformed, negative, huge, control-character, duplicated and unknown
# values (and the good values beside them, as controls). Each case checks:
#   - the exit code (docs/cli.md: 0 ok, 1 check failed or output lost, 2 bad input, 3 unsupported),
#   - an error is exactly one line on stderr starting with `opreg: ` and naming the bad value,
#     with nothing on stdout (`opreg devices` excepted: it prints its table before inference),
#   - no hang (each case under `timeout`), no crash, no sanitizer report.
# usage: bad_input_test.sh path/to/opreg [path/to/plugin.so]
# OPREG_MATRIX_JOBS (default 4) cases run at a time: a case spends little CPU (under ASan most of
# its time is LeakSanitizer's exit scan, waiting), so 4 on 2 cores halve the ASan wall time.
# OPREG_MATRIX_TIMEOUT (default 60) seconds each.
set -u
opreg=$1
plugin=${2:-}
max_jobs=${OPREG_MATRIX_JOBS:-4}
limit=${OPREG_MATRIX_TIMEOUT:-60}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Every case starts from no OPREG_* variable.
while IFS= read -r v; do unset "$v"; done < <(compgen -e | grep '^OPREG_')
# Most cases run without an OpenCL platform (an ICD vendor directory that is empty): starting PoCL
# costs more than the rest of a case, and whether xpu is usable does not change how input is
# checked. The xpu cases at the end run with the OpenCL the caller has.
if [[ -v OCL_ICD_VENDORS ]]; then with_opencl=(env "OCL_ICD_VENDORS=$OCL_ICD_VENDORS"); else with_opencl=(env -u OCL_ICD_VENDORS); fi
mkdir "$tmp/no-opencl"
export OCL_ICD_VENDORS=$tmp/no-opencl
n=0

# check KIND CODE NEEDLE -- command...: runs one case (in the background, `jobs` at a time).
#   err:  exit CODE, one stderr line `opreg: ...` containing NEEDLE (a fixed string), stdout empty
#   warn: exit 0, one stderr line containing NEEDLE
#   ok:   exit 0, stderr empty
check() {
  local kind=$1 code=$2 needle=$3
  shift 4
  n=$((n + 1))
  while (($(jobs -rp | wc -l) >= max_jobs)); do wait -n; done
  (
    out=$tmp/$n.out err=$tmp/$n.err
    timeout -k 5 "$limit" "$@" >"$out" 2>"$err" </dev/null
    rc=$?
    lines=$(wc -l <"$err")
    why=
    if ((rc == 124 || rc == 137)); then
      why="hung (killed after $limit s)"
    elif grep -Eq 'runtime error|Sanitizer|terminate called|Segmentation fault|core dumped|stack smashing' "$out" "$err"; then
      why="a crash or sanitizer report"
    elif ((rc != code)); then
      why="exit $rc, want $code"
    elif [[ $kind == ok ]] && ((lines != 0)); then
      why="stderr must be empty"
    elif [[ $kind != ok ]] && ((lines != 1)); then
      why="stderr must be one line (has $lines)"
    elif [[ $kind != ok ]] && ! grep -qF -- "$needle" "$err"; then
      why="stderr must name '$needle'"
    elif [[ $kind == err ]] && ! grep -q '^opreg: ' "$err"; then
      why="an error starts with 'opreg: '"
    elif [[ $kind == err && " $* " != *" devices "* && -s $out ]]; then
      why="stdout must be empty after an error"
    fi
    if [[ -n $why ]]; then
      {
        printf 'FAIL: %s:' "$why"
        printf ' %q' "$@" | cut -c1-400
        echo
        sed 's/^/    out: /' "$out" | head -5 | cut -c1-400
        sed 's/^/    err: /' "$err" | head -5 | cut -c1-400
      } >"$tmp/$n.fail"
    fi
    rm -f "$out" "$err"
  ) &
}
ok() { check ok 0 '' -- "$@"; }
warn() { local needle=$1; shift; check warn 0 "$needle" -- "$@"; }
err() { local code=$1 needle=$2; shift 2; check err "$code" "$needle" -- "$@"; }

run=("$opreg" run)
small=(--device cpu --shape 3x8 --repeat 1)
xpu_built=1
"$opreg" devices | grep -q '^xpu .*not built' && xpu_built=0
xpu_usable=0
"${with_opencl[@]}" "$opreg" devices | grep -q '^  xpu:0 ' && xpu_usable=1
cuda_state=absent  # absent (not built), unavailable, or usable
"$opreg" devices | grep -q '^cuda .* unavailable: ' && cuda_state=unavailable
"$opreg" devices | grep -q '^  cuda:0 ' && cuda_state=usable
ctl=$'\x01\x1b[31m'  # control characters: shown as \x01\x1b[31m
ctl_shown='\x01\x1b[31m'
long=$(printf 'x%.0s' {1..5000})

# ---- Commands.
err 2 'no command given' "$opreg"
err 2 "unknown command ''" "$opreg" ''
err 2 "unknown command ' '" "$opreg" ' '
err 2 "unknown command 'bogus'" "$opreg" bogus
err 2 "unknown command 'DEVICES'" "$opreg" DEVICES
err 2 "unknown command '--bogus'" "$opreg" --bogus
err 2 "unknown command '-x'" "$opreg" -x
err 2 "unknown command 'runs'" "$opreg" runs
err 2 "unknown command 'bad\\nline'" "$opreg" $'bad\nline'
err 2 "unknown command '$ctl_shown'" "$opreg" "$ctl"
err 2 "unknown command 'xxxxxxxxxx" "$opreg" "$long"
ok "$opreg" --version
ok "$opreg" version
err 2 "--version takes no arguments (got 'extra')" "$opreg" --version extra
err 2 "--version takes no arguments (got '')" "$opreg" --version ''
for help in help --help -h; do ok "$opreg" $help; done
for cmd in devices ops run; do
  ok "$opreg" $cmd --help
  ok "$opreg" $cmd -h
done
ok "$opreg" run rms_norm.fwd --bogus --help  # help wins over what else is on the line
ok "$opreg" devices
err 2 "devices: unexpected argument 'extra'" "$opreg" devices extra
err 2 "devices: unexpected argument ''" "$opreg" devices ''
err 2 "devices: unexpected argument '--all'" "$opreg" devices --all
ok "$opreg" ops
ok "$opreg" ops --op rms_norm
ok "$opreg" ops --op rms_norm.bwd
ok "$opreg" ops --op=layer_norm
err 2 'ops: --op needs an op name' "$opreg" ops --op
err 2 "ops: invalid --op ''" "$opreg" ops --op=
err 2 "ops: invalid --op ''" "$opreg" ops --op ''
err 2 "ops: invalid --op ' '" "$opreg" ops --op ' '
err 2 "unknown op 'nosuch.fwd'" "$opreg" ops --op nosuch.fwd
err 2 "unknown op 'rms'" "$opreg" ops --op rms
err 2 "unknown op 'rms_norm.'" "$opreg" ops --op rms_norm.
err 2 "unknown op 'RMS_NORM'" "$opreg" ops --op RMS_NORM
err 2 "unknown op 'rms_norm\\n'" "$opreg" ops --op $'rms_norm\n'
err 2 "ops: --op is given twice ('rms_norm' and 'layer_norm')" "$opreg" ops --op rms_norm --op layer_norm
err 2 "ops: unexpected argument 'rms_norm'" "$opreg" ops rms_norm
err 2 "ops: unexpected argument '--bogus'" "$opreg" ops --bogus
# An output that cannot be written is an error (exit 1), not a success with the output lost.
for cmd in devices ops --version --help; do
  err 1 'cannot write to standard output' sh -c "exec \"\$0\" $cmd >&-" "$opreg"
done
err 1 'cannot write to standard output' sh -c 'exec "$0" run rms_norm.fwd --device cpu --shape 2x3 >&-' "$opreg"

# ---- `opreg run`: the op.
err 2 'run: no op given' "${run[@]}"
err 2 'run: no op given' "${run[@]}" --device cpu
err 3 "op '' is not defined" "${run[@]}" '' --device cpu
err 3 "op ' ' is not defined" "${run[@]}" ' ' --device cpu
for op in rms_norm RMS_NORM.fwd rms_norm.fwd.x rms_norm.FWD rms_norm.up layer_norm.bwd2 .fwd nosuch.fwd; do
  err 3 "op '$op' is not defined" "${run[@]}" "$op" --device cpu
done
err 3 "op 'rms_norm.fwd\\n' is not defined" "${run[@]}" $'rms_norm.fwd\n'
err 3 "op '$ctl_shown' is not defined" "${run[@]}" "$ctl"
err 3 "op 'xxxxxxxxxx" "${run[@]}" "$long"
err 2 "run: unexpected argument 'layer_norm.fwd' (the op is 'rms_norm.fwd')" "${run[@]}" rms_norm.fwd layer_norm.fwd
err 2 "run: unexpected argument 'rms_norm.fwd'" "${run[@]}" rms_norm.fwd rms_norm.fwd

# ---- `opreg run`: unknown options and flags with values.
for opt in --bogus -x - -- --- --Shape -shape --shape3x4 --=3 --device_ --no-weights --in-place --help2; do
  err 2 "run: unknown option '${opt%%=*}'" "${run[@]}" rms_norm.bwd "$opt"
done
err 2 "run: unknown option '--\\x01'" "${run[@]}" rms_norm.fwd $'--\x01'
for flag in --inplace --no-weight --no-bias; do
  for value in '' yes 0 1; do
    err 2 "run: $flag takes no value (got '$flag=$value')" "${run[@]}" layer_norm.bwd "$flag=$value"
  done
  err 2 "run: $flag is given twice" "${run[@]}" layer_norm.bwd "$flag" "$flag"
done

# ---- `opreg run`: every valued option: missing, empty, blank, malformed, negative, huge,
# control characters, duplicated. `needle` is what the one error line must contain.
bad_value() {  # OPTION VALUE [OP] [NEEDLE]
  local opt=$1 value=$2 op=${3:-rms_norm.fwd}
  local needle=${4-"run: invalid $opt '$value'"}
  err 2 "$needle" "${run[@]}" "$op" "$opt" "$value"
  err 2 "$needle" "${run[@]}" "$op" "$opt=$value"
}
declare -A good=([--device]=cpu [--dtype]=f16 [--wdtype]=f32 [--shape]=2x3 [--groups]=2 [--eps]=1e-5 [--offset]=1
  [--casting]=gemma [--seed]=7 [--repeat]=2 [--tol-scale]=2 [--values]=equal)
for opt in "${!good[@]}"; do
  op=rms_norm.fwd
  [[ $opt == --groups ]] && op=group_norm.fwd
  err 2 "run: $opt needs a value" "${run[@]}" $op "$opt"
  err 2 "run: $opt is given twice ('${good[$opt]}' and '${good[$opt]}')" "${run[@]}" $op "$opt=${good[$opt]}" \
    "$opt" "${good[$opt]}"
done
for v in '' ' ' $'\t' cpu: :0 cpu:0:0 cpu::0 cpu:x cpu:-1 cpu:+0 cpu:0x0 cpu:1e400 CPU gpu cpu,npu 'cpu ' ' cpu' \
  $'cpu\n' cuda- 9cpu "$ctl" "$long"; do
  shown=${v//$'\n'/\\n}
  shown=${shown//$'\t'/\\t}
  shown=${shown//$'\x01'/\\x01}
  shown=${shown//$'\x1b'/\\x1b}
  needle="'${shown:0:40}"
  err 2 "$needle" "${run[@]}" rms_norm.fwd --shape 2x3 --device "$v"
done
err 3 "device cpu:1 does not exist: cpu has 1 device(s)" "${run[@]}" rms_norm.fwd --shape 2x3 --device cpu:1
err 3 "device 'cpu:32768' does not exist" "${run[@]}" rms_norm.fwd --shape 2x3 --device cpu:32768
err 3 "device 'cpu:18446744073709551616' does not exist" "${run[@]}" rms_norm.fwd --shape 2x3 --device cpu:18446744073709551616
err 3 "device npu:1 does not exist" "${run[@]}" rms_norm.fwd --shape 2x3 --device npu:1
err 3 "device 'npu:99999999999999999999' does not exist" "${run[@]}" rms_norm.fwd --shape 2x3 --device npu:99999999999999999999
ok "${run[@]}" rms_norm.fwd --shape 2x3 --device cpu:0
ok "${run[@]}" rms_norm.fwd --shape 2x3 --device cpu:00
ok "${run[@]}" rms_norm.fwd --shape 2x3 --device npu:0
case $cuda_state in
  absent) err 3 "device 'cuda': the cuda backend is not built" "${run[@]}" rms_norm.fwd --shape 2x3 --device cuda ;;
  unavailable) err 3 'device cuda:0 is unavailable' "${run[@]}" rms_norm.fwd --shape 2x3 --device cuda ;;
esac
if ((xpu_built == 0)); then
  err 3 "device 'xpu': the xpu backend is not built" "${run[@]}" rms_norm.fwd --shape 2x3 --device xpu
else
  err 3 'device xpu:0 is unavailable: no OpenCL platform' "${run[@]}" rms_norm.fwd --shape 2x3 --device xpu
fi
for v in '' ' ' F32 f64 i32 float 'f32 ' f32,f16 $'f32\n' -1 "$ctl"; do
  shown=${v//$'\n'/\\n}
  shown=${shown//$'\x01'/\\x01}
  bad_value --dtype "$v" rms_norm.fwd "run: invalid --dtype '${shown//$'\x1b'/\\x1b}'; accepted: f32, f16, bf16"
done
for v in '' ' ' bf16 f16 SAME 'same ' double; do
  bad_value --wdtype "$v" rms_norm.fwd "run: invalid --wdtype '$v'; accepted: same, f32"
done
for v in '' ' ' x 3x x3 3xx4 3x-4 -1 3x4x 3.5x4 3X4 '3*4' '3 x4' +3x4 0xA 1e400 3x0x-0 $'3x4\n'; do
  shown=${v//$'\n'/\\n}
  bad_value --shape "$v" rms_norm.fwd "run: --shape: invalid shape '$shown'"
done
bad_value --shape 1x1x1x1x1x1x1x1x1 rms_norm.fwd "more than 8 dims"
bad_value --shape 18446744073709551616x1 rms_norm.fwd "extent '18446744073709551616' does not fit in int64"
bad_value --shape 9223372036854775808 rms_norm.fwd "extent '9223372036854775808' does not fit in int64"
ok "${run[@]}" rms_norm.fwd --device cpu --shape 1x1x1x1x1x1x1x1 --repeat 1
ok "${run[@]}" rms_norm.fwd --device cpu --shape 0x0 --repeat 1
ok "${run[@]}" layer_norm.bwd --device cpu --shape 5x0 --repeat 1
ok "${run[@]}" group_norm.fwd --device cpu --shape 0x6x0 --groups 3 --repeat 1
ok "${run[@]}" layer_norm.bwd --device cpu --shape 7 --repeat 1  # 1-D: one row
ok "${run[@]}" rms_norm.fwd --device cpu --shape 0 --repeat 1
# Element counts that overflow int64: refused with the shape (2), whatever extents are zero.
# Counts that fit but whose bytes exceed the machine, or size_t (2^62 f32 elements are 2^64
# bytes): refused by memory admission (3), naming the bytes, before anything is allocated.
for shape in 4294967296x4294967296x0 0x4294967296x4294967296 3037000500x3037000500 9223372036854775807x2 \
  2305843009213693952x4; do
  err 2 "shape [$shape]: the product of its extents" "${run[@]}" rms_norm.fwd --device cpu --shape $shape
done
err 2 'shape [2x3037000500x3037000500]: the product' "${run[@]}" group_norm.fwd --device cpu \
  --shape 2x3037000500x3037000500 --groups 1
err 3 'needs more than 2^64 bytes' "${run[@]}" rms_norm.fwd --device cpu --shape 4611686018427387904x1
err 3 'needs more than 2^64 bytes' "${run[@]}" rms_norm.fwd --device cpu --shape 4611686018427387904 --dtype f16
err 3 'needs more than 2^64 bytes' "${run[@]}" rms_norm.fwd --device cpu --shape 9223372036854775807
for shape in 2305843009213693951 200000x200000 1x1099511627776 65536x65536x65536; do
  err 3 'bytes' "${run[@]}" rms_norm.fwd --device cpu --shape $shape
done
err 3 'bytes' "${run[@]}" swiglu.bwd --device cpu --shape 1x1099511627776
err 3 'bytes' "${run[@]}" group_norm.bwd --device cpu --shape 2x65536x1099511627776 --groups 1
err 3 'bytes' "${run[@]}" rms_norm.fwd --device npu --shape 100000x100000
# --groups
for v in '' ' ' 0 -1 1.5 1e3 abc ' 2' '2 ' +2 0x10 9223372036854775808 18446744073709551616 1e400 $'2\n'; do
  shown=${v//$'\n'/\\n}
  bad_value --groups "$v" group_norm.fwd "run: invalid --groups '$shown'"
done
err 2 'num_groups = 4 with 6 channels' "${run[@]}" group_norm.fwd --device cpu --shape 2x6x4 --groups 4
err 2 'num_groups = 7 with 6 channels' "${run[@]}" group_norm.bwd --device cpu --shape 2x6x4 --groups 7
err 2 'num_groups = 9223372036854775807 with 6 channels' "${run[@]}" group_norm.fwd --device cpu --shape 2x6x4 \
  --groups 9223372036854775807
err 2 'num_groups = 1099511627776 with 6 channels' "${run[@]}" group_norm.bwd --device cpu --shape 2x6x4 \
  --groups 1099511627776
err 2 'group_norm.fwd' "${run[@]}" group_norm.fwd --device cpu --shape 5 --groups 1
ok "${run[@]}" group_norm.fwd --device cpu --shape 2x6x4 --groups 6 --repeat 1
ok "${run[@]}" group_norm.bwd --device cpu --shape 2x6 --groups 2 --repeat 1
# --eps, --offset, --tol-scale: finite numbers (--eps, --tol-scale >= 0)
for v in '' ' ' nan NaN inf -inf infinity 1e400 -1e400 1x --1 1,5 0x1p-3 ' 1' '1 ' 1e $'1\n'; do
  shown=${v//$'\n'/\\n}
  bad_value --eps "$v" rms_norm.fwd "run: invalid --eps '$shown'"
  bad_value --offset "$v" rms_norm.fwd "run: invalid --offset '$shown'"
  bad_value --tol-scale "$v" rms_norm.fwd "run: invalid --tol-scale '$shown'"
done
bad_value --eps -1e-6
bad_value --eps -0.5 layer_norm.fwd
bad_value --tol-scale -1
ok "${run[@]}" rms_norm.fwd "${small[@]}" --eps 0
ok "${run[@]}" rms_norm.fwd "${small[@]}" --eps 1e-300
ok "${run[@]}" layer_norm.bwd "${small[@]}" --eps 1e30
ok "${run[@]}" rms_norm.fwd "${small[@]}" --offset -1
ok "${run[@]}" fused_add_rms_norm.bwd "${small[@]}" --offset -1e-300
ok "${run[@]}" rms_norm.fwd "${small[@]}" --tol-scale 1e300
# --casting, --values
for v in '' ' ' LLAMA 'llama ' mistral none, $'gemma\n'; do
  shown=${v//$'\n'/\\n}
  bad_value --casting "$v" rms_norm.fwd "run: invalid --casting '$shown'; accepted: llama, gemma, none"
done
for v in '' ' ' RANDOM huge nan 'equal '; do
  bad_value --values "$v" rms_norm.fwd "run: invalid --values '$v'; accepted: random, large, equal, special"
done
# --seed: 0 to 2^64-1; --repeat: 1 to 100000
for v in '' ' ' -1 18446744073709551616 99999999999999999999999 1e3 0x10 1.0 ' 1' +1 $'1\n'; do
  shown=${v//$'\n'/\\n}
  bad_value --seed "$v" rms_norm.fwd "run: invalid --seed '$shown'"
done
ok "${run[@]}" rms_norm.fwd "${small[@]}" --seed 18446744073709551615
ok "${run[@]}" rms_norm.fwd "${small[@]}" --seed 0
for v in '' ' ' 0 -1 100001 1e5 18446744073709551616 9223372036854775808 1.5 ' 3'; do
  bad_value --repeat "$v" rms_norm.fwd "run: invalid --repeat '$v'"
done
# Duplicated options name both values, the first one bad too.
err 2 "run: --device is given twice ('nonsense' and 'cpu')" "${run[@]}" rms_norm.fwd --device nonsense --device cpu
err 2 "run: --shape is given twice ('3x4' and '3x-4')" "${run[@]}" rms_norm.fwd --shape 3x4 --shape=3x-4
err 2 "run: --dtype is given twice ('f32' and 'f32')" "${run[@]}" rms_norm.fwd --dtype f32 --dtype f32

# ---- `opreg run`: each option on each op: run where it applies, refused (naming it) where not.
# Also the edge-case values on every op (the conformance grids cover every variant; this is the
# command line end to end).
ops=(rms_norm.fwd rms_norm.bwd fused_add_rms_norm.fwd fused_add_rms_norm.bwd layer_norm.fwd layer_norm.bwd
  group_norm.fwd group_norm.bwd geglu.fwd geglu.bwd swiglu.fwd swiglu.bwd rope.fwd rope.bwd)
applies() {  # OPTION OP
  case $1 in
    --wdtype) [[ $2 != geglu.* && $2 != swiglu.* ]] ;;
    --eps | --no-weight) [[ $2 != geglu.* && $2 != swiglu.* && $2 != rope.* ]] ;;
    --offset | --casting) [[ $2 == rms_norm.* || $2 == fused_add_rms_norm.* ]] ;;
    --groups) [[ $2 == group_norm.* ]] ;;
    --no-bias) [[ $2 == layer_norm.* || $2 == group_norm.* ]] ;;
    --inplace) [[ $2 == *.bwd || $2 == rope.* ]] ;;
    --kv-heads | --style | --table | --transposed) [[ $2 == rope.* ]] ;;
  esac
}
for op in "${ops[@]}"; do
  shape=(--shape 3x8)
  [[ $op == group_norm.* ]] && shape=(--shape 2x6x4)
  [[ $op == rope.* ]] && shape=(--shape 2x3x4x8)
  for option in "--wdtype f32" "--eps 1e-5" "--offset 0.5" "--casting gemma" "--groups 2" --inplace --no-weight \
    --no-bias "--kv-heads 2" "--style interleaved" "--table positions" --transposed; do
    name=${option%% *}
    if applies "$name" "$op"; then
      ok "${run[@]}" "$op" --device cpu "${shape[@]}" --repeat 1 $option
    else
      err 2 "run: $name does not apply to $op" "${run[@]}" "$op" --device cpu "${shape[@]}" $option
    fi
  done
  for values in large equal special; do
    ok "${run[@]}" "$op" --device cpu "${shape[@]}" --repeat 1 --values $values --dtype bf16
  done
done
err 2 'offset = 1 without a weight' "${run[@]}" fused_add_rms_norm.bwd --device cpu --shape 2x3 --no-weight --offset 1
# rope's layouts: an odd head dim and a q that is not [B, heads, T, D] are refused, naming both.
err 2 'rope.fwd: q has head dim D = 7 (shape [2x3x4x7]); accepted: an even D >= 2' "${run[@]}" rope.fwd --device cpu \
  --shape 2x3x4x7
err 2 'rope.bwd: dq_out has 3 dims (shape [2x3x8]); accepted: [B, heads, T, D]' "${run[@]}" rope.bwd --device cpu \
  --shape 2x3x8
err 2 "run: --wdtype does not apply: layer_norm.fwd runs without a weight or a bias" \
  "${run[@]}" layer_norm.fwd --no-weight --no-bias --wdtype f32
err 2 'group_norm.fwd' "${run[@]}" group_norm.fwd --device cpu --shape 6 --groups 1

# ---- `opreg bench`: what its outputs and --compare need is checked before the first case (and
# before the ceilings are measured: nothing on stdout), with the file and the OS's reason; values
# equal after parsing are duplicates (issue 34). A bad case runs at most one tiny case, not 180 s.
bench=("$opreg" bench --ops rms_norm --dirs fwd --hidden 64 --rows 4 --budget 0.01 --devices cpu)
mkdir -p "$tmp/bench-dir/benchmark_data.json" "$tmp/bench-png/rms_norm_forward.png"
err 2 "--out $tmp/bench-dir: cannot write $tmp/bench-dir/benchmark_data.json: Is a directory" \
  "${bench[@]}" --out "$tmp/bench-dir"
err 2 "--out /proc/self: cannot write /proc/self/benchmark_data.json: " "${bench[@]}" --out /proc/self
err 2 "cannot write $tmp/bench-png/rms_norm_forward.png: Is a directory" "${bench[@]}" --out "$tmp/bench-png" --plot
mkfifo "$tmp/bench-fifo"
err 2 "--compare $tmp/bench-fifo: not a regular file (a FIFO)" "${bench[@]}" --out "$tmp/bench-o" --compare "$tmp/bench-fifo"
err 2 "--compare /dev/zero: not a regular file (a character device)" "${bench[@]}" --out "$tmp/bench-o" --compare /dev/zero
err 2 "--compare $tmp: not a regular file (a directory)" "${bench[@]}" --out "$tmp/bench-o" --compare "$tmp"
err 2 "--compare $tmp/none.csv: cannot open it: No such file or directory" "${bench[@]}" --out "$tmp/bench-o" \
  --compare "$tmp/none.csv"
truncate -s 65M "$tmp/bench-big.csv"
err 2 "--compare $tmp/bench-big.csv: 68157440 bytes, more than the 67108864 (64 MiB) accepted" "${bench[@]}" \
  --out "$tmp/bench-o" --compare "$tmp/bench-big.csv"
err 2 "bench: --devices names cpu twice ('cpu' and 'cpu:0')" "$opreg" bench --ops rms_norm --dirs fwd --hidden 64 \
  --rows 4 --budget 0.01 --devices cpu,cpu:0 --out "$tmp/bench-o"
err 2 "bench: --hidden names 64 twice ('64' and '064')" "$opreg" bench --ops rms_norm --dirs fwd --hidden 64,064 \
  --rows 4 --budget 0.01 --devices cpu --out "$tmp/bench-o"
err 2 "bench: --hidden names 64 twice ('0064' and '64')" "$opreg" bench --hidden=0064,128,64 --ops rms_norm \
  --dirs fwd --rows 4 --budget 0.01 --devices cpu --out "$tmp/bench-o"

# ---- The OPREG_* variables, on a run that infers its device (so OPREG_DEVICE and the order are
# used) and on `opreg devices`. Unset, empty and blank are the same (docs/env.md).
probe=("$opreg" run rms_norm.fwd --shape 3x8 --repeat 1)
env_ok() { local var=$1 value=$2; shift 2; ok env "$var=$value" "${probe[@]}" "$@"; }
env_bad() {  # VAR VALUE CODE [NEEDLE]: refused on a run and on `opreg devices`
  local var=$1 value=$2 code=$3 needle=${4:-}
  if [[ -z $needle ]]; then  # the value, quoted as docs/env.md says: '...' with \n, \x01, \', \\
    needle=${value//\\/\\\\}
    needle=${needle//\'/\\\'}
    needle=${needle//$'\n'/\\n}
    needle=${needle//$'\t'/\\t}
    needle=${needle//$'\r'/\\r}
    needle=${needle//$'\x01'/\\x01}
    needle=${needle//$'\x1b'/\\x1b}
    needle="'${needle:0:60}"
  fi
  err "$code" "$needle" env "$var=$value" "${probe[@]}"
  err "$code" "$needle" env "$var=$value" "$opreg" devices
}
for var in OPREG_DEVICE OPREG_BACKEND_ORDER OPREG_DISABLE OPREG_FORCE_VARIANT OPREG_FALLBACK OPREG_VERBOSE \
  OPREG_NUM_THREADS OPREG_CPU_ISA OPREG_PLUGINS OPREG_NPU_PROFILE OPREG_NPU_UB_BYTES OPREG_NPU_MATH \
  OPREG_NPU_SYNC; do
  for blank in '' ' ' $'\t' $' \t '; do env_ok $var "$blank"; done
  env_bad $var "$ctl" 2
  if [[ $var == OPREG_DISABLE ]]; then  # a backend name that may register later
    warn "OPREG_DISABLE entry '${long:0:60}" env "$var=$long" "${probe[@]}"
  else
    env_bad $var "$long" 2
  fi
  env_bad $var $'\n' 2
  env_bad $var "a'b\\c" 2
  # Bytes that are not UTF-8, DEL, and a character outside ASCII: refused like any other value.
  env_bad $var $'\xff\xfe' 2 $'\xff\xfe'
  env_bad $var $'x\x7fy' 2 "'x\\x7fy'"
  env_bad $var 'cpü' 2 "'cpü"
done
# OPREG_DEVICE
for v in cpu ' cpu ' cpu:0 $'\tcpu'; do env_ok OPREG_DEVICE "$v"; done
env_ok OPREG_DEVICE npu
env_ok OPREG_DEVICE npu:0
for v in nonsense CPU cpu: :0 cpu:-1 cpu:x cpu:1e400 cpu,npu 'cpu npu' cpu:0:0 $'cpu\nX' 9; do env_bad OPREG_DEVICE "$v" 2; done
env_bad OPREG_DEVICE cpu:1 3 "OPREG_DEVICE='cpu:1': device cpu:1 does not exist"
env_bad OPREG_DEVICE cpu:99999999999999999999 3 "does not exist"
env_bad OPREG_DEVICE npu:2 3 "OPREG_DEVICE='npu:2': device npu:2 does not exist"
[[ $cuda_state == unavailable ]] && env_bad OPREG_DEVICE cuda 3 'device cuda:0 is unavailable'
((xpu_built)) || env_bad OPREG_DEVICE xpu 3 "the xpu backend is not built"
# OPREG_DEVICE is checked when --device overrides it, and a bad one is never dropped.
err 2 "OPREG_DEVICE='nonsense': invalid device 'nonsense'" env OPREG_DEVICE=nonsense "$opreg" run rms_norm.fwd \
  --device cpu --shape 2x3
err 2 "OPREG_DEVICE='cpu:x'" env OPREG_DEVICE=cpu:x "$opreg" run rms_norm.fwd --device cpu --shape 2x3
ok env OPREG_DEVICE=npu "$opreg" run rms_norm.fwd --device cpu --shape 2x3 --repeat 1
# OPREG_BACKEND_ORDER
for v in cpu npu,cpu cuda,npu,xpu,cpu ' npu , cpu ' xpu,cpu; do env_ok OPREG_BACKEND_ORDER "$v"; done
env_bad OPREG_BACKEND_ORDER cpu,cpu 2 "OPREG_BACKEND_ORDER: 'cpu' is listed twice"
env_bad OPREG_BACKEND_ORDER npu,cpu,npu 2 "OPREG_BACKEND_ORDER: 'npu' is listed twice"
for v in , cpu, ,cpu 'cpu,,npu' ' , '; do
  env_bad OPREG_BACKEND_ORDER "$v" 2 "OPREG_BACKEND_ORDER='$(echo $v)': empty entry"  # trimmed
done
for v in CPU 'cpu npu' 'cpu;npu' cpu:0 9cpu; do
  env_bad OPREG_BACKEND_ORDER "$v" 2 "OPREG_BACKEND_ORDER: '${v%%,*}' is not a backend name"
done
err 2 "OPREG_BACKEND_ORDER: no backend 'nonsense' is registered" env OPREG_BACKEND_ORDER=nonsense,cpu "${probe[@]}"
err 3 'no device available in OPREG_BACKEND_ORDER order npu' env OPREG_BACKEND_ORDER=npu "${probe[@]}"
# OPREG_DISABLE
for v in npu cpu.rms_norm.fwd.generic ' npu , xpu ' npu,npu cuda; do env_ok OPREG_DISABLE "$v"; done
warn "OPREG_DISABLE entry 'mine' names a backend that is not registered" env OPREG_DISABLE=mine "${probe[@]}"
warn "OPREG_DISABLE entry 'mine.rms_norm.fwd.x'" env OPREG_DISABLE=mine.rms_norm.fwd.x "${probe[@]}"
env_bad OPREG_DISABLE cpu 2 "OPREG_DISABLE: the cpu backend cannot be disabled"
env_bad OPREG_DISABLE npu,cpu 2 "OPREG_DISABLE: the cpu backend cannot be disabled"
env_bad OPREG_DISABLE cpu.rms_norm.fwd.typo 2 "OPREG_DISABLE: no variant 'cpu.rms_norm.fwd.typo' is registered"
((xpu_built)) && env_bad OPREG_DISABLE xpu.rms_norm.fwd.x 2 "OPREG_DISABLE: no variant 'xpu.rms_norm.fwd.x' is registered"
for v in CPU cpu.rms_norm cpu.nosuch.fwd.x cpu.rms_norm.up.x 'n pu' npu:0 a..b; do
  env_bad OPREG_DISABLE "$v" 2 "OPREG_DISABLE: '$v' is neither a backend name"
done
for v in , npu, ,npu; do env_bad OPREG_DISABLE "$v" 2 "OPREG_DISABLE='$v': empty entry"; done
# Every cpu variant of the op disabled: the cpu never falls back, so the run is unsupported (3).
err 3 'rms_norm.fwd on cpu' env OPREG_DISABLE=cpu.rms_norm.fwd.generic,cpu.rms_norm.fwd.avx2,cpu.rms_norm.fwd.ref \
  "${run[@]}" rms_norm.fwd --device cpu --shape 2x3
# OPREG_FORCE_VARIANT
for v in cpu.rms_norm.fwd.ref cpu.rms_norm.fwd.generic ' cpu.rms_norm.fwd.ref ' cpu.layer_norm.fwd.ref \
  cpu.rms_norm.fwd.ref,cpu.rms_norm.bwd.generic; do
  env_ok OPREG_FORCE_VARIANT "$v"
done
warn "OPREG_FORCE_VARIANT entry 'mine.rms_norm.fwd.fast'" env OPREG_FORCE_VARIANT=mine.rms_norm.fwd.fast "${probe[@]}"
env_bad OPREG_FORCE_VARIANT cpu.rms_norm.fwd.typo 2 "OPREG_FORCE_VARIANT: unknown variant 'cpu.rms_norm.fwd.typo'"
for v in bogus cpu cpu.rms_norm.fwd cpu.nosuch.fwd.x CPU.rms_norm.fwd.ref cpu.rms_norm.fwd.ref.x; do
  env_bad OPREG_FORCE_VARIANT "$v" 2 "OPREG_FORCE_VARIANT: '$v' is not a variant name"
done
env_bad OPREG_FORCE_VARIANT cpu.rms_norm.fwd.ref,cpu.rms_norm.fwd.ref 2 \
  "OPREG_FORCE_VARIANT: 'cpu.rms_norm.fwd.ref' and 'cpu.rms_norm.fwd.ref' are both forced"
env_bad OPREG_FORCE_VARIANT cpu.rms_norm.fwd.ref,cpu.rms_norm.fwd.generic 2 "are both forced for rms_norm.fwd on cpu"
for v in , cpu.rms_norm.fwd.ref,; do env_bad OPREG_FORCE_VARIANT "$v" 2 "OPREG_FORCE_VARIANT='$v': empty entry"; done
((xpu_built)) || env_bad OPREG_FORCE_VARIANT xpu.rms_norm.fwd.x 3 "belongs to the xpu backend, which is not built"
err 2 "variant 'cpu.rms_norm.fwd.ref' is both forced (OPREG_FORCE_VARIANT) and disabled" \
  env OPREG_FORCE_VARIANT=cpu.rms_norm.fwd.ref OPREG_DISABLE=cpu.rms_norm.fwd.ref "${probe[@]}"
# OPREG_FALLBACK
for v in error warn silent ' warn '; do env_ok OPREG_FALLBACK "$v"; done
for v in ERROR none 0 1 warn,silent 'warn silent' $'warn\n'; do env_bad OPREG_FALLBACK "$v" 2; done
# (npu's geglu.fwd refused: its two choosable variants disabled, gpu_port refuses every problem)
no_npu_geglu=OPREG_DISABLE=npu.geglu.fwd.flat,npu.geglu.fwd.sub_block
err 3 'geglu.fwd on npu:0' env OPREG_FALLBACK=error "$no_npu_geglu" "$opreg" run geglu.fwd --device npu --shape 2x3
warn 'falls back to the cpu' env OPREG_FALLBACK=warn "$no_npu_geglu" "$opreg" run geglu.fwd --device npu --shape 2x3 \
  --repeat 1
ok env OPREG_FALLBACK=silent "$opreg" run geglu.bwd --device npu --shape 2x3 --repeat 1
# OPREG_VERBOSE
env_ok OPREG_VERBOSE 0
warn 'rms_norm.fwd' env OPREG_VERBOSE=1 "${probe[@]}" --device cpu
for v in 3 -1 1.0 +1 yes 99999999999999999999 1e400 0x1 '1 2'; do env_bad OPREG_VERBOSE "$v" 2; done
# OPREG_NUM_THREADS
for v in 1 2 4096 ' 3 '; do env_ok OPREG_NUM_THREADS "$v"; done
ok env OPREG_NUM_THREADS=4096 "$opreg" run layer_norm.bwd --device cpu --shape 64x1031 --repeat 1
for v in 0 -1 4097 2.5 1e3 99999999999999999999 18446744073709551617 0x10 all; do env_bad OPREG_NUM_THREADS "$v" 2; done
# OPREG_CPU_ISA
for v in generic avx2 ' generic '; do env_ok OPREG_CPU_ISA "$v"; done
for v in bogus AVX2 avx512 sse2 generic,avx2 x86-64; do env_bad OPREG_CPU_ISA "$v" 2; done
# A variant above the cap stays registered and refuses, with the reason, even when forced.
err 3 'cpu.rms_norm.fwd.avx2 cannot run: OPREG_CPU_ISA=generic caps' env OPREG_CPU_ISA=generic \
  OPREG_FORCE_VARIANT=cpu.rms_norm.fwd.avx2 "${probe[@]}"
err 3 'cpu.swiglu.bwd.avx2 cannot run' env OPREG_CPU_ISA=generic OPREG_FORCE_VARIANT=cpu.swiglu.bwd.avx2 \
  "$opreg" run swiglu.bwd --shape 2x3
# OPREG_PLUGINS
for v in /nonexistent/x.so ./nonexistent.so nonexistent.so /etc/passwd / /dev/null "$tmp" libm.so.6; do
  env_bad OPREG_PLUGINS "$v" 2 "plugin '$v'"
done
for v in : /a.so: :/a.so /a.so::/b.so; do env_bad OPREG_PLUGINS "$v" 2 "OPREG_PLUGINS='$v': empty entry"; done
env_bad OPREG_PLUGINS "/$long" 2 "plugin '/xxxxxxxx"
if [[ -n $plugin ]]; then
  ok env OPREG_PLUGINS="$plugin" "${probe[@]}"
  ok env OPREG_PLUGINS=" $plugin " "$opreg" devices
  env_bad OPREG_PLUGINS "$plugin:$plugin" 2 "already loaded"
  env_bad OPREG_PLUGINS "$plugin:/nonexistent.so" 2 "plugin '/nonexistent.so'"
fi
# OPREG_NPU_PROFILE, OPREG_NPU_UB_BYTES, OPREG_NPU_MATH and OPREG_NPU_SYNC (read when the npu backend registers:
# every command)
for v in Ascend910B4 910B2 ' Ascend910_93 ' Ascend950PR; do env_ok OPREG_NPU_PROFILE "$v"; done
for v in nosuch ascend910b4 Ascend 910 Ascend910B4,910B2 910B3; do env_bad OPREG_NPU_PROFILE "$v" 2; done
for v in 4096 1048576 196608 ' 16384 '; do env_ok OPREG_NPU_UB_BYTES "$v"; done
for v in exact approx ' approx '; do env_ok OPREG_NPU_MATH "$v"; done
for v in Approx exact,approx fast 1; do env_bad OPREG_NPU_MATH "$v" 2; done
for v in auto manual ' manual '; do env_ok OPREG_NPU_SYNC "$v"; done
for v in Manual auto,manual off 0; do env_bad OPREG_NPU_SYNC "$v" 2; done
# The smallest UB runs a row past it in chunks. bf16: f32's exact dW path takes a fixed 6 KiB of
# UB scratch (docs/backends/npu.md), so at 4096 B an f32 backward falls back, saying so.
ok env OPREG_NPU_UB_BYTES=4096 "$opreg" run rms_norm.bwd --device npu --shape 3x5000 --dtype bf16 --repeat 1
for v in 0 4064 4095 4097 1048577 1048608 -4096 18446744073709551616 99999999999999999999 1e400 0x1000 192KiB 4096.0; do
  env_bad OPREG_NPU_UB_BYTES "$v" 2
done
# Unknown variables are a warning, not an error (scripts keep working across versions).
warn "'OPREG_DEVCE' is not a variable this opreg reads" env OPREG_DEVCE=cpu "${probe[@]}"
warn "'OPREG_' is not a variable" env OPREG_=1 "${probe[@]}"
warn "'OPREG_BOGUS' is not a variable" env OPREG_BOGUS= "${probe[@]}"
# Several bad variables: one line, about one of them.
err 2 "OPREG_" env OPREG_VERBOSE=9 OPREG_FALLBACK=x OPREG_NUM_THREADS=0 "${probe[@]}"

# ---- Issue 18: the cases found since the matrix was written.
# eps and offset: one range, said by the message (|v| > 1e300 was refused as "not a finite
# number"); a number too small for a double is the nearest one (0 or a subnormal), as 4.9e-324 is.
bad_value --eps 1.0000001e300 rms_norm.fwd "run: invalid --eps '1.0000001e300'; accepted: a number from 0 to 1e300"
bad_value --offset -1e301 rms_norm.fwd "run: invalid --offset '-1e301'; accepted: a number from -1e300 to 1e300"
for v in 1e-400 2e-324 4.9e-324 1e300; do
  ok "${run[@]}" rms_norm.fwd "${small[@]}" --eps "$v"
  ok "${run[@]}" rms_norm.fwd "${small[@]}" --offset "-$v"
done
# Memory admission counts a host-memory device's copies with the host's: a problem whose host
# copies alone fit, but not with the device's beside them, is refused before anything is
# allocated (it was admitted on npu and allocated far past the host's memory). rms_norm.fwd f32
# rows x 4096 takes 48 KiB a row on the host without the device's copies, 80 KiB with them:
# rows for 0.8 of what is available without.
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if [[ -n $avail_kb ]] && ((avail_kb > 0)); then
  rows=$((avail_kb * 8 / 10 / 48))
  err 3 'on the host, which has' "${run[@]}" rms_norm.fwd --device npu --shape "${rows}x4096"
  err 3 'on the host, which has' "${run[@]}" rms_norm.fwd --device cpu --shape "${rows}x4096"
fi
# A forced plugin variant that refuses the problem is an error naming it and its reason (it was a
# crash: the C kernel read bf16 data as f32). Forced on a problem it takes, it runs.
if [[ -n $plugin ]]; then
  for dtype in "bf16" "f16 --wdtype f32"; do
    # shellcheck disable=SC2086  # the dtype options split on purpose
    err 3 'ctoy.rms_norm.fwd.c is forced by OPREG_FORCE_VARIANT but refuses this problem: the C kernel takes f32' \
      env OPREG_PLUGINS="$plugin" OPREG_FORCE_VARIANT=ctoy.rms_norm.fwd.c "${run[@]}" rms_norm.fwd --device ctoy \
      --dtype $dtype --shape 64x5000
  done
  ok env OPREG_PLUGINS="$plugin" OPREG_FORCE_VARIANT=ctoy.rms_norm.fwd.c "${run[@]}" rms_norm.fwd --device ctoy \
    --shape 64x5000 --repeat 1
  # OPREG_PLUGINS naming what is no plugin: a directory, a script, a library without the entry, a
  # name with a newline; an empty element; the same plugin twice.
  printf '#!/bin/sh\nexit 0\n' >"$tmp/script.so"
  chmod +x "$tmp/script.so"
  for v in "$tmp/script.so" libc.so.6; do env_bad OPREG_PLUGINS "$v" 2 "plugin '$v'"; done
  env_bad OPREG_PLUGINS "$plugin"$'\n' 2 "plugin '$plugin\\n'"
  env_bad OPREG_PLUGINS "$plugin::$plugin" 2 "empty entry"
  env_bad OPREG_PLUGINS "$plugin: $plugin" 2 "already loaded"
fi

# ---- The xpu backend with the caller's OpenCL (PoCL's CPU device here: emulated).
if ((xpu_usable)); then
  cl=("${with_opencl[@]}")
  ok "${cl[@]}" "$opreg" devices
  ok "${cl[@]}" "${run[@]}" rms_norm.fwd --shape 2x3 --device xpu --repeat 1
  ok "${cl[@]}" "${run[@]}" rms_norm.bwd --shape 5x9 --device xpu:0 --repeat 1 --values special --dtype bf16 --inplace
  ok "${cl[@]}" env OPREG_DEVICE=xpu "${probe[@]}"
  err 3 "device xpu:7 does not exist" "${cl[@]}" "${run[@]}" rms_norm.fwd --shape 2x3 --device xpu:7
  err 3 'no device available in OPREG_BACKEND_ORDER order xpu' "${cl[@]}" env OPREG_BACKEND_ORDER=xpu "${probe[@]}"
  err 2 "OPREG_FORCE_VARIANT: unknown variant 'xpu.rms_norm.fwd.typo'" "${cl[@]}" env \
    OPREG_FORCE_VARIANT=xpu.rms_norm.fwd.typo "${probe[@]}"
  err 2 "OPREG_DISABLE: no variant 'xpu.rms_norm.fwd.typo' is registered" "${cl[@]}" env \
    OPREG_DISABLE=xpu.rms_norm.fwd.typo "${probe[@]}"
  ok "${cl[@]}" env OPREG_DISABLE=xpu OPREG_FALLBACK=silent "${run[@]}" layer_norm.fwd --device xpu --shape 3x7 --repeat 1
  err 3 'layer_norm.fwd on xpu:0' "${cl[@]}" env OPREG_DISABLE=xpu OPREG_FALLBACK=error "${run[@]}" layer_norm.fwd \
    --device xpu --shape 3x7
  err 3 'bytes' "${cl[@]}" "${run[@]}" rms_norm.fwd --device xpu --shape 200000x200000
  # Issue 18. PoCL's kernel cache: set but blank counts as unset (PoCL asserted on "", taking
  # every command down); unusable (a regular file) is the reason xpu is unavailable. Unset, the
  # cache is $HOME/.cache/opreg/pocl: a home whose cache is the tests' (ctest's POCL_CACHE_DIR,
  # filled by xpu.kernel_cache), so that the xpu runs compile nothing (every kernel: past the
  # 60 s a case may take, on a busy machine).
  home=$tmp/home
  mkdir -p "$home/.cache/opreg"
  if [[ -n ${POCL_CACHE_DIR:-} ]]; then
    mkdir -p "$POCL_CACHE_DIR"
    ln -s "$POCL_CACHE_DIR" "$home/.cache/opreg/pocl"
  fi
  for v in '' ' ' $'\t'; do
    blank=(env -u XDG_CACHE_HOME HOME="$home" POCL_CACHE_DIR="$v")
    ok "${cl[@]}" "${blank[@]}" "$opreg" devices
    ok "${cl[@]}" "${blank[@]}" OPREG_DISABLE=xpu "$opreg" ops
    ok "${cl[@]}" "${blank[@]}" OPREG_BACKEND_ORDER=cpu "${run[@]}" rms_norm.fwd "${small[@]}"
    ok "${cl[@]}" "${blank[@]}" "${run[@]}" rms_norm.fwd --device xpu --shape 2x3 --repeat 1
  done
  echo file >"$tmp/cache-file"
  err 3 "POCL_CACHE_DIR=$tmp/cache-file is unusable" "${cl[@]}" env POCL_CACHE_DIR="$tmp/cache-file" \
    "${run[@]}" rms_norm.fwd --device xpu --shape 2x3
  err 3 "POCL_CACHE_DIR=$tmp/cache-file is unusable" "${cl[@]}" env POCL_CACHE_DIR="$tmp/cache-file" \
    OPREG_DEVICE=xpu "$opreg" devices
  ok "${cl[@]}" env POCL_CACHE_DIR="$tmp/cache-file" "${run[@]}" rms_norm.fwd "${small[@]}"
  err 3 'POCL_DEVICES=bogus' "${cl[@]}" env POCL_DEVICES=bogus "${run[@]}" rms_norm.fwd --device xpu --shape 2x3
  # Admission on a host-memory device, as on npu above.
  if [[ -n $avail_kb ]] && ((avail_kb > 0)); then
    err 3 'on the host, which has' "${cl[@]}" "${run[@]}" rms_norm.fwd --device xpu --shape "${rows}x4096"
  fi
fi

wait
failures=0
for f in "$tmp"/*.fail; do
  [[ -e $f ]] || continue
  cat "$f"
  failures=$((failures + 1))
done
echo "bad-input matrix: $n cases, $((n - failures)) passed, $failures failed"
((failures == 0))
