"""liger_kernel.ops.layer_norm, on opreg's kernels."""
from opreg.torch import LigerLayerNormFunction  # noqa: F401
