"""opreg.torch's autograd functions against plain PyTorch formulas: forward and gradients, every
dtype, f32 gradients against autograd of the f64 formula, in-place, no-weight, offset and casting
cases, bad inputs. Tolerances are at most Liger-Kernel's own tests' for the same op."""
import pytest
import torch

import opreg
import opreg.torch as otorch
import formulas as ref
from conftest import DEVICES, assert_close

F = otorch.functional
# (atol, rtol): Liger's rms_norm and fused_add_rms_norm tests use (1e-4, 1e-6) f32 and (2e-1, 2e-2) bf16;
# layer_norm (1e-5, 1e-5) and (2e-2, 2e-2); group_norm (1e-4, 1e-4) f32; geglu (1e0, 2e-6) f32 and (1e-2,
# 1e-2) bf16; swiglu (1e0, 1e-5) f32 and (1e4, 1e-2) bf16. Tighter here wherever the kernels allow it.
TOL = {
    "rms_norm": {torch.float32: (1e-4, 1e-6), torch.bfloat16: (2e-1, 2e-2), torch.float16: (2e-2, 2e-3)},
    "layer_norm": {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3)},
    "group_norm": {torch.float32: (1e-4, 1e-4), torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3)},
    "glu": {torch.float32: (1e-5, 2e-6), torch.bfloat16: (1e-2, 1e-2), torch.float16: (2e-3, 2e-3)},
    # Liger's rope test: (1e-5, 1e-5) f32 and (1e-1, 1e-5) bf16.
    "rope": {torch.float32: (1e-5, 1e-5), torch.bfloat16: (3e-2, 1e-2), torch.float16: (4e-3, 2e-3)},
}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def leaf(*shape, dtype=torch.float32, device="cpu", scale=1.0, shift=0.0):
    return (torch.randn(*shape, dtype=torch.float32) * scale + shift).to(dtype).to(device).requires_grad_()


def check_grads(outs_got, outs_want, inputs_got, inputs_want, tol, what):
    for o_got, o_want in zip(outs_got, outs_want):
        assert_close(o_got, o_want, *tol, what=f"{what} forward")
    grads = [torch.randn_like(o_got) for o_got in outs_got]
    # A clone: in_place=True backward writes the input gradient into the incoming gradient, as Liger's does.
    got = torch.autograd.grad(outs_got, inputs_got, [g.clone() for g in grads])
    want = torch.autograd.grad(outs_want, inputs_want, [g.to(o.dtype) for g, o in zip(grads, outs_want)])
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, *tol, what=f"{what} grad {i}")


def copies(*ts, dtype=None):
    return [t.detach().clone().to(dtype or t.dtype).requires_grad_() for t in ts]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("casting, offset", [("llama", 0.0), ("gemma", 1.0), ("none", 0.0)])
@pytest.mark.parametrize("in_place", [True, False])
def test_rms_norm(device, dtype, casting, offset, in_place):
    torch.manual_seed(0)
    x, w = leaf(2, 3, 96, dtype=dtype, device=device), leaf(96, dtype=dtype, device=device, shift=1.0)
    x2, w2 = copies(x, w)
    y = otorch.LigerRMSNormFunction.apply(x, w, 1e-6, offset, casting, in_place)
    check_grads([y], [ref.rms_norm(x2, w2, 1e-6, offset, casting)], [x, w], [x2, w2], TOL["rms_norm"][dtype],
                f"rms_norm {casting}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_without_weight_and_module(dtype):
    torch.manual_seed(1)
    x = leaf(5, 64, dtype=dtype)
    (x2,) = copies(x)
    check_grads([F.liger_rms_norm(x, None, 1e-5)], [ref.rms_norm(x2, None, 1e-5)], [x], [x2],
                TOL["rms_norm"][dtype], "rms_norm no weight")
    m = otorch.LigerRMSNorm(64, eps=1e-5, elementwise_affine=False)
    assert m.weight is None and list(m.state_dict()) == []
    assert_close(m(x.detach()), ref.rms_norm(x2.detach(), None, 1e-5), *TOL["rms_norm"][dtype], what="module")


def test_rms_norm_gemma_module_offset_with_zero_init():
    m = otorch.LigerRMSNorm(32, offset=1.0, casting_mode="gemma", init_fn="zeros")
    x = torch.randn(3, 32)
    assert_close(m(x), ref.rms_norm(x, torch.zeros(32), 1e-6, 1.0, "gemma"), 1e-5, 1e-5, "gemma")
    assert list(m.state_dict()) == ["weight"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("in_place", [True, False])
def test_fused_add_rms_norm(device, dtype, in_place):
    torch.manual_seed(2)
    x, r = leaf(4, 80, dtype=dtype, device=device), leaf(4, 80, dtype=dtype, device=device)
    w = leaf(80, dtype=dtype, device=device, shift=1.0)
    x2, r2, w2 = copies(x, r, w)
    y, s = otorch.LigerFusedAddRMSNormFunction.apply(x, r, w, 1e-6, 0.0, "llama", in_place)
    y2, s2 = ref.fused_add_rms_norm(x2, r2, w2, 1e-6)
    check_grads([y, s], [y2, s2], [x, r, w], [x2, r2, w2], TOL["rms_norm"][dtype], "fused_add_rms_norm")
    m = otorch.LigerFusedAddRMSNorm(80).to(device=device, dtype=dtype)
    assert list(m.state_dict()) == ["weight"]
    ym, sm = m(x.detach(), r.detach())
    assert ym.shape == x.shape and sm.shape == x.shape


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(device, dtype, affine):
    torch.manual_seed(3)
    x = leaf(3, 7, 48, dtype=dtype, device=device)
    w = leaf(48, dtype=dtype, device=device, shift=1.0) if affine else None
    b = leaf(48, dtype=dtype, device=device) if affine else None
    x2, = copies(x)
    w2, b2 = (copies(w, b) if affine else (None, None))
    y = F.liger_layer_norm(x, w, b, 1e-5)
    params = [p for p in (w, b) if p is not None]
    params2 = [p for p in (w2, b2) if p is not None]
    check_grads([y], [ref.layer_norm(x2, w2, b2, 1e-5)], [x] + params, [x2] + params2,
                TOL["layer_norm"][dtype], "layer_norm")


def test_layer_norm_module_matches_liger_state_dict():
    m = otorch.LigerLayerNorm(16, eps=1e-6, bias=True)
    assert list(m.state_dict()) == ["weight", "bias"]
    x = torch.randn(2, 16)
    assert_close(m(x), ref.layer_norm(x, m.weight.detach(), m.bias.detach(), 1e-6), 1e-5, 1e-5, "module")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, groups", [((2, 6, 10), 3), ((3, 8, 4, 5), 2), ((1, 4, 7), 4)])
def test_group_norm(device, dtype, shape, groups):
    torch.manual_seed(4)
    c = shape[1]
    x, w, b = leaf(*shape, dtype=dtype, device=device), leaf(c, dtype=dtype, device=device, shift=1.0), \
        leaf(c, dtype=dtype, device=device)
    x2, w2, b2 = copies(x, w, b)
    y = F.liger_group_norm(x, w, b, c, groups, 1e-5)
    check_grads([y], [ref.group_norm(x2, w2, b2, groups, 1e-5)], [x, w, b], [x2, w2, b2],
                TOL["group_norm"][dtype], "group_norm")
    m = otorch.LigerGroupNorm(c, groups, eps=1e-5)
    assert list(m.state_dict()) == ["weight", "bias"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["geglu", "swiglu"])
def test_glu(device, dtype, kind):
    torch.manual_seed(5)
    a, b = leaf(2, 5, 72, dtype=dtype, device=device), leaf(2, 5, 72, dtype=dtype, device=device)
    a2, b2 = copies(a, b)
    fn = F.liger_geglu if kind == "geglu" else F.liger_swiglu
    check_grads([fn(a, b)], [getattr(ref, kind)(a2, b2)], [a, b], [a2, b2], TOL["glu"][dtype], kind)


def test_swiglu_multipliers():
    torch.manual_seed(6)
    a, b = leaf(3, 16), leaf(3, 16)
    a2, b2 = copies(a, b)
    c = otorch.LigerSiLUMulFunction.apply(a, b, 0.5, 2.0)
    check_grads([c], [torch.nn.functional.silu(a2 * 0.5) * b2 * 2.0], [a, b], [a2, b2], (1e-5, 1e-5), "multipliers")


def _hf_q(b, h, t, d, dtype, device):
    # HF's layout: q_proj(x).view(B, T, H, D).transpose(1, 2), a strided view.
    return (torch.randn(b, t, h, d) * 1.5).to(dtype).to(device).transpose(1, 2).requires_grad_()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("b, t, hq, hk, d, batched", [(2, 9, 4, 2, 64, False), (3, 5, 3, 7, 92, True),
                                                     (1, 1, 2, 1, 8, False)])
def test_rope_is_hfs_apply_rotary_pos_emb(device, dtype, b, t, hq, hk, d, batched):
    torch.manual_seed(9)
    q, k = _hf_q(b, hq, t, d, dtype, device), _hf_q(b, hk, t, d, dtype, device)
    cos, sin = (x.to(device) for x in ref.rope_tables(b if batched else 1, t, d, dtype))
    q2, k2 = copies(q, k)
    got = otorch.liger_rotary_pos_emb(q, k, cos, sin)
    assert got[0].stride() == q.stride()  # written in HF's layout, not copied to another
    check_grads(list(got), list(ref.rope(q2, k2, cos, sin)), [q, k], [q2, k2], TOL["rope"][dtype], "rope")


def test_rope_odd_head_dim_passes_the_last_element_through():
    """Liger's kernel rotates pairs (i, i + D // 2) for i < D // 2 and leaves element D - 1 alone."""
    torch.manual_seed(10)
    b, t, h, d = 2, 5, 3, 41
    q, k = leaf(b, h, t, d), leaf(b, 1, t, d)
    cos, sin = ref.rope_tables(1, t, d + 1)  # HF's tables for an odd dim hold D + 1 entries
    q2, k2 = copies(q, k)
    half = d // 2
    c, s = cos[..., :half].repeat(1, 1, 2), sin[..., :half].repeat(1, 1, 2)
    want = [torch.cat(ref.rope(x[..., : 2 * half], x[..., : 2 * half], c, s)[:1] + (x[..., -1:],), dim=-1)
            for x in (q2, k2)]
    check_grads(list(F.liger_rope(q, k, cos, sin)), want, [q, k], [q2, k2], TOL["rope"][torch.float32], "odd rope")


def test_rope_ignores_position_ids_and_unsqueeze_dim_as_liger_does():
    torch.manual_seed(11)
    q, k = leaf(1, 2, 4, 8), leaf(1, 2, 4, 8)
    cos, sin = ref.rope_tables(1, 4, 8)
    plain = otorch.LigerRopeFunction.apply(q, k, cos, sin)
    given = otorch.LigerRopeFunction.apply(q, k, cos, sin, torch.tensor([[3, 2, 1, 0]]), 2)
    assert all(torch.equal(a, b) for a, b in zip(plain, given))


# ---- f32 gradients against autograd of the f64 formula, on small shapes.
F64_CASES = {
    "rms_norm": (lambda x, w: F.liger_rms_norm(x, w, 1e-6, 0.5, "llama", False),
                 lambda x, w: ref.rms_norm(x, w, 1e-6, 0.5), [(3, 17), (17,)]),
    "fused_add_rms_norm": (lambda x, r, w: F.liger_fused_add_rms_norm(x, r, w, 1e-6, 0.0, "llama", False)[0],
                           lambda x, r, w: ref.fused_add_rms_norm(x, r, w, 1e-6)[0], [(3, 17), (3, 17), (17,)]),
    "layer_norm": (lambda x, w, b: F.liger_layer_norm(x, w, b, 1e-5),
                   lambda x, w, b: ref.layer_norm(x, w, b, 1e-5), [(4, 19), (19,), (19,)]),
    "group_norm": (lambda x, w, b: F.liger_group_norm(x, w, b, 6, 3, 1e-5),
                   lambda x, w, b: ref.group_norm(x, w, b, 3, 1e-5), [(2, 6, 5), (6,), (6,)]),
    "geglu": (F.liger_geglu, ref.geglu, [(3, 11), (3, 11)]),
    "swiglu": (F.liger_swiglu, ref.swiglu, [(3, 11), (3, 11)]),
    "rope": (lambda q, k: torch.cat([o.flatten() for o in F.liger_rope(q, k, *ref.rope_tables(1, 5, 6))]),
             lambda q, k: torch.cat([o.flatten() for o in ref.rope(q, k, *ref.rope_tables(1, 5, 6, torch.float64))]),
             [(2, 3, 5, 6), (2, 1, 5, 6)]),
}


@pytest.mark.parametrize("op", list(F64_CASES))
def test_f32_gradients_against_f64_autograd(op):
    torch.manual_seed(7)
    fn, formula, shapes = F64_CASES[op]
    inputs = [leaf(*s) for s in shapes]
    wide = copies(*inputs, dtype=torch.float64)
    check_grads([fn(*inputs)], [formula(*wide)], inputs, wide, (1e-5, 1e-5), op)


def test_in_place_backward_writes_the_input_gradient_into_dy():
    from opreg.torch import _kernels as K
    x, w = torch.randn(4, 32), torch.randn(32)
    y, rstd = K.rms_norm_fwd(x, w, 1e-6, 0.0, "llama")
    dy = torch.randn(4, 32)
    dx, dw = K.rms_norm_bwd(dy.clone(), x, w, rstd, 0.0, "llama")
    dy_buffer = dy.clone()
    dw2 = K.rms_norm_bwd_inplace(dy_buffer, x, w, rstd, 0.0, "llama")
    assert torch.equal(dy_buffer, dx) and torch.equal(dw, dw2)


def test_bad_inputs_raise_opreg_errors_naming_the_op():
    x = torch.randn(4, 32)
    with pytest.raises(opreg.InvalidArgumentError, match="rms_norm.fwd"):
        F.liger_rms_norm(x, torch.randn(31), 1e-6)
    with pytest.raises(opreg.InvalidArgumentError, match="casting mode 'bogus'"):
        F.liger_rms_norm(x, torch.randn(32), 1e-6, casting_mode="bogus")
    with pytest.raises(opreg.InvalidArgumentError, match="f64"):
        F.liger_layer_norm(x.double(), None, None, 1e-5)
    with pytest.raises(opreg.InvalidArgumentError, match="group_norm.fwd"):
        F.liger_group_norm(torch.randn(2, 6, 4), torch.ones(6), torch.zeros(6), 6, 4, 1e-5)
    with pytest.raises(opreg.InvalidArgumentError, match="swiglu.fwd"):
        F.liger_swiglu(torch.randn(2, 3), torch.randn(2, 4))
    with pytest.raises(ValueError, match="num_channels"):
        otorch.LigerGroupNorm(6, 4)
    with pytest.raises(opreg.InvalidArgumentError, match="rope.fwd: cos"):
        F.liger_rope(torch.randn(1, 2, 9, 8), torch.randn(1, 2, 9, 8), *ref.rope_tables(1, 4, 8))
    with pytest.raises(ValueError, match="activation"):
        otorch.LigerSwiGLUMLP(type("C", (), {"hidden_size": 4, "intermediate_size": 8, "hidden_act": "relu"}))
