"""liger_kernel.ops: the autograd functions, on opreg's kernels."""
from opreg.torch import (  # noqa: F401
    LigerFusedAddRMSNormFunction,
    LigerGELUMulFunction,
    LigerGroupNormFunction,
    LigerLayerNormFunction,
    LigerRMSNormFunction,
    LigerSiLUMulFunction,
)
