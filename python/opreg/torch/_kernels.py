"""opreg's ops on torch tensors: outputs allocated with torch (on the inputs' device, so CUDA
memory comes from torch's caching allocator), the call made on torch's current stream, and,
where torch has torch.library.custom_op (torch >= 2.4), each function registered as a custom op
``opreg::<name>`` with a fake (meta) implementation, so torch.compile keeps it in its graph.

Every function here is functional (returns fresh outputs) except the ``*_bwd_inplace`` ones,
which write the input gradient into dy (declared as mutated) and return the parameter gradient.
An absent weight's or bias's gradient comes back as an empty tensor (custom ops return tensors).
"""
import math
from typing import List, Optional, Tuple

import torch

from .. import _opreg

Tensor = torch.Tensor

HAS_CUSTOM_OP = hasattr(torch, "library") and hasattr(torch.library, "custom_op")
CUSTOM_OP_SKIP_REASON = (
    None if HAS_CUSTOM_OP else
    f"torch {torch.__version__} has no torch.library.custom_op (torch >= 2.4): opreg's ops run "
    "eagerly, not as registered custom ops")


def _stream(t: Tensor) -> int:
    # The framework's current stream: opreg runs there, so no synchronisation is needed.
    if t.is_cuda:
        return torch.cuda.current_stream(t.device).cuda_stream
    return 0


def _run(fn, *tensors, **scalars):
    # Detached: a tensor that requires grad refuses __dlpack__ (autograd is the caller's job).
    return fn(*(None if t is None else t.detach() for t in tensors), **scalars)


def _c(t: Optional[Tensor]) -> Optional[Tensor]:
    return None if t is None else t.contiguous()


def _rows(x: Tensor) -> int:
    return math.prod(x.shape[:-1])


def _grad_like(p: Optional[Tensor], x: Tensor) -> Tensor:
    # A parameter's gradient; without the parameter an empty tensor (custom ops return tensors
    # only), which the autograd functions turn back into None.
    return torch.empty(0, dtype=x.dtype, device=x.device) if p is None else torch.empty_like(p)


def _given(g: Tensor, p: Optional[Tensor]) -> Optional[Tensor]:
    return None if p is None else g


def _stat(x: Tensor, *shape: int) -> Tensor:
    return torch.empty(shape, dtype=torch.float32, device=x.device)


# ---- The eager implementations.

def rms_norm_fwd(x: Tensor, w: Optional[Tensor], eps: float, offset: float, casting: str) -> Tuple[Tensor, Tensor]:
    x, w = _c(x), _c(w)
    y, rstd = torch.empty_like(x), _stat(x, _rows(x))
    _run(_opreg.rms_norm_fwd, x, w, y, rstd, eps=eps, offset=offset, casting=casting, stream=_stream(x))
    return y, rstd


def _rms_norm_bwd_into(dy, x, w, rstd, dx, offset, casting):
    dw = _grad_like(w, x)
    _run(_opreg.rms_norm_bwd, dy, x, w, rstd, dx, _given(dw, w), offset=offset, casting=casting, stream=_stream(x))
    return dw


def rms_norm_bwd(dy: Tensor, x: Tensor, w: Optional[Tensor], rstd: Tensor, offset: float,
                 casting: str) -> Tuple[Tensor, Tensor]:
    dy = dy.contiguous()
    dx = torch.empty_like(dy)
    return dx, _rms_norm_bwd_into(dy, x, w, rstd, dx, offset, casting)


def rms_norm_bwd_inplace(dy: Tensor, x: Tensor, w: Optional[Tensor], rstd: Tensor, offset: float,
                         casting: str) -> Tensor:
    return _rms_norm_bwd_into(dy, x, w, rstd, dy, offset, casting)


def fused_add_rms_norm_fwd(x: Tensor, r: Tensor, w: Optional[Tensor], eps: float, offset: float,
                           casting: str) -> Tuple[Tensor, Tensor, Tensor]:
    x, r, w = _c(x), _c(r), _c(w)
    y, s, rstd = torch.empty_like(x), torch.empty_like(x), _stat(x, _rows(x))
    _run(_opreg.fused_add_rms_norm_fwd, x, r, w, y, s, rstd, eps=eps, offset=offset, casting=casting, stream=_stream(x))
    return y, s, rstd


def _fused_bwd_into(dy, ds, s, w, rstd, dx, offset, casting):
    dw = _grad_like(w, s)
    _run(_opreg.fused_add_rms_norm_bwd, dy, ds, s, w, rstd, dx, _given(dw, w), offset=offset, casting=casting, stream=_stream(s))
    return dw


def fused_add_rms_norm_bwd(dy: Tensor, ds: Tensor, s: Tensor, w: Optional[Tensor], rstd: Tensor, offset: float,
                           casting: str) -> Tuple[Tensor, Tensor]:
    dy, ds = dy.contiguous(), ds.contiguous()
    dx = torch.empty_like(dy)
    return dx, _fused_bwd_into(dy, ds, s, w, rstd, dx, offset, casting)


def fused_add_rms_norm_bwd_inplace(dy: Tensor, ds: Tensor, s: Tensor, w: Optional[Tensor], rstd: Tensor,
                                   offset: float, casting: str) -> Tensor:
    return _fused_bwd_into(dy, ds.contiguous(), s, w, rstd, dy, offset, casting)


def layer_norm_fwd(x: Tensor, w: Optional[Tensor], b: Optional[Tensor], eps: float) -> Tuple[Tensor, Tensor, Tensor]:
    x, w, b = _c(x), _c(w), _c(b)
    rows = _rows(x)
    y, mean, rstd = torch.empty_like(x), _stat(x, rows), _stat(x, rows)
    _run(_opreg.layer_norm_fwd, x, w, b, y, mean, rstd, eps=eps, stream=_stream(x))
    return y, mean, rstd


def layer_norm_bwd(dy: Tensor, x: Tensor, w: Optional[Tensor], b: Optional[Tensor], mean: Tensor,
                   rstd: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    dy = dy.contiguous()
    dx = torch.empty_like(dy)
    dw, db = _grad_like(w, x), _grad_like(b, x)
    _run(_opreg.layer_norm_bwd, dy, x, w, mean, rstd, dx, _given(dw, w), _given(db, b), stream=_stream(x))
    return dx, dw, db


def group_norm_fwd(x: Tensor, w: Optional[Tensor], b: Optional[Tensor], num_groups: int,
                   eps: float) -> Tuple[Tensor, Tensor, Tensor]:
    x, w, b = _c(x), _c(w), _c(b)
    n = x.shape[0] if x.dim() > 0 else 1
    y, mean, rstd = torch.empty_like(x), _stat(x, n, num_groups), _stat(x, n, num_groups)
    _run(_opreg.group_norm_fwd, x, w, b, y, mean, rstd, num_groups=num_groups, eps=eps, stream=_stream(x))
    return y, mean, rstd


def group_norm_bwd(dy: Tensor, x: Tensor, w: Optional[Tensor], b: Optional[Tensor], mean: Tensor, rstd: Tensor,
                   num_groups: int) -> Tuple[Tensor, Tensor, Tensor]:
    dy = dy.contiguous()
    dx = torch.empty_like(dy)
    dw, db = _grad_like(w, x), _grad_like(b, x)
    _run(_opreg.group_norm_bwd, dy, x, w, mean, rstd, dx, _given(dw, w), _given(db, b), num_groups=num_groups, stream=_stream(x))
    return dx, dw, db


# The Liger-named geglu/swiglu round where Liger-Kernel's kernels do (rounding="torch": act(a) to
# the dtype before the multiply, docs/ops.md), so a swapped model reproduces Hugging Face's numbers
# where Liger does.
def _glu_fwd(fn):
    def fwd(a: Tensor, b: Tensor) -> Tensor:
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty_like(a)
        _run(fn, a, b, c, rounding="torch", stream=_stream(a))
        return c
    return fwd


def _glu_bwd(fn):
    def bwd(dc: Tensor, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        dc = dc.contiguous()
        da, db = torch.empty_like(a), torch.empty_like(b)
        _run(fn, dc, a, b, da, db, rounding="torch", stream=_stream(a))
        return da, db
    return bwd


geglu_fwd = _glu_fwd(_opreg.geglu_fwd)
geglu_bwd = _glu_bwd(_opreg.geglu_bwd)
swiglu_fwd = _glu_fwd(_opreg.swiglu_fwd)
swiglu_bwd = _glu_bwd(_opreg.swiglu_bwd)


# rope, Liger's face (v0.8.2 liger_kernel.ops.rope): q [B, Hq, T, D] and k [B, Hk, T, D] in any
# strides (HF's transposed views are read and written as they are), cos and sin [1 or B, T, D'] or
# [T, D'] of which only the first D // 2 entries are read (Liger's reading of HF's cat(freqs,
# freqs) tables), half pairing. An odd D rotates its first D - 1 elements and passes the last
# through, as Liger's kernel leaves it. Fresh outputs with the inputs' strides.
def _rope_table(t: Tensor, q: Tensor) -> Tensor:
    if t.dim() == 4 and t.shape[1] == 1:  # already unsqueezed for broadcasting over heads
        t = t.squeeze(1)
    if t.dtype not in (q.dtype, torch.float32):
        t = t.float()
    t = t[..., : q.shape[-1] // 2]
    return t if t.stride(-1) == 1 else t.contiguous()


def _rope_heads(t: Tensor) -> Tensor:
    # The kernels read strides >= 0 with the last dim contiguous; anything else (an expanded
    # gradient, a reversed view) is copied once.
    return t if t.stride(-1) == 1 and min(t.stride()) > 0 else t.contiguous()


def _rope(fn, q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor]:
    q, k = _rope_heads(q), _rope_heads(k)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    d = q.shape[-1]
    even = d - d % 2
    if even:
        _run(fn, q[..., :even], k[..., :even], _rope_table(cos, q), _rope_table(sin, q), None, q_out[..., :even],
             k_out[..., :even], style="half", stream=_stream(q))
    if d % 2:
        q_out[..., -1:].copy_(q[..., -1:])
        k_out[..., -1:].copy_(k[..., -1:])
    return q_out, k_out


def rope_fwd(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor]:
    return _rope(_opreg.rope_fwd, q, k, cos, sin)


def rope_bwd(dq: Tensor, dk: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor]:
    return _rope(_opreg.rope_bwd, dq, dk, cos, sin)


# ---- Fake (meta) implementations: shapes and dtypes only, for torch.compile and opcheck.

def _fake_grads(x, *ts):
    return tuple(_grad_like(t, x) for t in ts)


_FAKES = {
    "rms_norm_fwd": lambda x, w, eps, offset, casting: (torch.empty_like(x), _stat(x, _rows(x))),
    "rms_norm_bwd": lambda dy, x, w, rstd, offset, casting: (torch.empty_like(dy), _grad_like(w, x)),
    "rms_norm_bwd_inplace": lambda dy, x, w, rstd, offset, casting: _grad_like(w, x),
    "fused_add_rms_norm_fwd": lambda x, r, w, eps, offset, casting: (
        torch.empty_like(x), torch.empty_like(x), _stat(x, _rows(x))),
    "fused_add_rms_norm_bwd": lambda dy, ds, s, w, rstd, offset, casting: (torch.empty_like(dy), _grad_like(w, s)),
    "fused_add_rms_norm_bwd_inplace": lambda dy, ds, s, w, rstd, offset, casting: _grad_like(w, s),
    "layer_norm_fwd": lambda x, w, b, eps: (torch.empty_like(x), _stat(x, _rows(x)), _stat(x, _rows(x))),
    "layer_norm_bwd": lambda dy, x, w, b, mean, rstd: (torch.empty_like(dy),) + _fake_grads(x, w, b),
    "group_norm_fwd": lambda x, w, b, g, eps: (
        torch.empty_like(x), _stat(x, x.shape[0], g), _stat(x, x.shape[0], g)),
    "group_norm_bwd": lambda dy, x, w, b, mean, rstd, g: (torch.empty_like(dy),) + _fake_grads(x, w, b),
    "geglu_fwd": lambda a, b: torch.empty_like(a),
    "geglu_bwd": lambda dc, a, b: (torch.empty_like(a), torch.empty_like(b)),
    "swiglu_fwd": lambda a, b: torch.empty_like(a),
    "swiglu_bwd": lambda dc, a, b: (torch.empty_like(a), torch.empty_like(b)),
    "rope_fwd": lambda q, k, cos, sin: (torch.empty_like(q), torch.empty_like(k)),
    "rope_bwd": lambda dq, dk, cos, sin: (torch.empty_like(dq), torch.empty_like(dk)),
}
_MUTATES = {"rms_norm_bwd_inplace": ("dy",), "fused_add_rms_norm_bwd_inplace": ("dy",)}
REGISTERED: List[str] = []

if HAS_CUSTOM_OP:
    for _name, _fake in _FAKES.items():
        _fn = globals()[_name]
        _op = torch.library.custom_op(f"opreg::{_name}", _fn, mutates_args=_MUTATES.get(_name, ()))
        _op.register_fake(_fake)
        globals()[_name] = _op
        REGISTERED.append(f"opreg::{_name}")
