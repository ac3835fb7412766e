"""liger_kernel.transformers: the nn.Modules, on opreg's kernels."""
from opreg.torch import (  # noqa: F401
    LigerBlockSparseTop2MLP,
    LigerExperts,
    LigerFalconH1SwiGLUMLP,
    LigerFusedAddRMSNorm,
    LigerGEGLUMLP,
    LigerGEGLUMLPForGemma4,
    LigerGroupNorm,
    LigerLayerNorm,
    LigerPhi3SwiGLUMLP,
    LigerRMSNorm,
    LigerSwiGLUMLP,
)
