"""liger_kernel.transformers: the nn.Modules, on opreg's kernels."""
from opreg.torch.modules import *  # noqa: F401,F403 (the nn.Modules)
