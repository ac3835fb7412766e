#!/usr/bin/env bash
# `opreg bench`: help, one-line usage errors with exit 2, and a tiny run whose JSON and CSV follow
# Liger-Kernel's benchmark schemas (benchmark/scripts/utils.py's BenchmarkData and
# BenchmarkDataCSVRow) with opreg's extra fields. With --plot as the second argument: the PNGs
# (exit 77, ctest's skip, when /usr/bin/python3 has no matplotlib).
# usage: bench_test.sh path/to/opreg [--plot]
set -u
opreg=$1
mode=${2:-}
. "$(dirname "$0")/expect.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset OPREG_DEVICE OPREG_BACKEND_ORDER OPREG_DISABLE OPREG_FORCE_VARIANT OPREG_FALLBACK OPREG_VERBOSE \
  OPREG_NPU_PROFILE OPREG_NPU_UB_BYTES

expect_usage() {
  local pattern=$1
  shift
  local err out rc
  out=$("$@" 2>"$tmp/err")
  rc=$?
  err=$(cat "$tmp/err")
  if [[ $rc -ne 2 || -n $out || $(wc -l <"$tmp/err") -ne 1 ]] || ! grep -Eq -- "$pattern" <<<"$err"; then
    fail "$* -> exit $rc (want 2), stdout '$out', stderr (one line matching /$pattern/): $err"
  else
    passes=$((passes + 1))
  fi
}

# expect_err CODE PATTERN -- command...: the exit code, and exactly one line on stderr, matching
# PATTERN (stdout may hold the run's lines).
expect_err() {
  local code=$1 pattern=$2
  shift 3
  local rc
  "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $rc -ne $code || $(wc -l <"$tmp/err") -ne 1 ]] || ! grep -Eq -- "$pattern" "$tmp/err"; then
    fail "$* -> exit $rc (want $code), stderr must be one line matching /$pattern/:"
    sed 's/^/    err: /' "$tmp/err" | head -10
  else
    passes=$((passes + 1))
  fi
}

have_npu=1
"$opreg" devices | grep -q '^npu .*available' || have_npu=0
devices=cpu
((have_npu)) && devices=cpu,npu
small=(--ops rms_norm,geglu --dirs fwd,fwdbwd --hidden 64,96 --rows 4 --budget 0.05)
tiny=("${small[@]}" --devices "$devices")

if [[ $mode == --plot ]]; then
  if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    echo "SKIP: /usr/bin/python3 has no matplotlib (Debian: python3-matplotlib; scripts/install-deps.sh)"
    exit 77
  fi
  expect 0 'wrote .*rms_norm_forward.png' -- "$opreg" bench "${tiny[@]}" --out "$tmp/p" --plot
  for png in rms_norm_forward rms_norm_full geglu_forward geglu_full; do
    if [[ $(head -c 8 "$tmp/p/$png.png" 2>/dev/null | od -An -c | tr -d ' ') != '211PNG\r\n032\n' ]]; then
      fail "--plot: $tmp/p/$png.png is missing or not a PNG"
    else
      passes=$((passes + 1))
    fi
  done
  # A compared provider and GPU name are text, never matplotlib mathtext (issue 34: '$\frac{1}{$'
  # was a traceback and no PNG).
  /usr/bin/python3 - "$tmp/p/all_benchmark_data.csv" "$tmp/math.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    for r in rows:
        r["kernel_provider"], r["gpu_name"] = "$\\frac{1}{$", "GPU $x^$ \\$"
        w.writerow(r)
PY
  expect 0 'wrote .*rms_norm_forward.png' -- "$opreg" bench "${tiny[@]}" --out "$tmp/q" --plot --compare "$tmp/math.csv"
  [[ -s $tmp/q/geglu_full.png ]] && passes=$((passes + 1)) || fail "--plot --compare with mathtext names: no PNG"
  echo "bench_test.sh --plot: $passes passed, $failures failed"
  ((failures == 0))
  exit
fi

expect 0 '^usage: opreg bench' -- "$opreg" bench --help
expect 0 'bench +time every op' -- "$opreg" --help
expect_usage "bench: invalid --dirs 'sideways'; accepted: fwd, bwd, fwdbwd \(see .opreg bench --help.\)" \
  "$opreg" bench --dirs fwd,sideways
expect_usage "bench: unknown option '--frobnicate'" "$opreg" bench --frobnicate 1
expect_usage "bench: invalid --hidden '0'; accepted: integers from 1 to 1048576" "$opreg" bench --hidden 1024,0
expect_usage "bench: invalid --dtype 'f64'; accepted: bf16, f16, f32" "$opreg" bench --dtype=f64
expect_usage "bench: --ops names 'geglu' twice" "$opreg" bench --ops geglu,geglu
expect_usage "bench: invalid --ops 'rmsnorm'; accepted: rms_norm, " "$opreg" bench --ops rmsnorm
expect_usage "bench: invalid --budget 'soon'; accepted: seconds" "$opreg" bench --budget soon
expect_usage "bench: --rows needs a value" "$opreg" bench --rows
expect_usage "bench: --plot is given twice" "$opreg" bench --plot --plot
expect_usage "bench: --rows is given twice \('8' and '9'\)" "$opreg" bench --rows 8 --rows=9
expect_usage "bench: --hidden 100 does not suit group_norm" "$opreg" bench --hidden 100
expect_usage "--devices 'tpu'" "$opreg" bench --devices cpu,tpu
expect_usage "bench: unexpected argument 'rms_norm'" "$opreg" bench rms_norm

expect 0 "bench: \[8/8\] geglu full bf16 4x96 on cpu: [0-9.]+ ms .* GB/s" -- "$opreg" bench "${small[@]}" --devices cpu --out "$tmp/a"
expect 0 'bench: [0-9]+ cases \([0-9]+ timed, 0 failed' -- "$opreg" bench "${tiny[@]}" --out "$tmp/b"

/usr/bin/python3 - "$tmp/b" "$have_npu" <<'PY' || failures=$((failures + 1))
import csv, json, math, sys
out, have_npu = sys.argv[1], sys.argv[2] == "1"
records = json.load(open(f"{out}/benchmark_data.json"))
liger = {"kernel_name": str, "kernel_provider": str, "kernel_operation_mode": str, "metric_name": str,
         "metric_unit": str, "gpu_name": str, "x_name": str, "x_label": str, "x_values": list,
         "y_values_50": list, "y_values_20": list, "y_values_80": list, "extra_benchmark_config_str": str,
         "timestamp": str, "liger_version": str}
ours = {"device": str, "dtype": str, "emulated": bool, "timer": str, "estimate": bool, "gbps_values_50": list,
        "gbps_values_20": list, "gbps_values_80": list, "ceiling_fraction_50": list, "bytes": list, "runs": list,
        "status": list, "notes": list}
assert isinstance(records, list) and records, "the JSON is a non-empty list of records"
seen = set()
for r in records:
    for key, kind in {**liger, **ours}.items():
        assert isinstance(r.get(key), kind), f"{key} is not a {kind.__name__} in {r.get('kernel_provider')}"
    n = len(r["x_values"])
    for key in ("y_values_50", "y_values_20", "y_values_80", "gbps_values_50", "status", "bytes"):
        assert len(r[key]) == n, f"{key} has {len(r[key])} values for {n} x values"
    assert r["metric_name"] == "speed" and r["metric_unit"] == "ms" and r["x_name"] == "H"
    assert r["kernel_operation_mode"] in ("forward", "backward", "full")
    assert r["kernel_provider"].startswith("opreg:")
    cfg = json.loads(r["extra_benchmark_config_str"])
    assert cfg["M"] == 4 and cfg["dtype"] == "torch.bfloat16", cfg
    for x, s, y20, y50, y80, g in zip(r["x_values"], r["status"], r["y_values_20"], r["y_values_50"],
                                      r["y_values_80"], r["gbps_values_50"]):
        if s == "ok":
            assert 0 < y20 <= y50 <= y80, (x, y20, y50, y80)
            assert g > 0
        else:
            assert s == "fallback" and y50 is None, (s, y50)
    if r["device"] == "npu:0":
        assert r["emulated"] and r["estimate"] and r["timer"] == "emulator est_us", r
    seen.add((r["kernel_name"], r["kernel_operation_mode"], r["device"]))
want = {(op, mode, dev) for op in ("rms_norm", "geglu") for mode in ("forward", "full")
        for dev in (["cpu", "npu:0"] if have_npu else ["cpu"])}
assert seen == want, f"records for {sorted(seen)}, want {sorted(want)}"
rows = list(csv.reader(open(f"{out}/all_benchmark_data.csv")))
header = ["kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name", "metric_unit", "x_name",
          "x_label", "x_value", "y_value_50", "y_value_20", "y_value_80", "extra_benchmark_config_str", "gpu_name",
          "timestamp", "liger_version"]
assert rows[0][:15] == header, rows[0]
assert rows[0][15:] == ["device", "emulated", "timer", "estimate", "status", "gbps_50", "gbps_20", "gbps_80",
                        "ceiling_gbps", "ceiling_fraction", "note"], rows[0]
assert len(rows) == 1 + sum(len(r["x_values"]) for r in records)
assert all(len(row) == len(rows[0]) for row in rows)
PY
((failures == 0)) && passes=$((passes + 1))

# --compare: the run's own CSV read back as a peer's: every timed row converts with the same bytes.
expect 0 "--compare .*: [0-9]+ rows converted" -- "$opreg" bench "${small[@]}" --devices cpu --out "$tmp/c" \
  --compare "$tmp/a/all_benchmark_data.csv"
expect 2 "not a CSV of Liger-Kernel's benchmark schema" -- "$opreg" bench "${tiny[@]}" --out "$tmp/d" \
  --compare "$tmp/b/benchmark_data.json"

# --compare rows whose M x hidden the byte model cannot count (past int64 elements, past 2^64
# bytes) are skipped with the reason and the line, not the end of the run (issue 34).
/usr/bin/python3 - "$tmp/a/all_benchmark_data.csv" "$tmp/huge.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
ok = [r for r in rows if r["status"] == "ok" and r["kernel_name"] == "rms_norm"]
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    for m, x in ((2**31, 2**31), (2**40, 2**40), (4, 64)):
        r = dict(ok[0])
        r["x_value"] = str(x)
        r["extra_benchmark_config_str"] = r["extra_benchmark_config_str"].replace('"M": 4', f'"M": {m}')
        w.writerow(r)
PY
expect 0 "bench: --compare .*huge.csv: skipped 2 rows: .*byte model.*line 2.*2147483648x2147483648" -- \
  "$opreg" bench "${small[@]}" --devices cpu --out "$tmp/h" --compare "$tmp/huge.csv"
grep -q ',1099511627776,' "$tmp/h/compare_data.csv" && fail "--compare: an overflowing row was written" ||
  passes=$((passes + 1))

# No case could run (each refused by memory admission: 2^40 elements): exit 3 and one stderr line
# saying so, with the first case's reason (issue 34: exit 3 and nothing on stderr).
expect_err 3 '^opreg: bench: no case could run: 1 of 1 cases .*rms_norm forward bf16 1048576x1048576 on cpu: .*bytes' -- \
  "$opreg" bench --ops rms_norm --dirs fwd --devices cpu --rows 1048576 --hidden 1048576 --budget 0.01 --out "$tmp/m"

# --plot without matplotlib: refused before the first case, in one line naming matplotlib and its
# package (issue 34: the script's line and opreg's, after the whole run).
mkdir -p "$tmp/nompl/matplotlib"
echo 'raise ImportError("No module named matplotlib (hidden by bench_test.sh)")' >"$tmp/nompl/matplotlib/__init__.py"
expect_err 3 '^opreg: (error: )?bench: --plot needs matplotlib.*python3-matplotlib' -- \
  env PYTHONPATH="$tmp/nompl" "$opreg" bench "${tiny[@]}" --out "$tmp/n" --plot
[[ -s $tmp/out ]] && fail "--plot without matplotlib: stdout must be empty (refused before the run): $(head -3 "$tmp/out")" ||
  passes=$((passes + 1))

echo "bench_test.sh: $passes passed, $failures failed"
((failures == 0))
