#!/usr/bin/env python3
"""PyTorch's CPU ops against opreg's cpu kernels on the shapes of bench/bench_cpu_ops: every op
forward and backward on rows 4096 x hidden (group_norm: N = 32, C = hidden / 16, HW = 4096,
32 groups), bf16 and f32 with parameters in the same dtype, at the same thread count. It runs
bench_cpu_ops itself (JSON output) and prints one line per case:

  fwd rms_norm bf16 4096 opreg_ms=... torch_ms=... opreg/torch=0.21

opreg/torch is the ratio of the times (below 1: opreg is faster).

PyTorch's side, in eager mode as a model would call it:
  rms_norm            the llama formula (LlamaRMSNorm): x.float(), pow(2).mean(-1), rsqrt, cast back,
                      times the weight. torch 1.13 (Debian's) has no torch.nn.functional.rms_norm.
  fused_add_rms_norm  x + residual, then the same rms_norm
  layer_norm          torch.nn.functional.layer_norm
  group_norm          torch.nn.functional.group_norm
  geglu               gelu(a, approximate="tanh") * b
  swiglu              silu(a) * b
Backward: torch.autograd.grad of the forward's output with a random upstream gradient, with
respect to every input opreg's backward produces (x or a and b, and the weight), timed alone on
a retained graph.

PyTorch is not a build dependency: install it for this script only, e.g. on Debian 12
  apt-get install python3-torch        (torch 1.13.1)
Never add it to CI's package lists.

usage: peer_torch_cpu.py [--bench build/bench/bench_cpu_ops] [--threads N] [--hidden 4096,8192]
                         [--ops rms_norm,layer_norm] [--dtypes bf16,f32] [--reps 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

ROWS = 4096
GROUPS = 32
EPS = {"rms_norm": 1e-6, "fused_add_rms_norm": 1e-6, "layer_norm": 1e-5, "group_norm": 1e-5}
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}
OPS = ["rms_norm", "fused_add_rms_norm", "layer_norm", "group_norm", "geglu", "swiglu"]


def shape_of(op, hidden):
    return (32, hidden // 16, 4096) if op == "group_norm" else (ROWS, hidden)


def llama_rms_norm(x, w, eps):
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def make(op, hidden, dtype):
    """(forward function, its inputs that backward differentiates)."""
    shape = shape_of(op, hidden)
    params = shape[1] if op == "group_norm" else shape[-1]
    rand = lambda *s: (torch.rand(*s, dtype=torch.float32) * 4 - 2).to(dtype).requires_grad_(True)
    if op in ("geglu", "swiglu"):
        a, b = rand(*shape), rand(*shape)
        act = (lambda t: F.gelu(t, approximate="tanh")) if op == "geglu" else F.silu
        return (lambda: act(a) * b), [a, b]
    x, w = rand(*shape), rand(params)
    if op == "rms_norm":
        return (lambda: llama_rms_norm(x, w, EPS[op])), [x, w]
    if op == "fused_add_rms_norm":
        r = rand(*shape)
        return (lambda: llama_rms_norm(x + r, w, EPS[op])), [x, w]
    bias = rand(params)
    if op == "layer_norm":
        return (lambda: F.layer_norm(x, (params,), w, bias, EPS[op])), [x, w, bias]
    return (lambda: F.group_norm(x, GROUPS, w, bias, EPS[op])), [x, w, bias]


def median_ms(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def torch_ms(op, direction, hidden, dtype, reps):
    fwd, inputs = make(op, hidden, DTYPES[dtype])
    if direction == "fwd":
        with torch.no_grad():
            return median_ms(fwd, reps)
    y = fwd()
    dy = torch.rand_like(y)
    return median_ms(lambda: torch.autograd.grad(y, inputs, dy, retain_graph=True), reps)


def opreg_ms(bench, threads, cases):
    """Median real time (ms) per case name 'fwd/rms_norm/bf16/4096' from bench_cpu_ops."""
    names = "|".join(f"{d}/{o}/{t}/{h}" for d, o, t, h in cases)
    env = dict(os.environ, OPREG_NUM_THREADS=str(threads))
    out = subprocess.run([bench, f"--benchmark_filter=^({names})/", "--benchmark_format=json",
                          "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"],
                         env=env, check=True, capture_output=True, text=True).stdout
    result = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        key = b["run_name"].split("/min_time")[0]
        unit = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
        result[key] = b["real_time"] * unit
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", default="build/bench/bench_cpu_ops")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--hidden", default="1024,2048,4096,8192,16384,32768")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--dtypes", default="bf16,f32")
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cases = [(d, o, t, int(h)) for d in ("fwd", "bwd") for o in a.ops.split(",")
             for t in a.dtypes.split(",") for h in a.hidden.split(",")]
    ours = opreg_ms(a.bench, a.threads, cases)
    print(f"# torch {torch.__version__}, {a.threads} threads; opreg: {a.bench} (median of 3)", flush=True)
    for d, o, t, h in cases:
        key = f"{d}/{o}/{t}/{h}"
        theirs = torch_ms(o, d, h, t, a.reps)
        mine = ours.get(key)
        ratio = f"{mine / theirs:.3f}" if mine else "?"
        print(f"{d} {o} {t} {h} opreg_ms={mine if mine is None else round(mine, 3)} "
              f"torch_ms={theirs:.3f} opreg/torch={ratio}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
