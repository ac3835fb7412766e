"""liger_kernel.ops.swiglu, on opreg's kernels."""
from opreg.torch import LigerSiLUMulFunction  # noqa: F401
