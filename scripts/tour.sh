#!/usr/bin/env bash
# The tour behind `make run`: the devices, the dispatch table, then one checked and timed
# `opreg run` of each of the twelve op directions on the default device (OPREG_DEVICE or what
# inference picks), ending with a table of the results. Shapes are moderate so the whole tour
# takes seconds on a 2-core machine; every run happens even when one fails, and the exit status
# is nonzero if any did (an op the device does not support, exit 3, is listed as unsupported).
# usage: scripts/tour.sh BUILD_DIR
set -u

if [[ $# -ne 1 || $1 == -h || $1 == --help ]]; then
  echo "usage: scripts/tour.sh BUILD_DIR   (runs BUILD_DIR/tools/opreg/opreg)" >&2
  exit 2
fi
opreg=$1/tools/opreg/opreg
if [[ ! -x $opreg ]]; then
  echo "tour: $opreg is missing; build first (make build, or cmake --build $1)" >&2
  exit 2
fi

status=0
section() { printf '\n== %s\n' "$*"; }

section opreg devices
"$opreg" devices || status=1
section opreg ops
"$opreg" ops || status=1

# op, then its options. The norms run bf16 activations with f32 weights (mixed-precision
# training); the glu ops have no weight; rope turns HF's transposed q (32 heads) and k (8) by a
# shared bf16 table. 256 rows of 4096 (8x64x1024 for group_norm, 256 positions for rope) keep
# a run to a fraction of a second on 2 cores, most of it the double-precision reference check.
runs=(
  "rms_norm.fwd --dtype bf16 --wdtype f32 --shape 256x4096"
  "rms_norm.bwd --dtype bf16 --wdtype f32 --shape 256x4096"
  "fused_add_rms_norm.fwd --dtype bf16 --wdtype f32 --shape 256x4096"
  "fused_add_rms_norm.bwd --dtype bf16 --wdtype f32 --shape 256x4096"
  "layer_norm.fwd --dtype bf16 --wdtype f32 --shape 256x4096"
  "layer_norm.bwd --dtype bf16 --wdtype f32 --shape 256x4096"
  "group_norm.fwd --dtype bf16 --wdtype f32 --shape 8x64x1024 --groups 32"
  "group_norm.bwd --dtype bf16 --wdtype f32 --shape 8x64x1024 --groups 32"
  "geglu.fwd --dtype bf16 --shape 256x4096"
  "geglu.bwd --dtype bf16 --shape 256x4096"
  "swiglu.fwd --dtype bf16 --shape 256x4096"
  "swiglu.bwd --dtype bf16 --shape 256x4096"
  "rope.fwd --dtype bf16 --shape 1x32x256x128 --kv-heads 8 --transposed"
  "rope.bwd --dtype bf16 --shape 1x32x256x128 --kv-heads 8 --transposed"
)

section opreg run "(each op on the default device, --repeat 3)"
results=()
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
for r in "${runs[@]}"; do
  read -r -a argv <<<"$r"
  echo "\$ opreg run $r --repeat 3"
  # stdout is the result line, kept for the table; stderr (a failed check's report, warnings)
  # is shown after it, in the order opreg writes them.
  line=$("$opreg" run "${argv[@]}" --repeat 3 2>"$errors")
  rc=$?
  [[ -n $line ]] && echo "$line"
  cat "$errors" >&2
  if [[ $rc -eq 3 ]]; then
    # The default device has no variant for this op and its fallback policy is error (a GPU
    # before its kernels land): a fact about the build, not a failure of the tour.
    line="result op=${argv[0]} status=unsupported"
  elif [[ $rc -ne 0 ]]; then
    status=1
    # A run that stopped before its result line still gets a row, so the table has all twelve.
    [[ $line == result\ * ]] || line="result op=${argv[0]} status=error(exit_$rc)"
  fi
  results+=("$line")
done

# The table: key=value pairs of each result line, aligned; "-" where a key is absent.
section summary
printf '%s\n' "${results[@]}" | awk '
  BEGIN {
    ncol = split("op device variant dtype shape err time_us gbps status", keys, " ")
    split("op device variant dtype shape err time_us GB/s status", heads, " ")
    for (c = 1; c <= ncol; c++) { cell[0, c] = heads[c]; width[c] = length(heads[c]) }
  }
  {
    delete kv
    for (i = 2; i <= NF; i++) { eq = index($i, "="); kv[substr($i, 1, eq - 1)] = substr($i, eq + 1) }
    if (kv["emulated"] == "1") kv["device"] = kv["device"] "(emu)"
    if (kv["fallback"] == "1") kv["variant"] = kv["variant"] "(fallback)"
    if (kv["wdtype"] != "" && kv["wdtype"] != "-" && kv["wdtype"] != kv["dtype"]) kv["dtype"] = kv["dtype"] "/" kv["wdtype"]
    for (c = 1; c <= ncol; c++) {
      v = (keys[c] in kv) ? kv[keys[c]] : "-"
      cell[NR, c] = v
      if (length(v) > width[c]) width[c] = length(v)
    }
  }
  END {
    for (r = 0; r <= NR; r++) {
      out = ""
      for (c = 1; c <= ncol; c++) {
        # text columns left, numbers right
        num = (keys[c] == "err" || keys[c] == "time_us" || keys[c] == "gbps")
        out = out (c > 1 ? "  " : "") sprintf(num ? "%" width[c] "s" : "%-" width[c] "s", cell[r, c])
      }
      sub(/ +$/, "", out)
      print out
    }
  }'

if [[ $status -ne 0 ]]; then
  echo "tour: some steps failed (see above)" >&2
fi
exit $status
