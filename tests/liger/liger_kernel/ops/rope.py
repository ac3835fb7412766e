"""liger_kernel.ops.rope, on opreg's kernels."""
from opreg.torch import LigerRopeFunction  # noqa: F401
