"""liger_kernel.transformers.rope, on opreg's kernels."""
from opreg.torch.functional import liger_rotary_pos_emb  # noqa: F401
