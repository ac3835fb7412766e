"""liger_kernel.transformers.group_norm, on opreg's kernels."""
from opreg.torch import LigerGroupNorm  # noqa: F401
