"""One package's peers, timed case by case: the child process of `peer_gpu_ops.py run` (the method,
the peers and the record format are in peer_gpu_ops.py's docstring). Exit codes: 0 done, 3 the
CUDA context broke (the parent starts another child after the case in flight), 4 the package
cannot be imported (its records say why; the next run tries again)."""
import gc
import importlib
import json
import os
import site
import sys
import time
import traceback
import zlib

import peer_gpu_ops as P

DEVICE = "cuda"  # a smoke test of the builders may set "cpu"


class Missing(Exception):
    """The peer lacks this op or direction (a fact about the package, not a failure)."""


def _first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


class Inputs:
    """One case's tensors, random in [-2, 2]; those a peer overwrites are restored from a pristine
    copy before each run (restore) and after each peer (restore_all)."""

    def __init__(self, torch, op, dtype, shape):
        self.torch = torch
        self.tdt = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
        dims = tuple(int(d) for d in shape.split("x"))
        self.dims = dims
        gen = torch.Generator(device=DEVICE)
        gen.manual_seed(zlib.crc32(f"{op}/{dtype}/{shape}".encode()))

        def rnd(*s):
            return (torch.rand(*s, device=DEVICE, generator=gen) * 4 - 2).to(self.tdt)

        t = {}
        if op == "group_norm":
            n, c, hw = dims
            t.update(x=rnd(n, c, hw), w=rnd(c), b=rnd(c), dy=rnd(n, c, hw))
        elif op in ("geglu", "swiglu"):
            t.update(a=rnd(*dims), b=rnd(*dims), dy=rnd(*dims))
        else:
            rows, hidden = dims
            t.update(x=rnd(rows, hidden), w=rnd(hidden), dy=rnd(rows, hidden))
            if op == "layer_norm":
                t["b"] = rnd(hidden)
            if op == "fused_add_rms_norm":
                t.update(r=rnd(rows, hidden), ds=rnd(rows, hidden))
        self.t = t
        self.pristine = {}

    def __getitem__(self, name):
        if name not in self.t:  # derived tensors, made when a peer first asks
            if name == "cat":
                self.t[name] = self.torch.cat([self.t["a"], self.t["b"]], dim=-1)
            elif name in ("w32", "b32"):
                self.t[name] = self.t[name[0]].float()
        return self.t[name]

    def protect(self, names):
        for n in names:
            if n not in self.pristine:
                self.pristine[n] = self.t[n].clone()

    def restore(self, names):
        with self.torch.no_grad():
            for n in names:
                self.t[n].copy_(self.pristine[n])

    def restore_all(self):
        self.restore(list(self.pristine))


def autograd_fn(torch, forward, leaves, grads, direction):
    """fwd: forward(*leaves) without autograd; fwdbwd: forward, then autograd.grad of every leaf."""
    if direction == "fwd":
        def fwd():
            with torch.no_grad():
                return forward(*leaves)
        return fwd
    req = [t.detach().requires_grad_(True) for t in leaves]  # the same storage as the inputs

    def fwdbwd():
        out = forward(*req)
        outs = out if isinstance(out, tuple) else (out,)
        return torch.autograd.grad(outs, req, grads[:len(outs)])
    return fwdbwd


def no_grad_fn(torch, f):
    def run():
        with torch.no_grad():
            return f()
    return run


# ---- The peers: build(op, direction, inputs) -> (callable, names of inputs it overwrites).

def torch_peers(torch):
    F = torch.nn.functional
    for limit in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, 4096)
    for limit in ("accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, 16384)

    def llama(x, w):  # opreg's rms_norm, casting llama
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + P.EPS_RMS)
        return w * (xf * rstd).to(x.dtype)

    def fused_llama(x, r, w):
        s = x + r
        return llama(s, w), s

    def rms(x, w):
        return F.rms_norm(x, (x.shape[-1],), w, P.EPS_RMS)

    def fused(x, r, w):
        s = x + r
        return rms(s, w), s

    def layer(x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b, P.EPS_NORM)

    def group(x, w, b):
        return F.group_norm(x, P.GROUPS, w, b, P.EPS_NORM)

    def geglu(a, b):
        return F.gelu(a, approximate="tanh") * b

    def swiglu(a, b):
        return F.silu(a) * b

    eager = {"rms_norm": rms, "fused_add_rms_norm": fused, "layer_norm": layer, "group_norm": group,
             "geglu": geglu, "swiglu": swiglu}
    formulas = dict(eager, rms_norm=llama, fused_add_rms_norm=fused_llama)
    compiled = {op: torch.compile(f, dynamic=False) for op, f in formulas.items()}

    def builder(table):
        def build(op, direction, inp):
            leaves, grads = standard_leaves(op, inp)
            return autograd_fn(torch, table[op], leaves, grads, direction), []
        return build
    return {"torch_eager": builder(eager), "torch_compile": builder(compiled)}


def standard_leaves(op, inp):
    """The inputs and the gradients of the outputs, in the order of the torch formulas."""
    if op == "rms_norm":
        return [inp["x"], inp["w"]], [inp["dy"]]
    if op == "fused_add_rms_norm":
        return [inp["x"], inp["r"], inp["w"]], [inp["dy"], inp["ds"]]
    if op in ("layer_norm", "group_norm"):
        return [inp["x"], inp["w"], inp["b"]], [inp["dy"]]
    return [inp["a"], inp["b"]], [inp["dy"]]


def liger_peers(torch):
    importlib.import_module("liger_kernel")  # the package missing is reported once, for every op
    fns = {}
    errors = {}
    for op, mod, name in (("rms_norm", "rms_norm", "LigerRMSNormFunction"),
                          ("fused_add_rms_norm", "fused_add_rms_norm", "LigerFusedAddRMSNormFunction"),
                          ("layer_norm", "layer_norm", "LigerLayerNormFunction"),
                          ("group_norm", "group_norm", "LigerGroupNormFunction"),
                          ("geglu", "geglu", "LigerGELUMulFunction"), ("swiglu", "swiglu", "LigerSiLUMulFunction")):
        try:
            fns[op] = getattr(importlib.import_module(f"liger_kernel.ops.{mod}"), name)
        except Exception as e:  # noqa: BLE001 - reported per op
            errors[op] = f"cannot import liger_kernel.ops.{mod}.{name}: {_first_line(e)}"

    def build(op, direction, inp):
        if op in errors:
            raise Missing(errors[op])
        f = fns[op]
        leaves, grads = standard_leaves(op, inp)
        bwd = direction == "fwdbwd"
        if op == "rms_norm":  # its default in_place=True writes dx into dy
            return autograd_fn(torch, lambda x, w: f.apply(x, w, P.EPS_RMS, 0.0, "llama", True), leaves, grads,
                               direction), ["dy"] if bwd else []
        if op == "fused_add_rms_norm":
            return autograd_fn(torch, lambda x, r, w: f.apply(x, r, w, P.EPS_RMS, 0.0, "llama", False), leaves,
                               grads, direction), []
        if op == "layer_norm":
            return autograd_fn(torch, lambda x, w, b: f.apply(x, w, b, P.EPS_NORM), leaves, grads, direction), []
        if op == "group_norm":
            c = inp.dims[1]
            return autograd_fn(torch, lambda x, w, b: f.apply(x, w, b, c, P.GROUPS, P.EPS_NORM), leaves, grads,
                               direction), []
        # geglu, swiglu: the backward writes da and db over a and b.
        return autograd_fn(torch, lambda a, b: f.apply(a, b), leaves, grads, direction), ["a", "b"] if bwd else []
    return {"liger": build}


def flaggems_peers(torch):
    importlib.import_module("flag_gems")
    mods = {}
    errors = {}
    for key, mod in (("rms", "flag_gems.ops.rms_norm"), ("fused", "flag_gems.fused.fused_add_rms_norm"),
                     ("ln", "flag_gems.ops.layernorm"), ("gn", "flag_gems.ops.groupnorm"),
                     ("gelu_mul", "flag_gems.fused.gelu_and_mul"), ("silu_mul", "flag_gems.fused.silu_and_mul"),
                     ("geglu", "flag_gems.fused.geglu"), ("swiglu", "flag_gems.fused.swiglu")):
        try:
            mods[key] = importlib.import_module(mod)
        except Exception as e:  # noqa: BLE001
            errors[key] = f"cannot import {mod}: {_first_line(e)}"

    def need(key):
        if key in errors:
            raise Missing(errors[key])
        return mods[key]

    def build(op, direction, inp):
        leaves, grads = standard_leaves(op, inp)
        bwd = direction == "fwdbwd"
        if op == "rms_norm":
            m = need("rms")
            return autograd_fn(torch, lambda x, w: m.rms_norm(x, [x.shape[-1]], w, P.EPS_RMS), leaves, grads,
                               direction), []
        if op == "fused_add_rms_norm":
            if bwd:
                raise Missing("FlagGems has no fused_add_rms_norm backward")
            m = need("fused")
            x, r, w = inp["x"], inp["r"], inp["w"]
            # In place: y over x, s over the residual (restored before each run).
            return no_grad_fn(torch, lambda: m.fused_add_rms_norm(x, r, [x.shape[-1]], w, P.EPS_RMS)), ["x", "r"]
        if op == "layer_norm":
            m = need("ln")
            x, w, b, dy = inp["x"], inp["w"], inp["b"], inp["dy"]
            shape = [x.shape[-1]]

            def ln():
                y, mean, rstd = m.layer_norm(x, shape, w, b, P.EPS_NORM)
                if bwd:
                    return m.layer_norm_backward(dy, x, shape, mean, rstd, w, b, output_mask=[True, True, True])
                return y
            return no_grad_fn(torch, ln), []
        if op == "group_norm":
            m = need("gn")
            x, w, b, dy = inp["x"], inp["w"], inp["b"], inp["dy"]
            n, c, hw = inp.dims

            def gn():
                y, mean, rstd = m.group_norm(x, w, b, n, c, hw, P.GROUPS, P.EPS_NORM)
                if bwd:
                    return m.group_norm_backward(dy, x, mean, rstd, w, n, c, hw, P.GROUPS, [True, True, True])
                return y
            return no_grad_fn(torch, gn), []
        if op == "geglu":
            m = need("gelu_mul")
            return autograd_fn(torch, lambda a, b: m.gelu_and_mul(a, b, "tanh"), leaves, grads, direction), []
        m = need("silu_mul")
        return autograd_fn(torch, lambda a, b: m.silu_and_mul(a, b), leaves, grads, direction), []

    def build_cat(op, direction, inp):
        if op not in ("geglu", "swiglu"):
            raise Missing("flaggems_cat is FlagGems' geglu and swiglu on the concatenated input only")
        m = need(op)
        fwd = getattr(m, op)
        dfn = getattr(m, "d" + op)
        cat, dy = inp["cat"], inp["dy"]
        if direction == "fwd":
            return no_grad_fn(torch, lambda: fwd(cat)), []

        def both():
            fwd(cat)
            return dfn(dy, cat)
        return no_grad_fn(torch, both), []
    return {"flaggems": build, "flaggems_cat": build_cat}


def quack_peers(torch, quack_site):
    # The nvidia_cutlass_dsl wheel finds its packages through a .pth file, which PYTHONPATH and
    # sys.path entries do not run: add such folders as site folders (after the machine's own).
    for d in [quack_site] + list(sys.path):
        if d and os.path.exists(os.path.join(d, "nvidia_cutlass_dsl_packages.pth")):
            site.addsitedir(d)
    m = importlib.import_module("quack.rmsnorm")

    def build(op, direction, inp):
        leaves, grads = standard_leaves(op, inp)
        if op == "rms_norm":
            return autograd_fn(torch, lambda x, w: m.rmsnorm(x, w, eps=P.EPS_RMS), leaves, grads, direction), []
        if op == "fused_add_rms_norm":
            return autograd_fn(torch, lambda x, r, w: m.rmsnorm(x, w, residual=r, eps=P.EPS_RMS, prenorm=True),
                               leaves, grads, direction), []
        if op == "layer_norm":
            x, w, b, dy = inp["x"], inp["w32"], inp["b32"], inp["dy"]  # QuACK's layernorm takes f32 parameters

            def ln():
                y, rstd, mean = m.layernorm_fwd(x, w, b, P.EPS_NORM, return_rstd=True, return_mean=True)
                if direction == "fwdbwd":
                    return m.layernorm_bwd(x, w, dy, rstd, mean, has_bias=True)
                return y
            return no_grad_fn(torch, ln), []
        raise Missing(f"QuACK has no {op}")
    return {"quack": build}


def versions():
    from importlib.metadata import version
    out = {}
    for name in ("torch", "triton", "liger-kernel", "flag_gems", "quack-kernels", "nvidia-cutlass-dsl"):
        try:
            out[name] = version(name)
        except Exception:  # noqa: BLE001 - not installed
            pass
    return out


# ---- Timing.

class Timer:
    def __init__(self, torch):
        self.torch = torch
        self.cache = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
        self.start = torch.cuda.Event(enable_timing=True)
        self.stop = torch.cuda.Event(enable_timing=True)

    def measure(self, run, prep, iters):
        """Median, 20th and 80th percentile in ms of `iters` runs after 3 warm-ups, L2 flushed."""
        for _ in range(3):
            prep()
            run()
        self.torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            prep()
            self.cache.zero_()
            self.start.record()
            run()
            self.stop.record()
            self.stop.synchronize()
            times.append(self.start.elapsed_time(self.stop))
        times.sort()
        n = len(times)
        med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
        return med, times[int(0.2 * (n - 1))], times[int(0.8 * (n - 1))]

    def capture(self, fn, prep):
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-ups off the default stream, as the graph docs ask
            for _ in range(2):
                prep()
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        prep()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        torch.cuda.synchronize()
        return graph


def child(package, out_path, ops, shapes, quack_site):
    out = open(out_path, "a")
    progress = open(out_path + ".progress", "a")
    try:
        import torch
        torch.cuda.init()
    except Exception as e:  # noqa: BLE001 - no torch or no GPU here: every peer says so
        for p in P.PACKAGES[package]:
            out.write(json.dumps({"peer": p, "missing": f"no torch with CUDA: {_first_line(e)}", "retry": True}) + "\n")
        return 4

    def emit(rec):
        out.write(json.dumps(rec) + "\n")
        out.flush()
        where = " ".join(str(rec.get(k, "")) for k in ("peer", "op", "dir", "dtype", "shape", "mode"))
        tail = f"missing: {rec['missing']}" if "missing" in rec else f"us={rec['us']:.1f} GBps={rec['gbps']:.0f}"
        print(f"peer {where}: {tail}", flush=True)

    def alive():
        try:
            torch.cuda.synchronize()
            torch.zeros(1, device="cuda").add_(1)
            torch.cuda.synchronize()
            return True
        except Exception:  # noqa: BLE001
            return False

    try:
        if package == "torch":
            builders = torch_peers(torch)
        elif package == "liger":
            builders = liger_peers(torch)
        elif package == "flaggems":
            builders = flaggems_peers(torch)
        else:
            builders = quack_peers(torch, quack_site)
    except Exception as e:  # noqa: BLE001 - the package is missing: say so, try again next run
        traceback.print_exc()
        for p in P.PACKAGES[package]:
            emit({"peer": p, "missing": f"cannot import: {_first_line(e)}", "retry": True})
        return 4
    meta = {"package": package, "device": torch.cuda.get_device_name(), "versions": versions(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    out.write(json.dumps({"meta": meta}) + "\n")
    print(f"peers {package}: {meta}", flush=True)
    timer = Timer(torch)
    book = P.Book(P.read_records([out_path]))
    todo = [c for c in P.cases(ops, shapes) if any(not book.done(p, *c) for p in P.PACKAGES[package])]
    groups = {}
    for op, direction, dtype, shape in todo:
        groups.setdefault((op, dtype, shape), []).append(direction)
    for (op, dtype, shape), dirs in groups.items():
        progress.write(json.dumps({"op": op, "dir": dirs[0], "dtype": dtype, "shape": shape, "t": time.time()}) + "\n")
        progress.flush()
        try:
            inp = Inputs(torch, op, dtype, shape)
        except Exception as e:  # noqa: BLE001 - out of memory, say: these cases only
            traceback.print_exc()
            for direction in dirs:
                for peer in P.PACKAGES[package]:
                    emit({"peer": peer, "op": op, "dir": direction, "dtype": dtype, "shape": shape,
                          "missing": f"failed to make the inputs: {_first_line(e)}"})
            gc.collect()
            torch.cuda.empty_cache()
            if not alive():
                return 3
            continue
        for direction in dirs:
            nbytes = P.bytes_moved(op, direction, shape, dtype)
            iters = P.iterations_for(nbytes)
            base = {"op": op, "dir": direction, "dtype": dtype, "shape": shape}
            for peer in P.PACKAGES[package]:
                if book.done(peer, op, direction, dtype, shape):
                    continue
                rec = dict(base, peer=peer)
                progress.write(json.dumps(dict(rec, mode="eager", t=time.time())) + "\n")
                progress.flush()
                try:
                    fn, mutated = builders[peer](op, direction, inp)
                except Missing as e:
                    emit(dict(rec, missing=str(e)))
                    continue
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    emit(dict(rec, missing=f"failed to set up: {_first_line(e)}"))
                    continue
                inp.protect(mutated)

                def prep(inp=inp, mutated=mutated):
                    inp.restore(mutated)

                graph = None
                for mode in P.MODES:
                    if mode == "graph":
                        progress.write(json.dumps(dict(rec, mode="graph", t=time.time())) + "\n")
                        progress.flush()
                    try:
                        if mode == "eager":
                            ms, p20, p80 = timer.measure(fn, prep, iters)
                        else:
                            try:
                                graph = timer.capture(fn, prep)
                            except Exception as e:  # noqa: BLE001
                                raise RuntimeError(f"capture failed: {_first_line(e)}") from e
                            ms, p20, p80 = timer.measure(graph.replay, prep, iters)
                        emit(dict(rec, mode=mode, us=ms * 1e3, gbps=nbytes / (ms * 1e6), bytes=nbytes, iters=iters,
                                  p20_us=p20 * 1e3, p80_us=p80 * 1e3))
                    except Exception as e:  # noqa: BLE001
                        traceback.print_exc()
                        emit(dict(rec, mode=mode, missing=f"failed: {_first_line(e)}"))
                        if not alive():
                            print("the CUDA context is broken; the parent starts another child", flush=True)
                            return 3
                        if mode == "eager":
                            emit(dict(rec, mode="graph", missing="not tried: the eager run failed"))
                            break
                del fn, graph
                inp.restore_all()
        del inp
        gc.collect()
        torch.cuda.empty_cache()
    return 0
