"""Worker bodies of test_dtensor.py, one process per GPU (torch.multiprocessing.spawn): the bodies
of Liger-Kernel's _test_dtensor_rms_norm and _test_dtensor_liger_silumul (test/transformers,
v0.8.2) on opreg.torch, and opreg's own placement cases. Kept apart from the test module so a
spawned process imports only this (and opreg) by name."""
import os

import torch

# Leave NVLink multicast off in every process of the group (the lent GPU hosts need it).
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _init(rank, world_size, file_name):
    os.environ.update(NCCL_ENV)
    torch.cuda.set_device(rank)
    torch.distributed.init_process_group(backend="nccl", init_method=f"file://{file_name}", rank=rank,
                                         world_size=world_size)
    from torch.distributed.device_mesh import init_device_mesh
    return f"cuda:{rank}", init_device_mesh("cuda", mesh_shape=(world_size,), mesh_dim_names=("tp",))


def _done():
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def liger_rms_norm_body(rank, world_size, bs, sl, hd, dtype, atol, rtol, offset, casting_mode, file_name):
    """Liger's _test_dtensor_rms_norm: X sharded on its last dim (gathered by the function)."""
    from torch.distributed.tensor import Shard, distribute_tensor
    from opreg.torch.functional import liger_rms_norm
    device, device_mesh = _init(rank, world_size, file_name)
    try:
        torch.manual_seed(0)
        t = torch.randn(bs, sl, hd, device=device, dtype=dtype, requires_grad=True)
        dt = distribute_tensor(t, device_mesh=device_mesh, placements=[Shard(2)])
        w = torch.randn(hd, device=device, dtype=dtype, requires_grad=True)
        w1 = w.detach().clone()
        w2 = w.detach().clone()

        y1 = liger_rms_norm(X=dt, W=w1, eps=1e-6, offset=offset, casting_mode=casting_mode)
        y2 = liger_rms_norm(X=t, W=w2, eps=1e-6, offset=offset, casting_mode=casting_mode)
        torch.testing.assert_close(y1, y2, atol=atol, rtol=rtol)

        grad = torch.randn_like(y2)
        dgrad = distribute_tensor(grad, device_mesh=device_mesh, placements=[Shard(2)])

        y1.backward(dgrad)
        y2.backward(grad)
        torch.testing.assert_close(w1.grad, w2.grad, atol=atol, rtol=rtol)
        torch.testing.assert_close(dt.grad, t.grad, atol=atol, rtol=rtol)
    finally:
        _done()


def liger_silumul_body(rank, world_size, bsz, seq_len, hidden_size, dtype, atol, rtol, file_name):
    """Liger's _test_dtensor_liger_silumul: a and b sharded on the hidden dim."""
    from torch.distributed.tensor import Shard, distribute_tensor
    from opreg.torch import LigerSiLUMulFunction
    device, device_mesh = _init(rank, world_size, file_name)
    try:
        _a = torch.randn(bsz, seq_len, hidden_size, device=device, dtype=dtype)
        _b = torch.randn(bsz, seq_len, hidden_size, device=device, dtype=dtype)
        torch.distributed.broadcast(_a, src=0)
        torch.distributed.broadcast(_b, src=0)
        assert hidden_size % world_size == 0

        a1 = _a.clone().detach().requires_grad_(True)
        b1 = _b.clone().detach().requires_grad_(True)
        da = distribute_tensor(a1, device_mesh=device_mesh, placements=[Shard(2)])
        db = distribute_tensor(b1, device_mesh=device_mesh, placements=[Shard(2)])
        a2 = _a.clone().detach().requires_grad_(True)
        b2 = _b.clone().detach().requires_grad_(True)

        c1 = LigerSiLUMulFunction.apply(da, db)
        c2 = LigerSiLUMulFunction.apply(a2, b2)
        torch.testing.assert_close(c1.full_tensor(), c2, atol=atol, rtol=rtol)

        grad = torch.randn_like(c2)
        torch.distributed.broadcast(grad, src=0)
        dgrad = distribute_tensor(grad, device_mesh=device_mesh, placements=[Shard(2)])
        c1.backward(dgrad)
        c2.backward(grad)
        torch.testing.assert_close(da.grad.full_tensor(), a2.grad, atol=atol, rtol=rtol)
        torch.testing.assert_close(db.grad.full_tensor(), b2.grad, atol=atol, rtol=rtol)
    finally:
        _done()


def placements_body(rank, world_size, file_name):
    """opreg's own cases: norms run locally on row shards and replicas (DTensor out, weight
    gradients reduced), glu ops on any Shard/Replicate placement, Partial refused by name."""
    import opreg
    from torch.distributed.tensor import Partial, Replicate, Shard, DTensor, distribute_tensor
    import opreg.torch as otorch
    device, mesh = _init(rank, world_size, file_name)
    try:
        torch.manual_seed(1)
        x = torch.randn(5, 6, 64, device=device)
        w = torch.randn(64, device=device)
        b = torch.randn(64, device=device)
        g = torch.randn(5, 6, 64, device=device)
        for t in (x, w, b, g):
            torch.distributed.broadcast(t, src=0)

        def ref(fn, *params):
            xs = x.clone().requires_grad_()
            ps = [p.clone().requires_grad_() for p in params]
            out = fn(xs, *ps)
            out.backward(g)
            return out.detach(), xs.grad, [p.grad for p in ps]

        cases = {
            "rms_norm": lambda X, W: otorch.LigerRMSNormFunction.apply(X, W, 1e-6, 0.0, "llama", False),
            "layer_norm": lambda X, W, B: otorch.LigerLayerNormFunction.apply(X, W, B, 1e-5),
        }
        params = {"rms_norm": (w,), "layer_norm": (w, b)}
        for name, fn in cases.items():
            want, want_dx, want_dp = ref(fn, *params[name])
            for placement in (Shard(0), Shard(1), Replicate()):
                for dtensor_params in (False, True):
                    xs = distribute_tensor(x.clone(), mesh, [placement]).requires_grad_()
                    ps = [(distribute_tensor(p.clone(), mesh, [Replicate()]) if dtensor_params else p.clone())
                          .requires_grad_() for p in params[name]]
                    out = fn(xs, *ps)
                    what = f"{name} {placement} dtensor_params={dtensor_params}"
                    assert isinstance(out, DTensor) and tuple(out.placements) == (placement,), what
                    torch.testing.assert_close(out.full_tensor(), want, atol=1e-5, rtol=1e-5, msg=what)
                    out.backward(distribute_tensor(g, mesh, [placement]))
                    assert isinstance(xs.grad, DTensor), what
                    torch.testing.assert_close(xs.grad.full_tensor(), want_dx, atol=1e-5, rtol=1e-5, msg=what)
                    for p, want_p in zip(ps, want_dp):
                        got = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
                        torch.testing.assert_close(got, want_p, atol=1e-4, rtol=1e-5, msg=what + " param grad")

        for name, fn in (("swiglu", otorch.LigerSiLUMulFunction.apply), ("geglu", otorch.LigerGELUMulFunction.apply)):
            ys = g.clone()
            a1, b1 = x.clone().requires_grad_(), ys.clone().requires_grad_()
            want = fn(a1, b1)
            want.backward(g)
            for placement in (Shard(0), Shard(1), Shard(2), Replicate()):
                a2 = distribute_tensor(x.clone(), mesh, [placement]).requires_grad_()
                b2 = distribute_tensor(ys.clone(), mesh, [placement]).requires_grad_()
                out = fn(a2, b2)
                what = f"{name} {placement}"
                assert isinstance(out, DTensor) and tuple(out.placements) == (placement,), what
                torch.testing.assert_close(out.full_tensor(), want.detach(), atol=1e-5, rtol=1e-5, msg=what)
                out.backward(distribute_tensor(g, mesh, [placement]))
                torch.testing.assert_close(a2.grad.full_tensor(), a1.grad, atol=1e-5, rtol=1e-5, msg=what)
                torch.testing.assert_close(b2.grad.full_tensor(), b1.grad, atol=1e-5, rtol=1e-5, msg=what)

        partial = DTensor.from_local(x.clone(), mesh, [Partial()], run_check=False)
        for fn, args in ((otorch.LigerSiLUMulFunction.apply, (partial, partial)),
                         (otorch.LigerRMSNormFunction.apply, (partial, w, 1e-6))):
            try:
                fn(*args)
            except opreg.InvalidArgumentError as e:
                assert "Partial" in str(e), str(e)
            else:
                raise AssertionError("a Partial DTensor was not refused")
    finally:
        _done()
