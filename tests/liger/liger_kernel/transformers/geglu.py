"""liger_kernel.transformers.geglu, on opreg's kernels."""
from opreg.torch import LigerGEGLUMLP, LigerGEGLUMLPForGemma4  # noqa: F401
