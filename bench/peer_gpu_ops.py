#!/usr/bin/env python3
"""The GPU peers of bench_cuda_ops (every op), timed kernel against kernel and as a PyTorch caller
pays, on the same cases with the same method; and the table that puts both side by side.

  peer_gpu_ops.py run OUT.jsonl [--packages torch,quack,liger,flaggems] [--ops OP,..]
                  [--shapes SHAPE,..] [--deadline S] [--quack-site DIR]
        time the peers, one JSON object a line; resumable: cases already in OUT.jsonl are skipped,
        so a run stopped by its deadline goes on where it stopped when run again
  peer_gpu_ops.py status OUT.jsonl          how many peer cases are still to run
  peer_gpu_ops.py table BENCH.json PEERS.jsonl [PEERS.jsonl ..] [--out FILE] [--title TEXT]
        the markdown table (peer_gpu_ops_table.py)
  peer_gpu_ops.py self-test                 the table, the byte model and the resume bookkeeping
                                            on synthetic fixtures (no GPU, no torch)

Cases (as bench_cuda_ops.cpp): rms_norm, fused_add_rms_norm, layer_norm, geglu, swiglu at rows x
hidden 4096 x {1024 .. 32768} and 65536 x 4096, group_norm at 32 x C x 4096 (C 256 .. 2048, 32
groups), each bf16 and f32, fwd and fwdbwd; decode rows {1, 8, 64} x {4096, 8192}, bf16, fwd.

Peers, by package (one child process each, so that a peer that crashes its process or its CUDA
context costs its own cases only; a child that dies is started again after the case it died in):
  torch     torch_eager (F.rms_norm, F.layer_norm, F.group_norm; composed fused_add, geglu, swiglu)
            and torch_compile (opreg's formulas: the llama rms_norm, s = x + r then it, F.layer_norm,
            F.group_norm, gelu_tanh(a) * b, silu(a) * b; dynamic=False, one graph per case)
  liger     Liger-Kernel: LigerRMSNormFunction (llama, in place), LigerFusedAddRMSNormFunction,
            LigerLayerNormFunction, LigerGroupNormFunction, LigerGELUMulFunction, LigerSiLUMulFunction
  flaggems  FlagGems: ops rms_norm (autograd), fused.fused_add_rms_norm (forward only, in place),
            ops layer_norm/_backward and group_norm/_backward (functional), fused gelu_and_mul
            (tanh) and silu_and_mul (autograd); flaggems_cat: fused geglu/dgeglu and swiglu/dswiglu
            on the concatenated [rows, 2 x hidden] input
  quack     QuACK: quack.rmsnorm.rmsnorm (fused_add: its residual with prenorm), layernorm_fwd/_bwd
            (f32 weight and bias, as it requires)
A peer, op or direction a package lacks, or that fails to import, compile or run, is a record with
"missing" and the reason, never a crash of the run.

Method, as bench_cuda_ops: each timed run starts with L2 flushed (a 256 MiB buffer zeroed on the
current stream), CUDA events around the work alone, the median of 20-200 runs (from the bytes)
after 3 warm-ups; fwdbwd is the forward then the backward (autograd.grad of every input and
parameter, or the package's backward functions) between one pair of events. Each case is timed
twice: eager (the Python call) and graph (the same call captured once into a torch.cuda.CUDAGraph
and replayed; the flush and any restoring of inputs the peer overwrites happen before the start
event, outside the graph). A capture that fails (a host sync, say) gives graph "missing" with the
reason; the eager figure stays. GB/s use opreg's byte model (src/ops/ops.cpp bytes_moved, mirrored
in bytes_moved() here; the table checks it against the benchmark's own bytes counter).

Record: {"peer", "op", "dir", "dtype", "shape", "mode": "eager"|"graph", "us", "gbps", "bytes",
"iters", "p20_us", "p80_us"}, or the same keys with "missing" instead of the times (a record without
mode, shape, dtype or dir covers all of them); {"meta": ...} lines name the device and versions."""
import json
import os
import subprocess
import sys
import time

EPS_RMS = 1e-6
EPS_NORM = 1e-5
GROUPS = 32
ROW_OPS = ["rms_norm", "fused_add_rms_norm", "layer_norm", "geglu", "swiglu"]
OPS = ["rms_norm", "fused_add_rms_norm", "layer_norm", "group_norm", "geglu", "swiglu"]
ROW_SHAPES = [(4096, h) for h in (1024, 2048, 4096, 8192, 16384, 32768)] + [(65536, 4096)]
GROUP_SHAPES = [(32, c, 4096) for c in (256, 512, 1024, 2048)]
DECODE_SHAPES = [(r, h) for r in (1, 8, 64) for h in (4096, 8192)]
DTYPES = ["bf16", "f32"]
# In the order they run: the peers that set the bar first (torch.compile, QuACK), so that a run cut
# by its deadline has them.
PACKAGES = {"torch": ["torch_eager", "torch_compile"], "quack": ["quack"], "liger": ["liger"],
            "flaggems": ["flaggems", "flaggems_cat"]}
MODES = ["eager", "graph"]
SIZE = {"bf16": 2, "f16": 2, "f32": 4}


def shape_str(shape):
    return "x".join(str(d) for d in shape)


def cases(ops=None, shapes=None):
    """Every case in bench_cuda_ops.cpp's order: (op, dir, dtype, shape string)."""
    out = []
    for op in OPS:
        if ops and op not in ops:
            continue
        groups = [(dt, s, ("fwd", "fwdbwd")) for dt in DTYPES for s in (GROUP_SHAPES if op == "group_norm" else
                                                                           ROW_SHAPES)]
        if op != "group_norm":
            groups += [("bf16", s, ("fwd",)) for s in DECODE_SHAPES]
        for dtype, shape, dirs in groups:
            if shapes and shape_str(shape) not in shapes:
                continue
            out += [(op, d, dtype, shape_str(shape)) for d in dirs]
    return out


# Each op direction's tensors as the op manifest lists them (include/opreg/op_manifest.h): how many
# activations (x's shape and dtype), parameters (weight-sized, the weight's dtype) and statistics
# (f32, per row or per (n, group)) an ideal kernel reads or writes once.
TENSORS = {
    ("rms_norm", "fwd"): (2, 1, 1), ("rms_norm", "bwd"): (3, 2, 1),
    ("fused_add_rms_norm", "fwd"): (4, 1, 1), ("fused_add_rms_norm", "bwd"): (4, 2, 1),
    ("layer_norm", "fwd"): (2, 2, 2), ("layer_norm", "bwd"): (3, 3, 2),
    ("group_norm", "fwd"): (2, 2, 2), ("group_norm", "bwd"): (3, 3, 2),
    ("geglu", "fwd"): (3, 0, 0), ("geglu", "bwd"): (5, 0, 0),
    ("swiglu", "fwd"): (3, 0, 0), ("swiglu", "bwd"): (5, 0, 0),
}


def bytes_moved(op, direction, shape, dtype, wdtype=None):
    """opreg's byte model; direction fwd, bwd or fwdbwd (their sum); shape a tuple or 'AxB'."""
    if isinstance(shape, str):
        shape = tuple(int(d) for d in shape.split("x"))
    if direction == "fwdbwd":
        return bytes_moved(op, "fwd", shape, dtype, wdtype) + bytes_moved(op, "bwd", shape, dtype, wdtype)
    n = 1
    for d in shape:
        n *= d
    if op == "group_norm":
        params, stats = shape[1], shape[0] * GROUPS
    else:
        params, stats = shape[-1], n // shape[-1]
    acts, nparams, nstats = TENSORS[(op, direction)]
    return acts * n * SIZE[dtype] + nparams * params * SIZE[wdtype or dtype] + nstats * stats * 4


def iterations_for(nbytes):
    return int(min(200, max(20, 4_000_000_000 // max(nbytes, 1))))


# ---- The records: what is done, what is missing (also used by the table).

def key_of(rec):
    return tuple(rec.get(k) for k in ("peer", "op", "dir", "dtype", "shape", "mode"))


def read_records(paths):
    recs = []
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut by a killed child
    return recs


class Book:
    """Timed records by full key, missing ones by the fields they name (None: every value). A
    missing record with "retry" (a package that could not be imported this time) explains a gap
    but does not make its cases done."""

    def __init__(self, recs):
        self.timed = {}
        self.missing = {}
        self.soft = {}
        self.meta = []
        for r in recs:
            if "meta" in r:
                self.meta.append(r["meta"])
            elif "missing" in r:
                (self.soft if r.get("retry") else self.missing).setdefault(key_of(r), r["missing"])
            elif "us" in r:
                self.timed[key_of(r)] = r

    def why_missing(self, peer, op, direction, dtype, shape, mode, soft=True):
        full = (peer, op, direction, dtype, shape, mode)
        for table in (self.missing, self.soft) if soft else (self.missing,):
            for n in (6, 5, 4, 3, 2, 1):  # the most specific record first
                k = full[:n] + (None,) * (6 - n)
                if k in table:
                    return table[k]
        return None

    def get(self, peer, op, direction, dtype, shape, mode):
        return self.timed.get((peer, op, direction, dtype, shape, mode))

    def done(self, peer, op, direction, dtype, shape):
        return all(self.get(peer, op, direction, dtype, shape, m) is not None or
                   self.why_missing(peer, op, direction, dtype, shape, m, soft=False) is not None for m in MODES)


def remaining(book, package, ops=None, shapes=None):
    return [(p,) + c for c in cases(ops, shapes) for p in PACKAGES[package] if not book.done(p, *c)]


# ---- The parent: one child process per package, resumed after a crash, within the deadline.

def run(out_path, packages, ops, shapes, deadline, quack_site):
    t0 = time.time()
    progress = out_path + ".progress"
    for package in packages:
        restarts = 0
        while True:
            book = Book(read_records([out_path]))
            left = remaining(book, package, ops, shapes)
            if not left:
                print(f"peers {package}: complete", flush=True)
                break
            budget = deadline - (time.time() - t0) - 5
            if budget < 20:
                print(f"peers {package}: {len(left)} cases left, deadline reached; run again to go on", flush=True)
                break
            if os.path.exists(progress):
                os.remove(progress)
            cmd = [sys.executable, os.path.abspath(__file__), "child", package, out_path]
            if ops:
                cmd += ["--ops", ",".join(ops)]
            if shapes:
                cmd += ["--shapes", ",".join(shapes)]
            if quack_site:
                cmd += ["--quack-site", quack_site]
            print(f"peers {package}: {len(left)} cases to run, {budget:.0f} s left", flush=True)
            started = time.time()
            try:
                rc = subprocess.run(cmd, timeout=budget).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            if rc == 0:
                restarts += 1  # re-read: normally complete now (a child that leaves cases is not run forever)
                if restarts > 10:
                    break
                continue
            if rc == 4:
                print(f"peers {package}: cannot be imported here (its records say why); skipped", flush=True)
                break
            now = read_records([progress])
            case = now[-1] if now else None
            if rc == "timeout":
                # The case in flight is marked failed only when it alone took minutes (a hang);
                # otherwise the next run picks it up again.
                if case and time.time() - case["t"] > 120:
                    mark_failed(out_path, package, case, f"timed out after {time.time() - case['t']:.0f} s")
                print(f"peers {package}: stopped at the deadline after {time.time() - started:.0f} s", flush=True)
                break
            if not case:
                with open(out_path, "a") as f:
                    for p in PACKAGES[package]:
                        f.write(json.dumps({"peer": p, "missing": f"the peer's process died at start (exit {rc})",
                                            "retry": True}) + "\n")
                print(f"peers {package}: the process died at start (exit {rc}); skipped", flush=True)
                break
            mark_failed(out_path, package, case, f"the peer's process died in this case (exit {rc})")
            restarts += 1
            if restarts > 10:
                print(f"peers {package}: died {restarts} times; leaving the rest", flush=True)
                break
    book = Book(read_records([out_path]))
    left = sum(len(remaining(book, p, ops, shapes)) for p in PACKAGES)
    print(f"peers: {'complete' if left == 0 else f'{left} peer cases left (run again to resume)'} "
          f"in {time.time() - t0:.0f} s", flush=True)


def mark_failed(out_path, package, case, why):
    with open(out_path, "a") as f:
        for p in PACKAGES[package] if case.get("peer") is None else [case["peer"]]:
            rec = {"peer": p, "op": case["op"], "dir": case["dir"], "dtype": case["dtype"], "shape": case["shape"]}
            if case.get("mode") == "graph":  # a crash in the eager run leaves the graph untried too
                rec["mode"] = "graph"
            rec["missing"] = f"failed: {why}"
            f.write(json.dumps(rec) + "\n")


def status(out_path):
    book = Book(read_records([out_path]))
    total = 0
    for package in PACKAGES:
        n = len(remaining(book, package))
        total += n
        print(f"{package}: {n} cases left")
    print("complete" if total == 0 else f"{total} peer cases left")


def main(argv):
    def opt(name, default=None):
        if name in argv:
            i = argv.index(name)
            value = argv[i + 1]
            del argv[i:i + 2]
            return value
        return default

    if len(argv) >= 2 and argv[1] == "run":
        packages = opt("--packages", ",".join(PACKAGES)).split(",")
        ops = [o for o in opt("--ops", "").split(",") if o]
        shapes = [s for s in opt("--shapes", "").split(",") if s]
        deadline = float(opt("--deadline", "100000"))
        quack_site = opt("--quack-site")
        bad = [p for p in packages if p not in PACKAGES] + [o for o in ops if o not in OPS]
        if len(argv) != 3 or bad:
            print(f"unknown: {bad}" if bad else __doc__)
            return 2
        run(argv[2], packages, ops, shapes, deadline, quack_site)
        return 0
    if len(argv) >= 4 and argv[1] == "child":
        ops = [o for o in opt("--ops", "").split(",") if o]
        shapes = [s for s in opt("--shapes", "").split(",") if s]
        quack_site = opt("--quack-site")
        if os.environ.get("PEER_GPU_OPS_FAKE_CHILD"):  # the self-test's stand-in
            import peer_gpu_ops_table
            return peer_gpu_ops_table._fake_child(argv[2], argv[3], ops, shapes)
        import peer_gpu_ops_child
        return peer_gpu_ops_child.child(argv[2], argv[3], ops, shapes, quack_site)
    if len(argv) == 3 and argv[1] == "status":
        status(argv[2])
        return 0
    if len(argv) >= 4 and argv[1] == "table":
        out = opt("--out")
        title = opt("--title", "")
        import peer_gpu_ops_table
        text = peer_gpu_ops_table.table(argv[2], argv[3:], title)
        if out:
            with open(out, "w") as f:
                f.write(text)
        print(text, end="")
        return 0
    if len(argv) == 2 and argv[1] == "self-test":
        import peer_gpu_ops_table
        return peer_gpu_ops_table.self_test()
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(list(sys.argv)))
