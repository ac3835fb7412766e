#!/usr/bin/env bash
# Instructions a cpu kernel executes per element, by op direction and dtype: a figure that does
# not depend on the machine's load (issue 24's "where the time goes" beside the timings of
# bench_cpu_ops). Each case runs `opreg run` under callgrind on one thread (OPREG_NUM_THREADS=1)
# with --repeat 5, and the instructions of the functions in opreg::cpu::avx2 or ::generic (the
# kernels, everything inlined into them) are divided by 5 x the elements. The check against the
# reference, the input generation and the registry are other functions and are not counted.
#
# usage: bench/cpu_instructions.sh [--opreg PATH] [--shape RxH] [--ops "a.fwd b.bwd"] [--dtypes "f32 bf16"]
#   --opreg   the CLI (default build/tools/opreg/opreg)
#   --shape   rows x hidden of the row ops (default 64x4096: in cache); group_norm runs 4x1024x64
#             with 32 groups, the same 262144 elements
#   --ops     op directions (default all twelve)
#   --dtypes  dtypes (default f32 bf16)
# Needs valgrind. Prints one line per case: op dtype instructions/element.
set -euo pipefail
opreg=build/tools/opreg/opreg
shape=64x4096
ops="rms_norm.fwd rms_norm.bwd fused_add_rms_norm.fwd fused_add_rms_norm.bwd layer_norm.fwd layer_norm.bwd"
ops+=" group_norm.fwd group_norm.bwd geglu.fwd geglu.bwd swiglu.fwd swiglu.bwd"
dtypes="f32 bf16"
while (($#)); do
  case $1 in
    --opreg) opreg=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cpu_instructions.sh: unknown argument '$1' (accepted: --opreg, --shape, --ops, --dtypes, --help)" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "cpu_instructions.sh: needs valgrind (apt install valgrind)" >&2; exit 2; }
[[ -x $opreg ]] || { echo "cpu_instructions.sh: no CLI at '$opreg' (build opreg_cli, or pass --opreg)" >&2; exit 2; }
[[ $shape =~ ^[0-9]+x[0-9]+$ ]] || { echo "cpu_instructions.sh: --shape '$shape': expected ROWSxHIDDEN" >&2; exit 2; }
elements=$(( ${shape%x*} * ${shape#*x} ))
out=$(mktemp)
trap 'rm -f "$out"' EXIT
repeat=5
for op in $ops; do
  for dtype in $dtypes; do
    args=(--shape "$shape")
    if [[ $op == group_norm.* ]]; then args=(--shape "4x1024x$(( elements / 4096 ))" --groups 32); fi
    OPREG_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$opreg" run "$op" --dtype "$dtype" --repeat "$repeat" "${args[@]}" >/dev/null 2>&1 ||
      { echo "cpu_instructions.sh: '$opreg run $op --dtype $dtype' failed under valgrind" >&2; exit 1; }
    ir=$(callgrind_annotate --inclusive=no "$out" 2>/dev/null | grep -E 'opreg::cpu::(avx2|generic)::' | grep -v '=>' |
         awk '{gsub(",", "", $1); s += $1} END {print s + 0}')
    awk -v op="$op" -v dt="$dtype" -v ir="$ir" -v n="$((repeat * elements))" \
      'BEGIN {printf "%-24s %-5s %6.2f instructions/element\n", op, dt, ir / n}'
  done
done
