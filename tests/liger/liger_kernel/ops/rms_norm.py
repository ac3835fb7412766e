"""liger_kernel.ops.rms_norm, on opreg's kernels."""
from opreg.torch import LigerRMSNormFunction  # noqa: F401
