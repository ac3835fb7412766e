"""liger_kernel.ops.geglu, on opreg's kernels."""
from opreg.torch import LigerGELUMulFunction  # noqa: F401
