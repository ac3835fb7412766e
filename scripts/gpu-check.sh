#!/usr/bin/env bash
# The GPU loop of the cuda backend, in one command on a machine with an NVIDIA GPU (the device
# tool's machines): configure and build with Ninja (sm_90 plus PTX), the CUDA tests, the same
# tests on small shapes under compute-sanitizer memcheck and racecheck, the benchmarks, the peers
# (PyTorch, Liger-Kernel) on the same shapes, and a short table printed last. The stages ops and
# ops-peers do the same for every op (bench_cuda_ops, bench/peer_gpu_ops.py: torch, torch.compile,
# Liger-Kernel, FlagGems, QuACK, eager and graph-replayed) and write table-ops.md.
#
#   scripts/gpu-check.sh [OUT_DIR]      (default: $OUT, else ./gpu-check-out)
#
# Environment:
#   GPU_CHECK_STAGES   comma list of build,test,sanitize,bench,peers,ncu,ops,ops-peers (default:
#                      build,test,sanitize,bench,peers)
#   GPU_CHECK_SHARD    i/n: the test stage runs shard i (0-based) of n of the CUDA tests (the whole
#                      suite takes about 720 s on an H100: two calls, 0/2 and 1/2, on one warm machine)
#   GPU_CHECK_BENCH    --benchmark_filter of the benchmark (default ^(copy|rms)/; the launch-shape sweep
#                      is ^sweep/)
#   GPU_CHECK_DEPS     folder of Debian packages (fmt, DLPack, GoogleTest, Google Benchmark) to unpack under
#                      /tmp/deps when the machine lacks them (default ./deps)
#   GPU_CHECK_DEADLINE seconds the whole script may take (default 570: one 10-minute device call with
#                      room to spare); a stage gets at most what is left of it, so the summary and
#                      the table always print
#   GPU_CHECK_STATE    folder that keeps the ops stages' results between calls on one warm machine
#                      (default /tmp/opreg-gpu-check): ops-peers resumes where the last call's
#                      deadline stopped it, and table-ops.md is made from everything there
#   GPU_CHECK_OPS_SEED folder with an earlier call's bench-ops.json / peers-ops.jsonl, copied into the
#                      state folder when it lacks them (a fresh machine going on with returned files)
#   GPU_CHECK_OPS_FILTER  --benchmark_filter of bench_cuda_ops (default: every case)
#   GPU_CHECK_PEERS_ARGS  more arguments of peer_gpu_ops.py run (--packages torch,liger --ops rms_norm ...)
#   GPU_CHECK_WHEELS   folder of the peers' wheels (Liger-Kernel, FlagGems, SQLAlchemy), installed once a
#                      machine into /tmp/site (default .whl)
#   GPU_CHECK_QUACK    colon list of folders with QuACK's wheels; a wheel too large for one call comes
#                      as parts (NAME.whl.part0, .part1, ... and NAME.whl.sha256) that may arrive in
#                      different calls: the parts are kept in the state folder and every QuACK wheel
#                      is installed in one pip command into /tmp/site-quack once the last part came
# Full logs go to OUT_DIR (at most 8 files come back: build.log tests.log sanitize.log bench.json
# peers.jsonl table.md run.log, and sweep.md when the sweep ran; the ops stages add bench-ops.json
# peers-ops.jsonl peers-ops.log table-ops.md, so run them in a call of their own with build); each
# stage has a time limit so that one slow stage cannot eat the others.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-check-out}}
mkdir -p "$out"
stages=${GPU_CHECK_STAGES:-build,test,sanitize,bench,peers}
build=build-gpu
export PATH=/usr/local/cuda/bin:$PATH
log="$out/run.log"
summary=()
has() { [[ ",$stages," == *",$1,"* ]]; }
note() { echo "$*" | tee -a "$log"; summary+=("$*"); }
deadline=${GPU_CHECK_DEADLINE:-570}
stage() {  # stage NAME LIMIT_S LOGFILE CMD...
  local name=$1 limit=$2 file=$3; shift 3
  local t0=$SECONDS left=$((deadline - 15 - SECONDS))
  if ((left < 5)); then
    note "$name: skipped, the ${deadline} s deadline is reached"
    return 124
  fi
  ((limit > left)) && limit=$left
  echo "=== $name (limit ${limit}s)" | tee -a "$log"
  timeout "$limit" "$@" >>"$file" 2>&1
  local rc=$?
  note "$name: rc=$rc in $((SECONDS - t0)) s"
  return $rc
}

{
  echo "=== machine"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1
  nvcc --version | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())' 2>&1
} | tee -a "$log"

# fmt, DLPack, GoogleTest and Google Benchmark: from the system, else from carried Debian packages.
if [[ ! -f /usr/include/fmt/format.h || ! -f /usr/include/dlpack/dlpack.h || ! -d /usr/include/gtest ||
  ! -d /usr/include/benchmark ]]; then
  deps=${GPU_CHECK_DEPS:-deps}
  if compgen -G "$deps/*.deb" >/dev/null; then
    mkdir -p /tmp/deps
    for f in "$deps"/*.deb; do dpkg -x "$f" /tmp/deps; done
    export CMAKE_PREFIX_PATH=/tmp/deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
    export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    note "deps: unpacked $(ls "$deps"/*.deb | wc -l) packages from $deps into /tmp/deps"
  else
    note "deps: fmt/gtest/benchmark headers missing and no packages in $deps"
  fi
fi

if has build; then
  stage configure 90 "$out/build.log" cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DOPREG_WITH_CUDA=ON \
    -DOPREG_WITH_NPU=OFF -DOPREG_WITH_XPU=OFF -DCMAKE_CXX_FLAGS="-I/tmp/deps/usr/include"
  targets=(bench_cuda_rms_norm bench_cuda_ops)
  if has test || has sanitize; then targets+=(opreg_cuda_tests opreg_backend_memory_tests); fi
  stage build 300 "$out/build.log" cmake --build $build -j "$(nproc)" --target "${targets[@]}"
  # nvcc time per .cu file, from ninja's log (start and end in ms).
  awk -F'\t' '$4 ~ /\.cu\.o$/ {printf "nvcc %-60s %6.1f s\n", $4, ($2 - $1) / 1000}' $build/.ninja_log | tee -a "$log"
fi

tests=$build/tests/backends/cuda/opreg_cuda_tests
if has test; then
  stage memory-tests 60 "$out/tests.log" $build/tests/opreg_backend_memory_tests --gtest_brief=1
  # GPU_CHECK_SHARD=i/n runs shard i of n (gtest sharding): the whole suite (about 720 s on an
  # H100 since the fused split and layer_norm rows variants) no longer fits one 10-minute call.
  shard_env=()
  if [[ -n ${GPU_CHECK_SHARD:-} ]]; then
    if ! [[ $GPU_CHECK_SHARD =~ ^[0-9]+/[1-9][0-9]*$ ]] || ((${GPU_CHECK_SHARD%/*} >= ${GPU_CHECK_SHARD#*/})); then
      echo "gpu-check: GPU_CHECK_SHARD=$GPU_CHECK_SHARD: expected i/n with 0 <= i < n, e.g. 0/2" >&2
      exit 2
    fi
    shard_env=(env "GTEST_SHARD_INDEX=${GPU_CHECK_SHARD%/*}" "GTEST_TOTAL_SHARDS=${GPU_CHECK_SHARD#*/}")
    note "cuda-tests: shard $GPU_CHECK_SHARD"
  fi
  stage cuda-tests 480 "$out/tests.log" "${shard_env[@]}" $tests --gtest_brief=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|tests? ran" "$out/tests.log" | tail -8 | tee -a "$log"
fi

if has sanitize; then
  # Small shapes of every variant and dtype pair: one tiny, one over several warps, one cluster.
  small='cuda/ConformanceTest.*__3x5__*:cuda/ConformanceTest.*__37x5120__*:cuda/ConformanceTest.*__3x16384__*'
  small+=':cuda/ConformanceTest.*__4x0__*:CudaRmsNorm.*'
  stage memcheck 200 "$out/sanitize.log" compute-sanitizer --tool memcheck --error-exitcode 99 $tests --gtest_brief=1 \
    "--gtest_filter=$small"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/sanitize.log" | tail -3 | tee -a "$log"
  racy="cuda/ConformanceTest.*__bf16_f32__3x5__*:cuda/ConformanceTest.*__bf16_f32__37x5120__*"
  racy+=":cuda/ConformanceTest.*__f32_f32__3x16384__*:cuda/ConformanceTest.*__f16_f16__127x4099__*"
  stage racecheck 150 "$out/sanitize.log" compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 99 \
    $tests --gtest_brief=1 "--gtest_filter=$racy"
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" "$out/sanitize.log" | tail -3 | tee -a "$log"
fi

if has ncu; then
  # Where the time of the chosen kernels goes (counters; clocks left alone): the first forward,
  # backward and finisher of each filtered case.
  for case in ${GPU_CHECK_NCU_CASES:-bf16/4096x1024 bf16/4096x4096}; do
    stage "ncu $case" 120 "$out/run.log" ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section Occupancy --section LaunchStats -k 'regex:rows|finish' --launch-count 4 $build/bench/bench_cuda_rms_norm \
      "--benchmark_filter=^rms/chosen/fwdbwd/$case/"
  done
  grep -E "^  [a-z_]+.*\(|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Grid Size|Block Size" \
    "$out/run.log" | tail -80
fi

if has bench; then
  stage bench 300 "$out/run.log" $build/bench/bench_cuda_rms_norm --benchmark_filter="${GPU_CHECK_BENCH:-^(copy|rms)/}" \
    --benchmark_out="$out/bench.json" --benchmark_out_format=json
  if grep -q '"name": "sweep/' "$out/bench.json" 2>/dev/null; then
    python3 bench/peer_gpu_rms_norm.py sweep "$out/bench.json" >"$out/sweep.md"
  fi
fi

if has peers; then
  PYTHONUNBUFFERED=1 stage peers 360 "$out/run.log" python3 bench/peer_gpu_rms_norm.py run "$out/peers.jsonl"
fi

state=${GPU_CHECK_STATE:-/tmp/opreg-gpu-check}
if has ops || has ops-peers; then
  mkdir -p "$state"
  for f in bench-ops.json peers-ops.jsonl; do
    seed=${GPU_CHECK_OPS_SEED:-}
    if [[ -n $seed && -f $seed/$f && ! -f $state/$f ]]; then cp "$seed/$f" "$state/$f" && note "seed: $f from $seed"; fi
  done
fi

if has ops; then
  stage ops 300 "$out/run.log" $build/bench/bench_cuda_ops --benchmark_filter="${GPU_CHECK_OPS_FILTER:-.}" \
    --benchmark_out="$state/bench-ops.json" --benchmark_out_format=json
  cp "$state/bench-ops.json" "$out/" 2>/dev/null
fi

# The peers' wheels, once a machine: the marker holds the list of wheels installed.
install_wheels() {
  local dir=${GPU_CHECK_WHEELS:-.whl}
  if compgen -G "$dir/*.whl" >/dev/null && [[ "$(ls "$dir"/*.whl)" != "$(cat /tmp/site/.opreg-wheels 2>/dev/null)" ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      "$dir"/*.whl >>"$log" 2>&1 && ls "$dir"/*.whl >/tmp/site/.opreg-wheels
    local rc=$?
    note "wheels: pip install of $(ls "$dir"/*.whl | wc -l) wheels from $dir into /tmp/site: rc=$rc"
  fi
  if [[ -d /tmp/site ]]; then export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}; fi
}

# QuACK's wheels: gather what this call carried, join the parts of a split wheel once all came (its
# .sha256 names the whole), and install them all in one pip command (pip --target replaces a
# top-level folder that an earlier command put there, and the nvidia_cutlass_dsl wheels share one).
install_quack() {
  local store=$state/quack-wheels d sum whl pending=0
  if [[ -n ${GPU_CHECK_QUACK:-} ]]; then
    mkdir -p "$store"
    IFS=: read -ra dirs <<<"$GPU_CHECK_QUACK"
    for d in "${dirs[@]}"; do if [[ -d $d ]]; then cp -n "$d"/* "$store"/ 2>/dev/null; fi; done
    for sum in "$store"/*.whl.sha256; do
      [[ -e $sum ]] || continue
      whl=${sum%.sha256}
      [[ -f $whl ]] && continue
      cat "$whl".part* >"$whl.joined" 2>/dev/null
      if [[ "$(sha256sum <"$whl.joined" | cut -d' ' -f1)" == "$(cut -d' ' -f1 "$sum")" ]]; then
        mv "$whl.joined" "$whl"
      else
        rm -f "$whl.joined"
        pending=1
        note "quack: $(basename "$whl") has $(ls "$whl".part* 2>/dev/null | wc -l) parts so far; waiting for the rest"
      fi
    done
    if ((pending == 0)) && compgen -G "$store/*.whl" >/dev/null && [[ ! -f /tmp/site-quack/.opreg-installed ]]; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-quack \
        "$store"/*.whl >>"$log" 2>&1 && touch /tmp/site-quack/.opreg-installed
      local rc=$?
      note "quack: pip install of $(ls "$store"/*.whl | wc -l) wheels into /tmp/site-quack: rc=$rc"
    fi
  fi
  if [[ -f /tmp/site-quack/.opreg-installed ]]; then quack_args=(--quack-site /tmp/site-quack); fi
}

if has ops-peers; then
  quack_args=()
  install_wheels
  install_quack
  # The peers stop themselves before the stage's limit (their own deadline), so that their records
  # are whole and the next call resumes after the last one.
  left=$((deadline - 30 - SECONDS))
  read -ra peer_args <<<"${GPU_CHECK_PEERS_ARGS:-}"
  PYTHONUNBUFFERED=1 stage ops-peers "$left" "$out/peers-ops.log" python3 bench/peer_gpu_ops.py run \
    "$state/peers-ops.jsonl" --deadline $((left - 20)) "${quack_args[@]}" "${peer_args[@]}"
  grep -E "^peers" "$out/peers-ops.log" | tail -8 | tee -a "$log"
  cp "$state/peers-ops.jsonl" "$out/" 2>/dev/null
fi

if (has ops || has ops-peers) && [[ -f $state/bench-ops.json || -f $state/peers-ops.jsonl ]]; then
  python3 bench/peer_gpu_ops.py table "$state/bench-ops.json" "$state/peers-ops.jsonl" --out "$out/table-ops.md" \
    --title "bench_cuda_ops and bench/peer_gpu_ops.py, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
    >/dev/null 2>>"$log"
  note "table-ops: $(grep -m1 '^\*\*Goals met' "$out/table-ops.md" 2>/dev/null || echo 'not written')"
fi

echo "=== summary" | tee -a "$log"
printf '%s\n' "${summary[@]}"
if [[ -f "$out/bench.json" && -f "$out/peers.jsonl" ]]; then
  python3 bench/peer_gpu_rms_norm.py table "$out/bench.json" "$out/peers.jsonl" | tee "$out/table.md"
fi
