"""opreg.torch: opreg's kernels for PyTorch, shaped like Liger-Kernel's.

    from opreg.torch import LigerRMSNorm      # instead of: from liger_kernel.transformers import LigerRMSNorm

Autograd functions (opreg.torch.LigerRMSNormFunction, ..., LigerRopeFunction and its
liger_rotary_pos_emb), nn.Modules (LigerRMSNorm,
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
from .functional import liger_rotary_pos_emb
from .functions import *  # noqa: F401,F403 (functions.__all__)
from .modules import *  # noqa: F401,F403 (modules.__all__)

_opreg.follow_torch_threads()

from . import functions as _functions, modules as _modules  # noqa: E402

__all__ = _functions.__all__ + _modules.__all__ + [
    "functional", "apply_to", "liger_rotary_pos_emb", "HAS_CUSTOM_OP", "CUSTOM_OP_SKIP_REASON", "CUSTOM_OPS"]
