"""liger_kernel.transformers.swiglu, on opreg's kernels."""
from opreg.torch import LigerBlockSparseTop2MLP, LigerExperts, LigerFalconH1SwiGLUMLP, LigerPhi3SwiGLUMLP, LigerSwiGLUMLP  # noqa: F401
