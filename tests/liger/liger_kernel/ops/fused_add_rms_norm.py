"""liger_kernel.ops.fused_add_rms_norm, on opreg's kernels."""
from opreg.torch import LigerFusedAddRMSNormFunction  # noqa: F401
