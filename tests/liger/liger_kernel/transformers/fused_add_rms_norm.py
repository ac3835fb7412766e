"""liger_kernel.transformers.fused_add_rms_norm, on opreg's kernels."""
from opreg.torch import LigerFusedAddRMSNorm  # noqa: F401
