"""liger_kernel.transformers.rms_norm, on opreg's kernels."""
from opreg.torch import LigerRMSNorm  # noqa: F401
