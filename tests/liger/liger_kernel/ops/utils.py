"""liger_kernel.ops.utils: the helpers a caller of Liger's ops may use."""
import functools

import torch

from ..utils import infer_device  # noqa: F401


def ensure_contiguous(fn):
    """Makes every tensor argument contiguous before calling fn."""
    @functools.wraps(fn)
    def wrapper(ctx, *args, **kwargs):
        args = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]
        kwargs = {k: (v.contiguous() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        return fn(ctx, *args, **kwargs)
    return wrapper
