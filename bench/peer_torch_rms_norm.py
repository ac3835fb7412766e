#!/usr/bin/env python3
"""PyTorch's rms_norm on the host CPU, the peer of bench_cpu_rms_norm (same shapes, dtypes and
byte model), where PyTorch is installed (the H200 machine). Prints one line per case:
  torch_cpu rms_norm.fwd f32 4096x4096 threads=16 time_us=... gbps=...
Forward is torch.nn.functional.rms_norm; backward is autograd through it (dx and dweight).
Usage: peer_torch_rms_norm.py [threads]"""
import statistics
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else torch.get_num_threads()
torch.set_num_threads(threads)
SIZES = {torch.float32: 4, torch.bfloat16: 2}


def bytes_moved(direction, rows, hidden, s):
    # The project's byte model (src/ops/ops.cpp): f32 statistics, weight in x's dtype here.
    if direction == "fwd":
        return 2 * rows * hidden * s + hidden * s + 4 * rows
    return 3 * rows * hidden * s + 2 * hidden * s + 4 * rows


def median_us(fn, repeat=20):
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
    for rows, hidden in ((4096, 4096), (127, 4099), (2, 200003)):
        x = torch.randn(rows, hidden, dtype=dtype)
        w = torch.randn(hidden, dtype=dtype)
        fwd = lambda: torch.nn.functional.rms_norm(x, (hidden,), w, 1e-6)
        us = median_us(fwd)
        gbps = bytes_moved("fwd", rows, hidden, SIZES[dtype]) / (us * 1e3)
        print(f"torch_cpu rms_norm.fwd {name} {rows}x{hidden} threads={threads} time_us={us:.1f} gbps={gbps:.2f}")
        xg = x.clone().requires_grad_(True)
        wg = w.clone().requires_grad_(True)
        dy = torch.randn_like(x)

        def bwd():
            xg.grad = None
            wg.grad = None
            y = torch.nn.functional.rms_norm(xg, (hidden,), wg, 1e-6)
            y.backward(dy)

        # The backward alone: a forward is timed above; subtract it.
        us_b = max(median_us(bwd) - us, 1e-3)
        gbps = bytes_moved("bwd", rows, hidden, SIZES[dtype]) / (us_b * 1e3)
        print(f"torch_cpu rms_norm.bwd {name} {rows}x{hidden} threads={threads} time_us={us_b:.1f} gbps={gbps:.2f}")
