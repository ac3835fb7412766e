#!/usr/bin/env python3
"""The GPU peers of bench_cuda_rms_norm, timed the same way on the same shapes in the same device
call, and the table that puts both side by side.

  peer_gpu_rms_norm.py run OUT.jsonl [--csv FILE]   time the peers; one JSON object a line, and
                                          with --csv the same times in Liger-Kernel's benchmark
                                          CSV schema (what `opreg bench --compare FILE` overlays)
  peer_gpu_rms_norm.py table BENCH.json OUT.jsonl   the markdown table (opreg's chosen variant,
                                          each peer, fraction of the copy bandwidth, ratio to the
                                          fastest peer, the issue's goals)
  peer_gpu_rms_norm.py sweep BENCH.json   the best launch shapes of the benchmark's sweep per case

Peers: torch eager (torch.nn.functional.rms_norm), torch.compile of the llama formula (x in f32,
x * rsqrt(mean(x^2) + eps) rounded to x's dtype, times the weight), and Liger-Kernel's
LigerRMSNormFunction (casting_mode llama, in_place=True, its default). A peer that cannot be
imported or compiled is reported as missing with the reason, never dropped.

Method, as in bench_cuda_rms_norm.cpp: each timed run starts with L2 flushed (a 256 MiB buffer
zeroed), CUDA events around the work alone on the current stream, the median of the runs after 3
warm-ups. fwdbwd is the forward then the backward (autograd: dx and dweight) between one pair of
events. GB/s use opreg's byte model (src/ops/ops.cpp bytes_moved): forward 2*R*H*sx + H*sw + 4*R,
backward 3*R*H*sx + 2*H*sw + 4*R, fwdbwd their sum (the weight in x's dtype here)."""
import csv
import json
import statistics
import sys
import time
import traceback

SHAPES = [(4096, 1024), (4096, 2048), (4096, 4096), (4096, 5120), (4096, 8192), (4096, 14336), (4096, 16384),
          (4096, 32768), (65536, 4096)]
EPS = 1e-6


def bytes_moved(direction, rows, hidden, s):
    fwd = 2 * rows * hidden * s + hidden * s + 4 * rows
    bwd = 3 * rows * hidden * s + 2 * hidden * s + 4 * rows
    return fwd if direction == "fwd" else fwd + bwd


def iterations_for(nbytes):
    return int(min(200, max(20, 4_000_000_000 // max(nbytes, 1))))


# Liger-Kernel's BenchmarkDataCSVRow columns (benchmark/scripts/utils.py), in its order.
CSV_COLUMNS = ["kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name", "metric_unit", "x_name",
               "x_label", "x_value", "y_value_50", "y_value_20", "y_value_80", "extra_benchmark_config_str",
               "gpu_name", "timestamp", "liger_version"]


def quantile(sorted_values, q):
    """Linear interpolation between order statistics, as torch.quantile (Liger's quantiles)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def run(out_path, csv_path=None):
    import torch
    import torch.nn.functional as F

    dev = torch.device("cuda")
    cache = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)

    def median_ms(fn, prep, iters):
        for _ in range(3):
            prep()
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            prep()
            cache.zero_()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        times.sort()
        quantiles[0] = (quantile(times, 0.2), quantile(times, 0.8))
        return statistics.median(times)

    quantiles = [(None, None)]  # the last median_ms call's 20th and 80th percentiles

    def llama(x, w):
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
        return w * (xf * rstd).to(x.dtype)

    peers = {}
    peers["torch_eager"] = lambda x, w: F.rms_norm(x, (x.shape[-1],), w, EPS)
    # One compiled graph per shape, dtype and grad mode (36 here): lift dynamo's recompile limit
    # (which would quietly fall back to eager), and keep shapes static (automatic dynamic shapes
    # would compile one kernel for every hidden size instead).
    for limit in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, 1024)
    for limit in ("accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, 4096)
    try:
        compiled = torch.compile(llama, dynamic=False)
        peers["torch_compile"] = compiled
    except Exception as e:  # noqa: BLE001 - reported, not dropped
        peers["torch_compile"] = f"missing: torch.compile unavailable: {e!r}"
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction

        peers["liger"] = lambda x, w: LigerRMSNormFunction.apply(x, w, EPS, 0.0, "llama", True)
    except Exception as e:  # noqa: BLE001
        peers["liger"] = f"missing: cannot import liger_kernel: {e!r}"

    out = open(out_path, "w")
    csv_rows = []
    try:
        from importlib.metadata import version as package_version

        liger_version = package_version("liger-kernel")
    except Exception:  # noqa: BLE001 - not installed: the column says so
        liger_version = "not installed"

    def emit(rec):
        out.write(json.dumps(rec) + "\n")
        out.flush()
        if "missing" in rec:
            print(f"peer {rec['peer']} {rec.get('dir', '')} {rec.get('dtype', '')} {rec.get('shape', '')}: "
                  f"{rec['missing']}", flush=True)
        else:
            print(f"peer {rec['peer']:14s} {rec['dir']:6s} {rec['dtype']:4s} {rec['shape']:11s} "
                  f"us={rec['us']:9.1f} GBps={rec['gbps']:7.0f}", flush=True)

    for name, fn in peers.items():
        if isinstance(fn, str):
            emit({"peer": name, "missing": fn})
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}", flush=True)
    for dtype, dname in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
        s = 2 if dtype == torch.bfloat16 else 4
        for rows, hidden in SHAPES:
            g = torch.Generator(device=dev).manual_seed(rows * 31 + hidden)
            x = (torch.rand(rows, hidden, device=dev, generator=g) * 4 - 2).to(dtype)
            w = (torch.rand(hidden, device=dev, generator=g) * 4 - 2).to(dtype)
            dy = (torch.rand(rows, hidden, device=dev, generator=g) * 4 - 2).to(dtype)
            shape = f"{rows}x{hidden}"
            for name, fn in peers.items():
                if isinstance(fn, str):
                    continue
                for direction in ("fwd", "fwdbwd"):
                    nbytes = bytes_moved(direction, rows, hidden, s)
                    try:
                        if direction == "fwd":
                            with torch.no_grad():
                                ms = median_ms(lambda: fn(x, w), lambda: None, iterations_for(nbytes))
                        else:
                            xg = x.clone().requires_grad_(True)
                            wg = w.clone().requires_grad_(True)
                            dyc = dy.clone()

                            def prep():
                                xg.grad = None
                                wg.grad = None

                            ms = median_ms(lambda: fn(xg, wg).backward(dyc), prep, iterations_for(nbytes))
                        emit({"peer": name, "dir": direction, "dtype": dname, "shape": shape, "us": ms * 1e3,
                              "gbps": nbytes / (ms * 1e6)})
                        torch_dtype = "torch.bfloat16" if dname == "bf16" else "torch.float32"
                        csv_rows.append({
                            "kernel_name": "rms_norm", "kernel_provider": name,
                            "kernel_operation_mode": "forward" if direction == "fwd" else "full",
                            "metric_name": "speed", "metric_unit": "ms", "x_name": "H", "x_label": "hidden size",
                            "x_value": hidden, "y_value_50": ms, "y_value_20": quantiles[0][0],
                            "y_value_80": quantiles[0][1],
                            "extra_benchmark_config_str": json.dumps({"M": rows, "dtype": torch_dtype, "eps": EPS}),
                            "gpu_name": torch.cuda.get_device_name(), "timestamp": time.strftime("%Y-%m-%d %H:%M:%S"),
                            "liger_version": liger_version})
                    except Exception as e:  # noqa: BLE001
                        traceback.print_exc()
                        emit({"peer": name, "dir": direction, "dtype": dname, "shape": shape,
                              "missing": f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"})
            del x, w, dy
            torch.cuda.empty_cache()
    out.close()
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
            writer.writeheader()
            writer.writerows(csv_rows)
        print(f"wrote {len(csv_rows)} rows to {csv_path}", flush=True)


def goal(direction, hidden):
    """The issue's goal for a case, as a fraction of the copy bandwidth."""
    if direction == "fwd":
        return 0.90 if hidden >= 4096 else 0.80
    return 0.80 if hidden >= 4096 else 0.70


def table(bench_path, peers_path):
    bench = json.load(open(bench_path))
    ours = {}
    variants = {}
    peak = None
    for b in bench["benchmarks"]:
        parts = b["name"].split("/")
        if parts[0] == "copy" and not b.get("error_occurred"):
            peak = b["GBps"]
            continue
        if parts[0] != "rms" or b.get("error_occurred"):
            if parts[0] == "rms":
                variants[(parts[2], parts[3], parts[4], parts[1])] = None
            continue
        _, impl, direction, dtype, shape = parts[:5]
        rec = {"us": b["us"], "gbps": b["GBps"], "copy": b["copy_GBps"], "of_copy": b["of_copy"],
               "label": b.get("label", "")}
        variants[(direction, dtype, shape, impl)] = rec
        if impl == "chosen":
            ours[(direction, dtype, shape)] = rec
    peers = {}
    missing = {}
    for line in open(peers_path):
        r = json.loads(line)
        if "missing" in r:
            missing[(r["peer"], r.get("dir"), r.get("dtype"), r.get("shape"))] = r["missing"]
            continue
        peers[(r["peer"], r["dir"], r["dtype"], r["shape"])] = r
    names = ["torch_eager", "torch_compile", "liger"]
    if peak:
        print(f"Copy bandwidth (device-to-device copy of 1 GiB, read + write): {peak:.0f} GB/s. 'of copy': of a copy of"
              " the case's own bytes; 'of peak': of the 1 GiB copy. Peers: GB/s (of copy).")
        print()
    print("| dir | dtype | shape | opreg variant | opreg GB/s | of copy | of peak | goal: met (copy / peak) |"
          " torch eager | torch.compile | Liger | opreg / fastest peer |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    met = {"copy": 0, "peak": 0, "peer": 0, "n": 0}
    for (direction, dtype, shape), o in ours.items():
        cells = []
        best = None
        for n in names:
            p = peers.get((n, direction, dtype, shape))
            if p is None:
                why = missing.get((n, direction, dtype, shape)) or missing.get((n, None, None, None)) or "not run"
                cells.append(f"missing ({why[:40]})")
                continue
            cells.append(f"{p['gbps']:.0f} ({p['gbps'] / o['copy']:.0%})")
            if best is None or p["us"] < best["us"]:
                best = p
        ratio = f"{best['us'] / o['us']:.2f}x" if best else "n/a"
        g = goal(direction, int(shape.split("x")[1]))
        of_peak = o["gbps"] / peak if peak else None
        met["n"] += 1
        met["copy"] += o["of_copy"] >= g
        met["peak"] += of_peak is not None and of_peak >= g
        met["peer"] += best is not None and best["us"] >= o["us"]
        peak_cell = f"{of_peak:.0%}" if of_peak is not None else "n/a"
        goal_cell = (f"{g:.0%}: {'yes' if o['of_copy'] >= g else 'no'} / "
                     f"{'yes' if of_peak is not None and of_peak >= g else 'no'}")
        print(f"| {direction} | {dtype} | {shape} | {o['label']} | {o['gbps']:.0f} | {o['of_copy']:.0%} | {peak_cell} | "
              f"{goal_cell} | " + " | ".join(cells) + f" | {ratio} |")
    print()
    print(f"Goals met: {met['copy']}/{met['n']} against the copy of the same bytes, {met['peak']}/{met['n']} against the"
          f" peak copy; at least as fast as the fastest peer: {met['peer']}/{met['n']}.")
    print()
    print("Each variant by name (GB/s, fraction of the copy of the same bytes; '-' = does not take the shape):")
    print()
    print("| dir | dtype | shape | copy GB/s | cluster | rows | split |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (direction, dtype, shape), o in ours.items():
        cells = []
        for impl in ("cluster", "rows", "split"):
            v = variants.get((direction, dtype, shape, impl))
            cells.append("-" if v is None else f"{v['gbps']:.0f} ({v['of_copy']:.0%})")
        print(f"| {direction} | {dtype} | {shape} | {o['copy']:.0f} | " + " | ".join(cells) + " |")


def sweep(bench_path, top=4):
    bench = json.load(open(bench_path))
    cases = {}
    for b in bench["benchmarks"]:
        parts = b["name"].split("/")
        if parts[0] != "sweep" or b.get("error_occurred") or "of_copy" not in b:
            continue
        _, dtype, shape, what = parts[:4]
        direction = what.split("_")[0]
        cases.setdefault((dtype, shape, direction), []).append((b["of_copy"], what))
    for (dtype, shape, direction), runs in cases.items():
        runs.sort(reverse=True)
        best = ", ".join(f"{w} {f:.0%}" for f, w in runs[:top])
        print(f"{dtype} {shape} {direction}: {best}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        run(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "run" and sys.argv[3] == "--csv":
        run(sys.argv[2], sys.argv[4])
    elif len(sys.argv) == 3 and sys.argv[1] == "sweep":
        sweep(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)
