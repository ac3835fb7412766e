"""opreg.torch: opreg's kernels for PyTorch, shaped like Liger-Kernel's.

    from opreg.torch import LigerRMSNorm      # instead of: from liger_kernel.transformers import LigerRMSNorm

Autograd functions (opreg.torch.LigerRMSNormFunction, ...), nn.Modules (LigerRMSNorm,
LigerFusedAddRMSNorm, LigerLayerNorm, LigerGroupNorm, LigerSwiGLUMLP, LigerGEGLUMLP,
LigerGEGLUMLPForGemma4, LigerPhi3SwiGLUMLP, LigerBlockSparseTop2MLP, LigerExperts,
LigerFalconH1SwiGLUMLP), the
functional forms (opreg.torch.functional) and apply_to(model). Importing it makes opreg's cpu
threads follow torch.get_num_threads() unless OPREG_NUM_THREADS is set.
"""
import opreg as _opreg

from . import functional
from ._kernels import CUSTOM_OP_SKIP_REASON, HAS_CUSTOM_OP, REGISTERED as CUSTOM_OPS
from .apply import apply_to
from .functions import (
    LigerFusedAddRMSNormFunction,
    LigerGELUMulFunction,
    LigerGroupNormFunction,
    LigerLayerNormFunction,
    LigerRMSNormFunction,
    LigerSiLUMulFunction,
)
from .modules import (
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

_opreg.follow_torch_threads()

__all__ = [
    "LigerRMSNormFunction", "LigerFusedAddRMSNormFunction", "LigerLayerNormFunction", "LigerGroupNormFunction",
    "LigerGELUMulFunction", "LigerSiLUMulFunction", "LigerRMSNorm", "LigerFusedAddRMSNorm", "LigerLayerNorm",
    "LigerGroupNorm", "LigerSwiGLUMLP", "LigerGEGLUMLP", "LigerGEGLUMLPForGemma4", "LigerPhi3SwiGLUMLP",
    "LigerBlockSparseTop2MLP", "LigerExperts", "LigerFalconH1SwiGLUMLP", "functional", "apply_to", "HAS_CUSTOM_OP",
    "CUSTOM_OP_SKIP_REASON", "CUSTOM_OPS",
]
