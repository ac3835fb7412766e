"""DTensor inputs of opreg.torch's autograd functions (torch >= 2.4's
torch.distributed.tensor.DTensor, imported lazily and only when a call gets a tensor that is not a
plain torch.Tensor; on a torch without it nothing here is used).

opreg's kernels run on each rank's local tensors:

- geglu and swiglu are elementwise: they run on each shard under any Shard or Replicate
  placement and return a DTensor with the input's placements (a plain operand is distributed
  like the other first, as Liger's LigerSiLUMulFunction does).
- the norms run on the local rows when the normalised dims are not sharded (rms_norm,
  fused_add_rms_norm, layer_norm: any placement but Shard(last dim); group_norm: Shard(0) or
  Replicate) and return DTensors with the input's placements; the weight's and bias's gradients,
  partial sums over the ranks' rows, are reduced to the parameter's placements (or, for a plain
  parameter, to a full tensor on every rank). Otherwise the input is gathered first
  (full_tensor(), as Liger's rms_norm does), the op runs on the whole tensor on every rank, and the
  output and the input's gradient are plain tensors, as Liger's are.
- any other placement (Partial, ...) is refused with opreg's InvalidArgumentError naming it.
"""
import types

import torch

from .. import _opreg

_PLAIN = (torch.Tensor, torch.nn.Parameter)
_API = None


def api():
    """The DTensor names, or None where this torch has no torch.distributed.tensor."""
    global _API
    if _API is None:
        try:
            from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
            _API = types.SimpleNamespace(DTensor=DTensor, Partial=Partial, Replicate=Replicate, Shard=Shard,
                                         distribute_tensor=distribute_tensor)
        except Exception:  # noqa: BLE001 - no DTensor in this torch
            _API = False
    return _API or None


def is_dtensor(t):
    if t is None or type(t) in _PLAIN:
        return False
    a = api()
    return a is not None and isinstance(t, a.DTensor)


def any_dtensor(*ts):
    return any(is_dtensor(t) for t in ts)


def _contiguous_stride(shape):
    stride, step = [], 1
    for n in reversed(tuple(shape)):
        stride.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(stride))


def _check(op, t):
    for p in t.placements:
        if not (p.is_shard() or p.is_replicate()):
            raise _opreg.InvalidArgumentError(
                f"{op}: a DTensor input placed {p} on its device mesh (placements {tuple(t.placements)}); accepted: "
                "Shard and Replicate placements (redistribute a Partial tensor first)")


def _from_local(local, mesh, placements, shape):
    return api().DTensor.from_local(local, mesh, placements, run_check=False, shape=torch.Size(shape),
                                    stride=_contiguous_stride(shape))


def _to(t, mesh, placements):
    """t's local tensor under (mesh, placements): redistributed if it is a DTensor placed
    otherwise, distributed (every rank holds the same full tensor) if it is a plain one."""
    if is_dtensor(t):
        if t.device_mesh != mesh or tuple(t.placements) != tuple(placements):
            t = t.redistribute(mesh, placements)
        return t.to_local()
    return api().distribute_tensor(t, mesh, placements).to_local()


class Dist:
    """How a call's DTensor operands were made local: mesh, placements and global shape of the
    activations, 'local' (each rank its shard) or 'gather' (every rank the full tensor), which
    activations were DTensors, and each parameter's (mesh, placements) or None (plain)."""

    def __init__(self, mesh, placements, shape, mode, was_dtensor, params):
        self.mesh, self.placements, self.shape, self.mode = mesh, tuple(placements), tuple(shape), mode
        self.was_dtensor, self.params = was_dtensor, params


def enter(op, activations, params, local_ok):
    """Local tensors of a call's activations (same shape, e.g. X and R) and parameters (W, B),
    and the Dist that undoes it; (activations, params, None) when none is a DTensor."""
    if not any_dtensor(*activations, *params):
        return list(activations), list(params), None
    for t in (*activations, *params):
        if is_dtensor(t):
            _check(op, t)
    lead = next((t for t in activations if is_dtensor(t)), None)
    param_meta = [(p.device_mesh, tuple(p.placements)) if is_dtensor(p) else None for p in params]
    local_params = [p.full_tensor() if is_dtensor(p) else p for p in params]
    was = [is_dtensor(t) for t in activations]
    if lead is None:  # only parameters are DTensors: the activations are plain, so is the call
        return list(activations), local_params, Dist(None, (), (), "plain", was, param_meta)
    mesh, placements, ndim = lead.device_mesh, tuple(lead.placements), lead.dim()
    if all(p.is_replicate() or local_ok(p.dim % max(ndim, 1), ndim) for p in placements):
        locals_ = [None if t is None else _to(t, mesh, placements) for t in activations]
        return locals_, local_params, Dist(mesh, placements, lead.shape, "local", was, param_meta)
    full = [t.full_tensor() if is_dtensor(t) else t for t in activations]
    return full, local_params, Dist(mesh, placements, lead.shape, "gather", was, param_meta)


def output(t, dist):
    """A forward output shaped like the activations."""
    if dist is None or dist.mode != "local":
        return t
    return _from_local(t, dist.mesh, dist.placements, dist.shape)


def grad_in(g, dist):
    """An incoming gradient (of an output shaped like the activations) as a local tensor."""
    if dist is None or g is None or dist.mode == "plain":
        return g
    if dist.mode == "gather":
        return g.full_tensor() if is_dtensor(g) else g
    return _to(g, dist.mesh, dist.placements)


def grad_out(g, dist, i):
    """The gradient of activation i: a DTensor with the input's placements in 'local' mode
    (a full tensor if that input was plain); plain otherwise (Liger's semantics when gathered)."""
    if dist is None or g is None or dist.mode != "local":
        return g
    d = _from_local(g, dist.mesh, dist.placements, dist.shape)
    return d if dist.was_dtensor[i] else d.full_tensor()


def param_grad(g, dist, i):
    """The gradient of parameter i, summed over the ranks' rows where the activations were
    sharded, in the parameter's own placements (a full tensor for a plain parameter)."""
    if dist is None or g is None:
        return g
    meta = dist.params[i]
    a = api()
    if dist.mode == "local":
        partial = [a.Partial() if p.is_shard() else a.Replicate() for p in dist.placements]
        d = _from_local(g.contiguous(), dist.mesh, partial, g.shape)
        if meta is None:
            return d.full_tensor()
        mesh, placements = meta
        if mesh == dist.mesh:
            return d.redistribute(mesh, placements)
        g = d.full_tensor()
    if meta is None:
        return g
    mesh, placements = meta
    return a.distribute_tensor(g, mesh, placements)


def rows_last(dim, ndim):
    """Norms over the last dim run locally unless it is sharded."""
    return dim != ndim - 1


def rows_batch(dim, ndim):
    """group_norm runs locally only when the batch dim is sharded."""
    return dim == 0


def glu_enter(op, a, b):
    """Local tensors of a gated activation's operands under the first DTensor's placements."""
    if not any_dtensor(a, b):
        return a, b, None
    for t in (a, b):
        if is_dtensor(t):
            _check(op, t)
    lead = a if is_dtensor(a) else b
    mesh, placements = lead.device_mesh, tuple(lead.placements)
    dist = Dist(mesh, placements, lead.shape, "local", [is_dtensor(a), is_dtensor(b)], [])
    return _to(a, mesh, placements), _to(b, mesh, placements), dist
