"""liger_kernel.transformers.layer_norm, on opreg's kernels."""
from opreg.torch import LigerLayerNorm  # noqa: F401
