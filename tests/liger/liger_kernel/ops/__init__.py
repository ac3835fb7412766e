"""liger_kernel.ops: the autograd functions, on opreg's kernels."""
from opreg.torch.functions import *  # noqa: F401,F403 (the six autograd functions)
