"""What needs torch >= 2.4 (torch.library custom ops, opcheck, torch.compile) or CUDA (the caller's
stream, CUDA graph capture, torch's allocator for outputs and opreg's scratch). Skipped with the reason on Debian's torch 1.13 and
without a GPU; run on the GPU machine (docs/python.md says how)."""
import pytest
import torch

import opreg
import opreg.torch as otorch
from opreg.torch import _kernels as K
from conftest import CUDA_SKIP, CUSTOM_OP_SKIP, DEVICES, assert_close

OPCHECK_ARGS = {
    "rms_norm_fwd": lambda d: (torch.randn(3, 32, device=d), torch.randn(32, device=d), 1e-6, 0.0, "llama"),
    "rms_norm_bwd": lambda d: (torch.randn(3, 32, device=d), torch.randn(3, 32, device=d), torch.randn(32, device=d),
                               torch.rand(3, device=d) + 0.5, 0.0, "llama"),
    "fused_add_rms_norm_fwd": lambda d: (torch.randn(3, 32, device=d), torch.randn(3, 32, device=d),
                                         torch.randn(32, device=d), 1e-6, 0.0, "llama"),
    "layer_norm_fwd": lambda d: (torch.randn(3, 32, device=d), torch.randn(32, device=d), torch.randn(32, device=d),
                                 1e-5),
    "group_norm_fwd": lambda d: (torch.randn(2, 6, 5, device=d), torch.randn(6, device=d), torch.randn(6, device=d),
                                 3, 1e-5),
    "geglu_fwd": lambda d: (torch.randn(3, 8, device=d), torch.randn(3, 8, device=d)),
    "swiglu_fwd": lambda d: (torch.randn(3, 8, device=d), torch.randn(3, 8, device=d)),
    "swiglu_bwd": lambda d: (torch.randn(3, 8, device=d), torch.randn(3, 8, device=d), torch.randn(3, 8, device=d)),
}


@CUSTOM_OP_SKIP
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(OPCHECK_ARGS))
def test_custom_ops_pass_opcheck(device, name):
    assert f"opreg::{name}" in otorch.CUSTOM_OPS
    torch.library.opcheck(getattr(torch.ops.opreg, name).default, OPCHECK_ARGS[name](device))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = otorch.LigerRMSNorm(64, in_place=False)
        self.mlp = otorch.LigerSwiGLUMLP(type("C", (), {"hidden_size": 64, "intermediate_size": 128,
                                                       "hidden_act": "silu"}))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


@CUSTOM_OP_SKIP
@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_keeps_opregs_ops_in_one_graph(device):
    torch.manual_seed(0)
    model = Block().to(device)
    x = torch.randn(4, 64, device=device, requires_grad=True)
    compiled = torch.compile(model, fullgraph=True)
    y_eager, y_compiled = model(x), compiled(x)
    assert_close(y_compiled, y_eager, 1e-5, 1e-5, "compiled forward")
    g_eager = torch.autograd.grad(y_eager.sum(), x)[0]
    g_compiled = torch.autograd.grad(y_compiled.sum(), x)[0]
    assert_close(g_compiled, g_eager, 1e-5, 1e-5, "compiled backward")


@CUDA_SKIP
def test_cuda_runs_on_the_callers_stream():
    torch.manual_seed(0)
    x, w = torch.randn(256, 1024, device="cuda"), torch.randn(1024, device="cuda")
    want = otorch.functional.liger_rms_norm(x, w, 1e-6)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            got = otorch.functional.liger_rms_norm(x, w, 1e-6)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    assert torch.equal(got, want)
    y, rstd = torch.empty_like(x), torch.empty(256, device="cuda")
    with torch.cuda.stream(side):
        r = opreg.rms_norm_fwd(x, w, y, rstd, stream=side.cuda_stream)
    assert r.device == "cuda:0" and r.variant.startswith("cuda.") and not r.copied
    # A stream that is not current cannot be checked without the driver reading through it.
    with pytest.raises(opreg.InvalidArgumentError, match="cannot be checked without the CUDA driver"):
        opreg.rms_norm_fwd(x, w, y, rstd, stream=side.cuda_stream)


@CUDA_SKIP
def test_cuda_graph_capture_of_forward_and_backward():
    torch.manual_seed(0)
    m = otorch.LigerRMSNorm(1024, in_place=False).cuda()
    x = torch.randn(64, 1024, device="cuda", requires_grad=True)
    # One eager call on the current stream (the variant choice, CUDA's lazy module loading), none
    # on the capture's stream: opreg's scratch (dW partials) comes from torch's allocator, which
    # gives a capture blocks of the graph's pool (docs/python.md, Memory), so nothing of opreg's
    # needs to exist on that stream before.
    m(x).sum().backward()
    torch.cuda.synchronize()
    fresh = torch.cuda.Stream()
    fresh.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    x.grad = None
    m.weight.grad = None
    with torch.cuda.graph(g, stream=fresh):
        y = m(x)
        y.sum().backward()
    g.replay()
    torch.cuda.synchronize()
    x2 = x.detach().clone().requires_grad_()
    ref = otorch.LigerRMSNorm(1024, in_place=False).cuda()
    want = ref(x2)
    want.sum().backward()
    assert_close(y, want, 1e-5, 1e-5, "graph forward")
    assert_close(x.grad, x2.grad, 1e-5, 1e-5, "graph backward")
    assert_close(m.weight.grad, ref.weight.grad, 1e-4, 1e-4, "graph dweight")


def _rms_norm_bwd_problem():
    torch.manual_seed(0)
    rows, hidden = 256, 1024
    x, dy = torch.randn(rows, hidden, device="cuda"), torch.randn(rows, hidden, device="cuda")
    w, rstd = torch.randn(hidden, device="cuda"), torch.rand(rows, device="cuda") + 0.5
    return dy, x, w, rstd, torch.empty_like(x), torch.empty_like(w)


@CUDA_SKIP
def test_cuda_scratch_comes_from_torchs_allocator():
    dy, x, w, rstd, dx, dw = _rms_norm_bwd_problem()
    stream = torch.cuda.current_stream().cuda_stream
    opreg.rms_norm_bwd(dy, x, w, rstd, dx, dw, stream=stream)  # the variant choice is made
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()
    # Every output is given, so the only allocation torch sees is opreg's dW partials.
    r = opreg.rms_norm_bwd(dy, x, w, rstd, dx, dw, stream=stream)
    torch.cuda.synchronize()
    after = torch.cuda.memory_stats()
    assert r.variant.startswith("cuda.") and not r.fell_back and not r.copied
    assert after["allocation.all.allocated"] > before["allocation.all.allocated"], r.variant
    # ... and it went back at once (torch keeps it cached for the stream's next use).
    assert after["allocation.all.current"] == before["allocation.all.current"]
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    xr = x.detach().clone().requires_grad_()
    wr = w.detach().clone().requires_grad_()
    y = xr * rstd[:, None] * wr
    y.backward(dy)
    assert_close(dw, wr.grad, 1e-3, 1e-3, "dweight")


@CUDA_SKIP
def test_cuda_outputs_come_from_torchs_allocator():
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    x, w = torch.randn(128, 4096, device="cuda"), torch.randn(4096, device="cuda")
    y = otorch.functional.liger_rms_norm(x, w, 1e-6)
    # x, w and y (allocated by opreg.torch with torch) all show in torch's statistics.
    assert torch.cuda.memory_allocated() - before >= (x.numel() + w.numel() + y.numel()) * 4
    assert y.device.type == "cuda"


@CUDA_SKIP
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_liger_geglu_is_eager_bit_for_bit(dtype):
    """The Liger face's geglu (rounding="torch") gives eager's bits on CUDA: gelu(a, 'tanh') rounded
    to the dtype, times b; its backward as eager's autograd of that expression. Liger's own geglu
    test compares an MLP with unscaled randn weights at 1e-2, where one bf16 ulp of the activation
    shows (docs/python.md)."""
    g = torch.Generator(device="cuda").manual_seed(7)
    a = (torch.randn(4096, 1031, device="cuda", generator=g) * 6).to(dtype).requires_grad_()
    b = torch.randn(4096, 1031, device="cuda", generator=g).to(dtype).requires_grad_()
    dc = torch.randn(4096, 1031, device="cuda", generator=g).to(dtype)
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    c = otorch.LigerGELUMulFunction.apply(a, b)
    c.backward(dc)
    c2 = torch.nn.functional.gelu(a2, approximate="tanh") * b2
    c2.backward(dc)
    for name, got, want in (("c", c, c2), ("da", a.grad, a2.grad), ("db", b.grad, b2.grad)):
        differ = (got != want).sum().item()
        assert differ == 0, f"{name}: {differ} of {got.numel()} elements differ from eager"
