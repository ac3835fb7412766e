"""torch.autograd.Functions with Liger-Kernel's names, argument order, defaults and return values
(liger_kernel.ops), running opreg's kernels on the tensors' device and torch's current stream.

Liger's own knobs that choose among its Triton kernels (row_mode) are accepted and have no effect:
opreg's registry chooses the variant. in_place=True writes the input gradient into dY, as Liger
does; geglu and swiglu return fresh gradients (Liger overwrites its saved inputs with them).
"""
import torch

from . import _dtensor as D
from . import _kernels as K


__all__ = ["LigerRMSNormFunction", "LigerFusedAddRMSNormFunction", "LigerLayerNormFunction", "LigerGroupNormFunction",
           "LigerGELUMulFunction", "LigerSiLUMulFunction", "LigerRopeFunction"]


def _casting(mode):
    # Liger also accepts its internal integer codes (0 llama, 1 gemma, -1 none).
    if isinstance(mode, int) and not isinstance(mode, bool):
        return {0: "llama", 1: "gemma", -1: "none"}.get(mode, str(mode))
    return mode


def _offset(offset, W):
    # Liger's semantics: without a weight there is no scale, so y = x * rstd and the offset has
    # nothing to offset (it is ignored). opreg's C++ API refuses an offset without a weight.
    return float(offset) if W is not None else 0.0


class LigerRMSNormFunction(torch.autograd.Function):
    """y = x * rstd * (offset + W); apply(X, W, eps, offset=0.0, casting_mode="llama",
    in_place=True, row_mode=None), W may be None (then y = x * rstd: the offset is ignored, as
    Liger does)."""

    @staticmethod
    def forward(ctx, X, W, eps, offset=0.0, casting_mode="llama", in_place=True, row_mode=None):
        casting = _casting(casting_mode)
        offset = _offset(offset, W)
        (X,), (W,), ctx.dist = D.enter("rms_norm", (X,), (W,), D.rows_last)
        Y, RSTD = K.rms_norm_fwd(X, W, float(eps), offset, casting)
        ctx.offset, ctx.casting_mode, ctx.in_place, ctx.row_mode = offset, casting, in_place, row_mode
        ctx.elementwise_affine = W is not None
        X = X.contiguous()
        if W is not None:
            ctx.save_for_backward(X, W, RSTD)
        else:
            ctx.save_for_backward(X, RSTD)
        return D.output(Y, ctx.dist)

    @staticmethod
    def backward(ctx, dY):
        if ctx.elementwise_affine:
            X, W, RSTD = ctx.saved_tensors
        else:
            (X, RSTD), W = ctx.saved_tensors, None
        dY = D.grad_in(dY, ctx.dist).contiguous()
        if ctx.in_place:
            dW = K.rms_norm_bwd_inplace(dY, X, W, RSTD, ctx.offset, ctx.casting_mode)
            dX = dY
        else:
            dX, dW = K.rms_norm_bwd(dY, X, W, RSTD, ctx.offset, ctx.casting_mode)
        dW = D.param_grad(dW, ctx.dist, 0) if W is not None else None
        return D.grad_out(dX, ctx.dist, 0), dW, None, None, None, None, None


class LigerFusedAddRMSNormFunction(torch.autograd.Function):
    """S = X + R, Y = rms_norm(S); apply(X, R, W, eps, offset=0.0, casting_mode="llama",
    in_place=False) returns (Y, S). W may be None (then the offset is ignored)."""

    @staticmethod
    def forward(ctx, X, R, W, eps, offset=0.0, casting_mode="llama", in_place=False):
        casting = _casting(casting_mode)
        offset = _offset(offset, W)
        (X, R), (W,), ctx.dist = D.enter("fused_add_rms_norm", (X, R), (W,), D.rows_last)
        Y, S, RSTD = K.fused_add_rms_norm_fwd(X, R, W, float(eps), offset, casting)
        ctx.offset, ctx.casting_mode, ctx.in_place = offset, casting, in_place
        ctx.has_weight = W is not None
        ctx.save_for_backward(S, W, RSTD)
        return D.output(Y, ctx.dist), D.output(S, ctx.dist)

    @staticmethod
    def backward(ctx, dY, dS_out):
        S, W, RSTD = ctx.saved_tensors
        dY, dS_out = D.grad_in(dY, ctx.dist).contiguous(), D.grad_in(dS_out, ctx.dist)
        if ctx.in_place:
            dW = K.fused_add_rms_norm_bwd_inplace(dY, dS_out, S, W, RSTD, ctx.offset, ctx.casting_mode)
            dX = dY
        else:
            dX, dW = K.fused_add_rms_norm_bwd(dY, dS_out, S, W, RSTD, ctx.offset, ctx.casting_mode)
        dW = D.param_grad(dW, ctx.dist, 0) if ctx.has_weight else None
        return D.grad_out(dX, ctx.dist, 0), D.grad_out(dX, ctx.dist, 1), dW, None, None, None, None, None


class LigerLayerNormFunction(torch.autograd.Function):
    """apply(X, W, B, eps); W and B may be None."""

    @staticmethod
    def forward(ctx, X, W, B, eps):
        (X,), (W, B), ctx.dist = D.enter("layer_norm", (X,), (W, B), D.rows_last)
        Y, Mean, RSTD = K.layer_norm_fwd(X, W, B, float(eps))
        ctx.save_for_backward(X.contiguous(), W, B, Mean, RSTD)
        return D.output(Y, ctx.dist)

    @staticmethod
    def backward(ctx, dY):
        X, W, B, Mean, RSTD = ctx.saved_tensors
        DX, DW, DB = K.layer_norm_bwd(D.grad_in(dY, ctx.dist), X, W, B, Mean, RSTD)
        DW = D.param_grad(DW, ctx.dist, 0) if W is not None else None
        DB = D.param_grad(DB, ctx.dist, 1) if B is not None else None
        return D.grad_out(DX, ctx.dist, 0), DW, DB, None


class LigerGroupNormFunction(torch.autograd.Function):
    """apply(X, affine_scaling_weight, affine_shifting_bias, num_channels, num_groups, eps) on X of
    shape (N, num_channels, spatial...)."""

    @staticmethod
    def forward(ctx, X, affine_scaling_weight, affine_shifting_bias, num_channels, num_groups, eps):
        if X.dim() < 2 or X.shape[1] != num_channels:
            raise ValueError(f"group_norm: X of shape {tuple(X.shape)} does not have num_channels={num_channels} "
                             "channels in dim 1; accepted: (N, num_channels, spatial...)")
        (X,), (W, B), ctx.dist = D.enter("group_norm", (X,), (affine_scaling_weight, affine_shifting_bias),
                                         D.rows_batch)
        Y, Mean, RSTD = K.group_norm_fwd(X, W, B, int(num_groups), float(eps))
        ctx.num_channels, ctx.num_groups = num_channels, int(num_groups)
        ctx.save_for_backward(X.contiguous(), W, B, Mean, RSTD)
        return D.output(Y, ctx.dist)

    @staticmethod
    def backward(ctx, dY):
        X, W, B, Mean, RSTD = ctx.saved_tensors
        DX, DW, DB = K.group_norm_bwd(D.grad_in(dY, ctx.dist), X, W, B, Mean, RSTD, ctx.num_groups)
        DW = D.param_grad(DW, ctx.dist, 0) if W is not None else None
        DB = D.param_grad(DB, ctx.dist, 1) if B is not None else None
        return D.grad_out(DX, ctx.dist, 0), DW, DB, None, None, None


class LigerGELUMulFunction(torch.autograd.Function):
    """c = gelu_tanh(a) * b; apply(a, b)."""

    @staticmethod
    def forward(ctx, a, b):
        a, b, ctx.dist = D.glu_enter("geglu", a, b)
        a, b = a.contiguous(), b.contiguous()
        c = K.geglu_fwd(a, b)
        ctx.save_for_backward(a, b)
        return D.output(c, ctx.dist)

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        da, db = K.geglu_bwd(D.grad_in(dc, ctx.dist), a, b)
        return D.grad_out(da, ctx.dist, 0), D.grad_out(db, ctx.dist, 1)


class LigerSiLUMulFunction(torch.autograd.Function):
    """c = silu(a * gate_multiplier) * b * down_multiplier; apply(a, b, gate_multiplier=1.0,
    down_multiplier=1.0). The multipliers, when not 1, are applied by torch around opreg's kernel."""

    @staticmethod
    def forward(ctx, a, b, gate_multiplier=1.0, down_multiplier=1.0):
        gate_multiplier, down_multiplier = float(gate_multiplier), float(down_multiplier)
        a, b, ctx.dist = D.glu_enter("swiglu", a, b)
        a, b = a.contiguous(), b.contiguous()
        gated = a if gate_multiplier == 1.0 else a * gate_multiplier
        c = K.swiglu_fwd(gated, b)
        if down_multiplier != 1.0:
            c = c * down_multiplier
        ctx.gate_multiplier, ctx.down_multiplier = gate_multiplier, down_multiplier
        ctx.save_for_backward(gated, b)
        return D.output(c, ctx.dist)

    @staticmethod
    def backward(ctx, dc):
        gated, b = ctx.saved_tensors
        dc = D.grad_in(dc, ctx.dist)
        if ctx.down_multiplier != 1.0:
            dc = dc * ctx.down_multiplier
        da, db = K.swiglu_bwd(dc, gated, b)
        if ctx.gate_multiplier != 1.0:
            da = da * ctx.gate_multiplier
        return D.grad_out(da, ctx.dist, 0), D.grad_out(db, ctx.dist, 1), None, None


class LigerRopeFunction(torch.autograd.Function):
    """q_out, k_out = apply(q, k, cos, sin, position_ids=None, unsqueeze_dim=1): rotary position
    embedding, HF's rotate_half pairing, of q [B, Hq, T, D] and k [B, Hk, T, D] by cos and sin
    [1 or B, T, D] (or [T, D]), of which the first D // 2 entries are read. position_ids and
    unsqueeze_dim are accepted and ignored, as Liger-Kernel and HF do (cos and sin arrive already
    gathered). The outputs are fresh tensors with the inputs' strides (Liger overwrites q and k)."""

    @staticmethod
    def forward(ctx, q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
        q_out, k_out = K.rope_fwd(q, k, cos, sin)
        ctx.save_for_backward(cos, sin)
        return q_out, k_out

    @staticmethod
    def backward(ctx, dq, dk):
        cos, sin = ctx.saved_tensors
        dq_in, dk_in = K.rope_bwd(dq, dk, cos, sin)
        return dq_in, dk_in, None, None, None, None
