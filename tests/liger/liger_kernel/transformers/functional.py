"""liger_kernel.transformers.functional, on opreg's kernels."""
from opreg.torch.functional import (  # noqa: F401
    liger_fused_add_rms_norm,
    liger_geglu,
    liger_group_norm,
    liger_layer_norm,
    liger_rms_norm,
    liger_rope,
    liger_swiglu,
)
