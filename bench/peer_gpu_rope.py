#!/usr/bin/env python3
"""rope on the GPU against its peers, kernel against kernel: opreg (opreg.torch's
liger_rotary_pos_emb, the user's path; bench_cuda_ops's ops/rope cases time the C++ call),
Liger-Kernel's LigerRopeFunction, torch eager
(HF's apply_rotary_pos_emb formula) and torch.compile of that formula, each captured once in a
CUDA graph and replayed, beside a graph-replayed copy of 1 GiB (the copy bandwidth).

  peer_gpu_rope.py [--shape B,T,HQ,HK,D] [--dtypes bf16,f32] [--iters 50]

Inputs are HF's: q_proj(x).view(B, T, H, D).transpose(1, 2) (q and k strided views of [B, T, H, D]
memory), cos and sin [1, T, D] in q's dtype (LlamaRotaryEmbedding's for position_ids [1, T]); the
gradients of the outputs likewise. fwd is the forward; fwdbwd the forward and autograd.grad of q
and k. Liger rotates q and k (and, backward, dq and dk) in place: those inputs are restored from a
pristine copy before each run, outside the timed region. Method (as peer_gpu_ops.py): L2 flushed
by zeroing 256 MiB before each replay, CUDA events around the replay alone, the median of --iters
replays after 3 warm-ups. GB/s by opreg's byte model (docs/ops.md, rope): q and k read and written
once, the tables' first D/2 entries of each row once (and the same again backward)."""
import argparse
import importlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_gpu_ops_child import Timer  # noqa: E402  (the same L2 flush, events and graph capture)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def hf_rope(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def tables(t, d, dtype):
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32, device="cuda") / d))
    freqs = torch.arange(t, dtype=torch.float32, device="cuda")[:, None] * inv
    emb = torch.cat((freqs, freqs), dim=-1)[None]
    return emb.cos().to(dtype), emb.sin().to(dtype)


def peers():
    out = {"torch_eager": hf_rope, "torch_compile": torch.compile(hf_rope, dynamic=False)}
    import opreg.torch as otorch
    out["opreg_torch"] = otorch.liger_rotary_pos_emb
    try:
        out["liger"] = importlib.import_module("liger_kernel.ops.rope").LigerRopeFunction.apply
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        print(f"liger: missing ({type(e).__name__}: {e})", file=sys.stderr)
    return out


def bytes_moved(b, t, hq, hk, d, size, fwdbwd):
    one = 2 * b * t * (hq + hk) * d * size + 2 * t * (d // 2) * size
    return one * (2 if fwdbwd else 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="4,4096,32,8,128")
    p.add_argument("--dtypes", default="bf16,f32")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--json", default="")
    p.add_argument("--copy-gbps", type=float, default=0.0,
                   help="the ceiling for 'of copy' (e.g. bench_cuda_ops' copy/peak GBps); default: the torch copy "
                        "timed here, which on an H200 reaches only 2761 GB/s against cudaMemcpy's 4250")
    a = p.parse_args()
    b, t, hq, hk, d = (int(v) for v in a.shape.split(","))
    timer = Timer(torch)
    rows = []
    # The copy ceiling: 1 GiB read and written, graph-replayed.
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    g = timer.capture(lambda: dst.copy_(src), lambda: None)
    ms, _, _ = timer.measure(g.replay, lambda: None, a.iters)
    torch_copy_gbps = 2 * src.numel() / (ms * 1e6)
    copy_gbps = a.copy_gbps or torch_copy_gbps
    del src, dst, g
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__}; torch copy {torch_copy_gbps:.0f} GB/s "
          f"(1 GiB, graph-replayed); 'of copy' against {copy_gbps:.0f} GB/s; q {b}x{hq}x{t}x{d}, k {hk} heads, "
          f"HF's transposed layout")
    fns = peers()
    for dtype_name in a.dtypes.split(","):
        dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype_name]
        gen = torch.Generator(device="cuda").manual_seed(0)
        q0 = torch.randn(b, t, hq, d, device="cuda", generator=gen).to(dtype).transpose(1, 2)
        k0 = torch.randn(b, t, hk, d, device="cuda", generator=gen).to(dtype).transpose(1, 2)
        dq0 = torch.randn(b, t, hq, d, device="cuda", generator=gen).to(dtype).transpose(1, 2)
        dk0 = torch.randn(b, t, hk, d, device="cuda", generator=gen).to(dtype).transpose(1, 2)
        cos, sin = tables(t, d, dtype)
        want = hf_rope(q0.float(), k0.float(), cos.float(), sin.float())
        for direction in ("fwd", "fwdbwd"):
            nbytes = bytes_moved(b, t, hq, hk, d, q0.element_size(), direction == "fwdbwd")
            for name, fn in fns.items():
                q, k = q0.clone().detach(), k0.clone().detach()  # clone keeps the transposed strides
                dq, dk = dq0.clone(), dk0.clone()
                q.requires_grad_(direction == "fwdbwd")
                k.requires_grad_(direction == "fwdbwd")

                def prep():
                    if name == "liger":  # it rotates its inputs in place
                        with torch.no_grad():
                            q.copy_(q0)
                            k.copy_(k0)
                            dq.copy_(dq0)
                            dk.copy_(dk0)

                if direction == "fwd":
                    def run():
                        with torch.no_grad():
                            return fn(q, k, cos, sin)
                else:
                    def run():
                        qo, ko = fn(q, k, cos, sin)
                        return torch.autograd.grad((qo, ko), (q, k), (dq, dk))
                try:
                    prep()
                    got = run() if direction == "fwd" else None
                    err = None if got is None else max((g.float() - w).abs().max().item() for g, w in zip(got, want))
                    graph = timer.capture(run, prep)
                    ms, p20, p80 = timer.measure(graph.replay, prep, a.iters)
                except Exception as e:  # noqa: BLE001 - a peer that cannot run is a row saying so
                    rows.append({"peer": name, "dtype": dtype_name, "dir": direction, "missing": f"{type(e).__name__}: {e}"})
                    print(f"{dtype_name:5s} {direction:6s} {name:14s} missing: {type(e).__name__}: {str(e)[:200]}")
                    continue
                gbps = nbytes / (ms * 1e6)
                rows.append({"peer": name, "dtype": dtype_name, "dir": direction, "us": ms * 1e3, "gbps": gbps,
                             "of_copy": gbps / copy_gbps, "p20_us": p20 * 1e3, "p80_us": p80 * 1e3,
                             "max_abs_err_fwd": err})
                print(f"{dtype_name:5s} {direction:6s} {name:14s} {ms * 1e3:8.1f} us {gbps:7.0f} GB/s "
                      f"{gbps / copy_gbps:5.2f} of copy" + ("" if err is None else f"  fwd max|err| {err:.3g}"))
                del graph
    # The table: opreg against the fastest peer, per (dtype, dir).
    print("\n| dtype | dir | opreg us | GB/s | of copy | fastest peer | its us | opreg speed / peer's |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for dtype_name in a.dtypes.split(","):
        for direction in ("fwd", "fwdbwd"):
            cell = [r for r in rows if r["dtype"] == dtype_name and r["dir"] == direction and "us" in r]
            mine = next((r for r in cell if r["peer"] == "opreg_torch"), None)
            others = [r for r in cell if r["peer"] != "opreg_torch"]
            if mine is None or not others:
                continue
            best = min(others, key=lambda r: r["us"])
            print(f"| {dtype_name} | {direction} | {mine['us']:.1f} | {mine['gbps']:.0f} | {mine['of_copy']:.2f} | "
                  f"{best['peer']} | {best['us']:.1f} | {best['us'] / mine['us']:.2f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"copy_gbps": copy_gbps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
