"""Liger-Kernel's semantics where they differ from opreg's C++ API: an RMSNorm without a weight
ignores its offset (Liger computes y = x * rstd there; opreg's C++ API refuses an offset without
a weight, and opreg.torch's Liger face passes 0), forward and backward, through the autograd
functions, the functional forms and the modules."""
import pytest
import torch

import opreg
import opreg.torch as otorch
import formulas as ref
from conftest import DEVICES, assert_close

F = otorch.functional
TOL = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-1, 2e-2)}


def _leaf(*shape, dtype, device):
    return torch.randn(*shape).to(dtype).to(device).requires_grad_()


def _check(got, want, inputs_got, inputs_want, dtype, what):
    for g, w in zip(got, want):
        assert_close(g, w, *TOL[dtype], what=f"{what} forward")
    grads = [torch.randn_like(g) for g in got]
    dg = torch.autograd.grad(got, inputs_got, [g.clone() for g in grads])
    dw = torch.autograd.grad(want, inputs_want, grads)
    for i, (a, b) in enumerate(zip(dg, dw)):
        assert_close(a, b, *TOL[dtype], what=f"{what} grad {i}")


def _copy(t):
    return t.detach().clone().requires_grad_()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("casting", ["llama", "gemma", "none"])
@pytest.mark.parametrize("how", ["function", "functional", "module"])
@pytest.mark.parametrize("in_place", [True, False])
def test_rms_norm_without_weight_ignores_offset(device, dtype, casting, how, in_place):
    x = _leaf(3, 5, 64, dtype=dtype, device=device)
    x2 = _copy(x)
    if how == "function":
        y = otorch.LigerRMSNormFunction.apply(x, None, 1e-6, 1.0, casting, in_place)
    elif how == "functional":
        y = F.liger_rms_norm(x, None, 1e-6, offset=1.0, casting_mode=casting, in_place=in_place)
    else:
        m = otorch.LigerRMSNorm(64, eps=1e-6, offset=1.0, casting_mode=casting, in_place=in_place,
                                elementwise_affine=False).to(device)
        assert m.weight is None
        y = m(x)
    _check([y], [ref.rms_norm(x2, None, 1e-6)], [x], [x2], dtype, f"rms_norm {how} no weight, offset 1")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("how", ["function", "functional"])
@pytest.mark.parametrize("in_place", [True, False])
def test_fused_add_rms_norm_without_weight_ignores_offset(device, dtype, how, in_place):
    x, r = _leaf(4, 96, dtype=dtype, device=device), _leaf(4, 96, dtype=dtype, device=device)
    x2, r2 = _copy(x), _copy(r)
    if how == "function":
        y, s = otorch.LigerFusedAddRMSNormFunction.apply(x, r, None, 1e-6, 1.0, "llama", in_place)
    else:
        y, s = F.liger_fused_add_rms_norm(x, r, None, 1e-6, offset=1.0, in_place=in_place)
    y2, s2 = ref.fused_add_rms_norm(x2, r2, None, 1e-6)
    _check([y, s], [y2, s2], [x, r], [x2, r2], dtype, f"fused_add_rms_norm {how} no weight, offset 1")


def test_the_c_api_still_refuses_an_offset_without_weight():
    x = torch.randn(2, 8)
    with pytest.raises(opreg.InvalidArgumentError, match="without a weight"):
        opreg.rms_norm_fwd(x, None, torch.empty_like(x), torch.empty(2), eps=1e-6, offset=1.0)


@pytest.mark.parametrize("offset", [0.0, 1.0])
def test_rms_norm_with_weight_keeps_offset(offset):
    x, w = _leaf(3, 64, dtype=torch.float32, device="cpu"), _leaf(64, dtype=torch.float32, device="cpu")
    x2, w2 = _copy(x), _copy(w)
    y = otorch.LigerRMSNormFunction.apply(x, w, 1e-6, offset, "gemma", False)
    _check([y], [ref.rms_norm(x2, w2, 1e-6, offset, "gemma")], [x, w], [x2, w2], torch.float32, "rms_norm offset")
