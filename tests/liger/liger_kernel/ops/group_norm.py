"""liger_kernel.ops.group_norm, on opreg's kernels."""
from opreg.torch import LigerGroupNormFunction  # noqa: F401
