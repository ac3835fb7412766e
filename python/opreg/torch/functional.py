"""The functional forms of liger_kernel.transformers.functional, on opreg's kernels."""
from .functions import *  # noqa: F401,F403 (functions.__all__: the autograd functions)


def liger_rms_norm(X, W, eps, offset: float = 0.0, casting_mode: str = "llama", in_place: bool = True):
    return LigerRMSNormFunction.apply(X, W, eps, offset, casting_mode, in_place)


def liger_fused_add_rms_norm(X, R, W, eps, offset: float = 0.0, casting_mode: str = "llama", in_place: bool = True):
    return LigerFusedAddRMSNormFunction.apply(X, R, W, eps, offset, casting_mode, in_place)


def liger_layer_norm(X, W, B, eps):
    return LigerLayerNormFunction.apply(X, W, B, eps)


def liger_group_norm(X, affine_scaling_weight, affine_shifting_bias, num_channels, num_groups, eps):
    return LigerGroupNormFunction.apply(X, affine_scaling_weight, affine_shifting_bias, num_channels, num_groups, eps)


def liger_geglu(a, b):
    return LigerGELUMulFunction.apply(a, b)


def liger_swiglu(a, b):
    return LigerSiLUMulFunction.apply(a, b)


def liger_rope(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    return LigerRopeFunction.apply(q, k, cos, sin, position_ids, unsqueeze_dim)


def liger_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    """liger_kernel.transformers.rope.liger_rotary_pos_emb: HF's apply_rotary_pos_emb's
    signature (position_ids and unsqueeze_dim ignored), on opreg's rope."""
    return LigerRopeFunction.apply(q, k, cos, sin, position_ids, unsqueeze_dim)
