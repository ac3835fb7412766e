"""Plain PyTorch formulas of opreg's ops (docs/ops.md), the oracle of the torch suites."""
import torch
import torch.nn.functional as F


def rms_norm(x, w, eps, offset=0.0, casting="llama"):
    dtype = x.dtype
    xf = x.float() if dtype != torch.float64 else x
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if w is None:
        return (xf * rstd).to(dtype)
    if casting == "gemma":
        return (xf * rstd * (offset + w.to(xf.dtype))).to(dtype)
    scale = (offset + w) if casting == "none" else (offset + w.to(xf.dtype))
    return ((xf * rstd).to(dtype) * scale).to(dtype)


def fused_add_rms_norm(x, r, w, eps, offset=0.0, casting="llama"):
    s = x + r
    return rms_norm(s, w, eps, offset, casting), s


def layer_norm(x, w, b, eps):
    return F.layer_norm(x.float() if x.dtype != torch.float64 else x, (x.shape[-1],),
                        None if w is None else w.to(torch.float64 if x.dtype == torch.float64 else torch.float32),
                        None if b is None else b.to(torch.float64 if x.dtype == torch.float64 else torch.float32),
                        eps).to(x.dtype)


def group_norm(x, w, b, groups, eps):
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    return F.group_norm(x.to(wide), groups, None if w is None else w.to(wide), None if b is None else b.to(wide),
                        eps).to(x.dtype)


def geglu(a, b):
    return F.gelu(a.float() if a.dtype != torch.float64 else a, approximate="tanh").to(a.dtype) * b


def swiglu(a, b):
    return F.silu(a.float() if a.dtype != torch.float64 else a).to(a.dtype) * b


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(q, k, cos, sin):
    """HF's apply_rotary_pos_emb (unsqueeze_dim 1), in f32 (f64 for f64 inputs), rounded once to
    q's dtype: opreg's rope with a full-width [1 or B, T, D] table whose halves are equal."""
    wide = torch.float64 if q.dtype == torch.float64 else torch.float32
    c, s = cos.to(wide).unsqueeze(1), sin.to(wide).unsqueeze(1)
    return tuple(((x.to(wide) * c) + (rotate_half(x.to(wide)) * s)).to(x.dtype) for x in (q, k))


def rope_tables(batch, seq, dim, dtype=torch.float32, base=10000.0, first=0):
    """HF's Llama cos and sin, [batch, seq, dim]: cat(freqs, freqs) of positions first.."""
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    pos = torch.arange(first, first + seq, dtype=torch.float64)[None, :].expand(batch, -1) + \
        7 * torch.arange(batch, dtype=torch.float64)[:, None]
    freqs = pos[..., None] * inv
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class LlamaRMSNorm(torch.nn.Module):
    """Hugging Face's LlamaRMSNorm formula and attribute names, the module apply_to swaps; the
    weight starts at 1, or at 1 + noise * randn."""

    def __init__(self, hidden, eps=1e-6, noise=0.0):
        super().__init__()
        weight = torch.ones(hidden) if noise == 0.0 else 1.0 + noise * torch.randn(hidden)
        self.weight = torch.nn.Parameter(weight)
        self.variance_epsilon = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(dtype)
