#!/usr/bin/python3
"""The host overhead of one call of opreg's Python binding (docs/python.md, docs/perf.md): the
time per call of the raw binding opreg.rms_norm_fwd(x, w, y, rstd) over 10,000 calls of a
4x1024 f32 rms_norm, minus the C++ entry point's time for the same calls on the same tensors
(opreg._opreg._time_rms_norm_fwd: the tensors imported once, then Registry::call in a loop).
Each figure is the median of --trials trials. Goal: at most 5 us.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--device cuda] [--trials 7]
"""
import argparse
import statistics
import time

import torch

import opreg
from opreg import _opreg


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--calls", type=int, default=10_000)
    p.add_argument("--trials", type=int, default=7)
    args = p.parse_args()
    dev = torch.device(args.device)
    x, w = torch.randn(4, 1024, device=dev), torch.randn(1024, device=dev)
    y, rstd = torch.empty_like(x), torch.empty(4, device=dev)
    stream = torch.cuda.current_stream(dev).cuda_stream if dev.type == "cuda" else 0
    fn, n = opreg.rms_norm_fwd, args.calls

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def binding():
        sync()
        start = time.perf_counter()
        for _ in range(n):
            fn(x, w, y, rstd, stream=stream)
        sync()
        return (time.perf_counter() - start) / n

    def entry_point():
        sync()
        per_call = _opreg._time_rms_norm_fwd(n, x, w, y, rstd)
        sync()
        return per_call

    binding(), entry_point()  # warm up: the variant choice is cached, the caches are hot
    b = statistics.median(binding() for _ in range(args.trials))
    c = statistics.median(entry_point() for _ in range(args.trials))
    variant = fn(x, w, y, rstd, stream=stream).variant
    print(f"python_overhead device={args.device} variant={variant} shape=4x1024 calls={n} trials={args.trials} "
          f"binding_us={b * 1e6:.2f} entry_point_us={c * 1e6:.2f} overhead_us={(b - c) * 1e6:.2f} "
          f"torch={torch.__version__}")


if __name__ == "__main__":
    main()
