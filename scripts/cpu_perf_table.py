#!/usr/bin/env python3
"""The cpu kernels' performance table (docs/perf/cpu.md; its misses in docs/perf.md), from one command in one run.

It builds the benchmark programs (unless --no-build), then runs, one after the other at the same
thread count:
  bench/bench_cpu_ops     every op direction (rows 4096 x hidden; group_norm N = 32, C = hidden / 16,
                          HW = 4096, 32 groups) with its memcpy ceiling (of_ceiling)
  bench/peer_onednn_cpu   oneDNN's layer_norm fwd and bwd, checked against opreg's first (f32; bf16
                          where oneDNN implements it, else its refusal goes in a footnote)
  bench/bench_cpu_busy    busy / single of each variant that bench_cpu_ops ran (one core spinning)
  bench/peer_torch_cpu.py PyTorch's ops on the same shapes (torch_ms(), in this process: run it with
                          the interpreter that has torch, Debian's /usr/bin/python3 with torch 1.13)
and prints one markdown table: opreg's median time and GB/s (opreg::bytes_moved), the fraction of
the ceiling and the goal (forward 0.80, backward 0.65, at hidden >= 4096), the ratios opreg time /
peer time (below 1: opreg faster) for torch and oneDNN, and the busy ratio (goal <= 1.25), under the
commit (git describe --dirty) and a machine line.

Each C++ program runs with --benchmark_repetitions=R; a cell is the median of the R repetitions.
Run time on the 2-core dev VM: --quick (hidden 4096, R = 1) a few minutes, the default (hidden 4096
and 16384, R = 3) several times that; see the "took" line of the output.

usage: cpu_perf_table.py [--build build] [--hidden 4096,16384] [--quick] [--threads N]
                         [--ops layer_norm,...] [--dtypes bf16,f32] [--repetitions 3]
                         [--torch-reps 3] [--skip torch,onednn,busy] [--no-build] [--out table.md]
                         [--keep DIR]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = ["rms_norm", "fused_add_rms_norm", "layer_norm", "group_norm", "geglu", "swiglu"]
DIRS = ["fwd", "bwd"]
HIDDEN_BENCHED = [1024, 2048, 4096, 8192, 16384, 32768]  # what bench_cpu_ops registers
GOAL = {"fwd": 0.80, "bwd": 0.65}
GOAL_FROM_HIDDEN = 4096
BUSY_GOAL = 1.25
PEERS = ["torch", "onednn", "busy"]


def log(msg):
    print(f"cpu_perf_table: {msg}", file=sys.stderr, flush=True)


def fail(msg, code=2):
    log(msg)
    sys.exit(code)


def csv_list(text, allowed, what):
    items = [t for t in text.split(",") if t]
    bad = [t for t in items if t not in allowed]
    if bad or not items:
        fail(f"--{what} {text}: unknown {','.join(bad) or '(empty)'}; accepted: {','.join(map(str, allowed))}")
    return items


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="the CMake build folder (default: build)")
    p.add_argument("--hidden", default="4096,16384", help=f"hidden sizes, of {HIDDEN_BENCHED}")
    p.add_argument("--quick", action="store_true", help="hidden 4096, one repetition, one torch repetition")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for opreg and both peers (default: OPREG_NUM_THREADS, else the usable cores)")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--dtypes", default="bf16,f32")
    p.add_argument("--repetitions", type=int, default=3, help="repetitions of each C++ benchmark (median)")
    p.add_argument("--torch-reps", type=int, default=3, help="timed torch calls per case (median)")
    p.add_argument("--skip", default="", help=f"peers to leave out: {','.join(PEERS)}")
    p.add_argument("--no-build", action="store_true", help="use the programs as built")
    p.add_argument("--out", help="also write the table to this file")
    p.add_argument("--keep", metavar="DIR", help="keep each program's JSON (and torch's times) in DIR")
    a = p.parse_args()
    if a.quick:
        a.hidden, a.repetitions, a.torch_reps = "4096", 1, 1
    try:
        a.hidden = [int(h) for h in a.hidden.split(",")]
    except ValueError:
        fail(f"--hidden {a.hidden}: want comma-separated whole numbers of {HIDDEN_BENCHED}")
    if any(h not in HIDDEN_BENCHED for h in a.hidden):
        fail(f"--hidden {a.hidden}: bench_cpu_ops runs hidden {HIDDEN_BENCHED} only")
    a.ops = [o for o in OPS if o in csv_list(a.ops, OPS, "ops")]  # in the docs' order
    a.dtypes = csv_list(a.dtypes, ["bf16", "f32"], "dtypes")
    a.skip = csv_list(a.skip, PEERS, "skip") if a.skip else []
    if a.threads is None:
        env = os.environ.get("OPREG_NUM_THREADS")
        a.threads = int(env) if env and env.isdigit() and int(env) > 0 else len(os.sched_getaffinity(0))
    if a.threads < 1 or a.repetitions < 1 or a.torch_reps < 1:
        fail("--threads, --repetitions and --torch-reps must be at least 1")
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    return a


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout.strip()


def build(a, targets):
    log(f"building {' '.join(targets)} in {a.build}")
    r = subprocess.run(["nice", "cmake", "--build", a.build, "-j2", "--target", *targets],
                       capture_output=True, text=True)
    if r.returncode != 0:
        hint = ""
        if "peer_onednn_cpu" in r.stdout + r.stderr:
            hint = " (peer_onednn_cpu is built only where oneDNN is found: install libdnnl-dev and re-run cmake, or --skip onednn)"
        fail(f"the build failed{hint}:\n{(r.stdout + r.stderr)[-3000:]}")


def run_gbench(a, program, filt, extra=()):
    """Google Benchmark JSON of `program`: the repetitions of each case by name (without the
    /min_time... suffix), and the context."""
    path = os.path.join(a.build, "bench", program)
    if not os.access(path, os.X_OK):
        fail(f"{path} is missing: build it, or pass --build")
    cmd = [path, f"--benchmark_filter={filt}", "--benchmark_format=json",
           f"--benchmark_repetitions={a.repetitions}", *extra]
    env = dict(os.environ, OPREG_NUM_THREADS=str(a.threads))
    log(f"running {' '.join(cmd[:2])} ...")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if a.keep:
        with open(os.path.join(a.keep, program + ".json"), "w") as f:
            f.write(r.stdout)
    # peer_onednn_cpu exits 1 when oneDNN differs from opreg: its JSON says where, and main() reports it.
    if r.returncode not in ((0, 1) if program == "peer_onednn_cpu" else (0,)):
        fail(f"{program} exited {r.returncode}:\n{r.stderr[-3000:]}")
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        fail(f"{program} exited {r.returncode} without its JSON:\n{r.stderr[-3000:]}")
    runs = {}
    for b in doc["benchmarks"]:
        if b.get("run_type", "iteration") == "iteration":
            runs.setdefault(b["run_name"].split("/min_time")[0].split("/iterations")[0], []).append(b)
    return runs, doc["context"], r


def median_of(reps, field):
    vals = [b[field] for b in reps if field in b]
    return statistics.median(vals) if vals else None


def ms(b):
    return b["real_time"] * {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]


def machine_line(ctx, threads):
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_gib = int(f.readline().split()[1]) / 2**20
    size = lambda b: f"{b // 2**20} MiB" if b >= 2**20 else f"{b // 1024} KiB"
    caches = ", ".join(f"L{c['level']} {size(c['size'])}" for c in ctx.get("caches", []) if c["type"] != "Instruction")
    return f"{model}, {os.cpu_count()} cores ({caches}), {mem_gib:.0f} GiB; {threads} threads"


def cmake_cache(build_dir, key):
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return "?"


def cell_ratio(mine, theirs):
    return f"{mine / theirs:.2f} ({theirs:.1f} ms)" if mine and theirs else "-"


def main():
    a = parse_args()
    t_start = time.time()
    load_start = os.getloadavg()
    targets = ["bench_cpu_ops"] + ([] if "busy" in a.skip else ["bench_cpu_busy"]) + \
              ([] if "onednn" in a.skip else ["peer_onednn_cpu"])
    if not a.no_build:
        build(a, targets)
    if "torch" not in a.skip:  # fail before the long runs, not after them
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        try:
            import peer_torch_cpu
            import torch
        except ImportError as e:
            fail(f"the torch peer needs PyTorch in this interpreter ({sys.executable}: {e}); run it with "
                 "/usr/bin/python3 (Debian's python3-torch), or pass --skip torch")
        torch.set_num_threads(a.threads)

    cases = [(d, o, t, h) for d in DIRS for o in a.ops for t in a.dtypes for h in a.hidden]
    hid = "|".join(map(str, a.hidden))
    ops, ctx, _ = run_gbench(a, "bench_cpu_ops", f"^({'|'.join(DIRS)})/({'|'.join(a.ops)})/({'|'.join(a.dtypes)})/({hid})/")

    onednn, onednn_ctx, onednn_notes, onednn_failed = {}, {}, [], False
    if "onednn" not in a.skip and "layer_norm" in a.ops:
        onednn, onednn_ctx, r = run_gbench(a, "peer_onednn_cpu", f"^({'|'.join(DIRS)})/layer_norm/({'|'.join(a.dtypes)})/({hid})/",
                                           ["--threads", str(a.threads)])
        onednn_notes = sorted(set(l for l in r.stderr.splitlines() if l.startswith("check ")))
        onednn_failed = r.returncode != 0

    busy = {}
    variants = sorted({reps[0].get("label", "").split(" ")[0] for reps in ops.values()} - {""})
    if "busy" not in a.skip and variants:
        runs, _, _ = run_gbench(a, "bench_cpu_busy", "^BM_Busy/(" + "|".join(re.escape(v) for v in variants) + ")/")
        busy = {k.split("/")[1]: median_of(v, "busy_over_single") for k, v in runs.items()}

    torch_ms = {}
    if "torch" not in a.skip:
        log(f"running torch {torch.__version__} on {len(cases)} cases ...")
        for d, o, t, h in cases:
            torch_ms[(d, o, t, h)] = peer_torch_cpu.torch_ms(o, d, h, t, a.torch_reps)
        if a.keep:
            with open(os.path.join(a.keep, "torch.json"), "w") as f:
                json.dump({"torch": torch.__version__, "threads": a.threads, "reps": a.torch_reps,
                           "ms": {"/".join(map(str, k)): v for k, v in torch_ms.items()}}, f, indent=1)

    rows, misses, refusals = [], [], set()
    for d, o, t, h in cases:
        key = f"{d}/{o}/{t}/{h}"
        reps = ops.get(key)
        if not reps or any(b.get("error_occurred") for b in reps):
            rows.append(f"| {o} | {d} | {t} | {h} | not run | | | | | | |")
            continue
        mine = statistics.median(ms(b) for b in reps)
        gbps = median_of(reps, "bytes_per_second") / 1e9
        frac = median_of(reps, "of_ceiling")
        goal = "-"
        if h >= GOAL_FROM_HIDDEN:
            goal = f"{'met' if frac >= GOAL[d] else 'missed'} ({GOAL[d]:.2f})"
            if frac < GOAL[d]:
                misses.append(key)
        peer = onednn.get(key)
        if peer and peer[0].get("error_occurred"):
            msg = peer[0]["error_message"]
            refusals.add(msg)
            dnn = "-¹" if msg.startswith("oneDNN refuses") else "differs²"
        else:
            dnn = cell_ratio(mine, statistics.median(ms(b) for b in peer)) if peer else "-"
        variant = reps[0].get("label", "?").split(" ")[0]
        b = busy.get(variant)
        busy_cell = f"{b:.2f}" if b is not None else "-"
        rows.append(f"| {o} | {d} | {t} | {h} | {mine:.2f} | {gbps:.1f} | {frac:.2f} | {goal} | "
                    f"{cell_ratio(mine, torch_ms.get((d, o, t, h)))} | {dnn} | {busy_cell} |")

    commit = sh(["git", "-C", ROOT, "describe", "--always", "--dirty"])
    took = time.time() - t_start
    out = [f"Commit {commit}; {machine_line(ctx, a.threads)}; {cmake_cache(a.build, 'CMAKE_BUILD_TYPE')} build, "
           f"{os.path.basename(cmake_cache(a.build, 'CMAKE_CXX_COMPILER'))}; load average "
           f"{load_start[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; took {took / 60:.0f} min {took % 60:.0f} s.",
           "",
           f"Command: `{' '.join(['scripts/cpu_perf_table.py'] + sys.argv[1:])}` (opreg: the median of "
           f"{a.repetitions} repetition(s) of bench_cpu_ops; "
           + (f"torch {torch.__version__}: the median of {a.torch_reps} call(s); " if torch_ms else "torch: skipped; ")
           + (f"oneDNN {onednn_ctx['onednn']}: {onednn_ctx['onednn_cpu_runtime']} runtime, "
              f"{onednn_ctx['onednn_threads']} threads, isa {onednn_ctx['onednn_isa']}" if onednn_ctx else "oneDNN: skipped")
           + "). Ratios: opreg time / peer time (below 1: opreg faster), the peer's ms in brackets.",
           "",
           "| op | dir | dtype | hidden | opreg ms | GB/s | of ceiling | goal | torch ratio | oneDNN ratio | busy ratio |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
           *rows,
           ""]
    for msg in sorted(refusals):
        mark = "¹" if msg.startswith("oneDNN refuses") else "²"
        why = f" (oneDNN's isa here: {onednn_ctx.get('onednn_isa', '?')}); the bf16 rows are compared with torch only."
        out.append(f"{mark} {msg}" + (why if mark == "¹" else "."))
    out.append(f"oneDNN runs f32 layer_norm only here; '-' elsewhere. Its check against opreg before timing: "
               + ("; ".join(n[len('check '):] for n in onednn_notes) or "not run") + ".")
    out.append(f"Busy ratio: bench_cpu_busy's busy / single of the variant in the row (one core spinning; its own shape, "
               f"256 x 4096 bf16, group_norm 8 x 64 x 1024), goal <= {BUSY_GOAL}: "
               + ((", ".join(f"{v} {r:.2f}" for v, r in sorted(busy.items()) if r and r > BUSY_GOAL) or "every variant within")
                  if busy else "not run")
               + ".")
    out.append(f"Goals at hidden >= {GOAL_FROM_HIDDEN} (fwd {GOAL['fwd']:.2f}, bwd {GOAL['bwd']:.2f} of the ceiling): "
               f"{len(misses)} of {sum(1 for c in cases if c[3] >= GOAL_FROM_HIDDEN)} cases missed.")
    text = "\n".join(out) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 1 if onednn_failed else 0


if __name__ == "__main__":
    sys.exit(main())
