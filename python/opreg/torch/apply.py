"""opreg.torch.apply_to(model): swaps a Llama-style model's RMSNorm and gated MLP modules, in
place, for opreg's (the modules' own parameters are kept, so optimizers and state_dict keys stay)."""
import types

import torch.nn as nn

from .modules import LigerGEGLUMLP, LigerRMSNorm, LigerSwiGLUMLP, _mlp_from

_SWIGLU_ACTS = ("silu", "swish")
_GEGLU_ACTS = ("gelu_pytorch_tanh", "gelu_tanh")


def _rms_norm_eps(module):
    for name in ("variance_epsilon", "eps", "epsilon"):
        value = getattr(module, name, None)
        if isinstance(value, float):
            return value
    return None


def _is_llama_rms_norm(module):
    name = type(module).__name__
    weight = getattr(module, "weight", None)
    return (name.endswith("RMSNorm") and "Gemma" not in name and not isinstance(module, LigerRMSNorm)
            and isinstance(weight, nn.Parameter) and weight.dim() == 1 and _rms_norm_eps(module) is not None)


def _glu_kind(module):
    if isinstance(module, (LigerSwiGLUMLP, LigerGEGLUMLP)):
        return None
    projs = [getattr(module, p, None) for p in ("gate_proj", "up_proj", "down_proj")]
    if not all(isinstance(p, nn.Linear) for p in projs):
        return None
    act = getattr(module, "act_fn", None)
    hidden_act = getattr(getattr(module, "config", None), "hidden_act", None)
    if isinstance(act, nn.SiLU) or (act is None and hidden_act in _SWIGLU_ACTS) or (
            hidden_act in _SWIGLU_ACTS and type(act).__name__ in ("SiLU", "SiLUActivation")):
        return "swiglu"
    if (isinstance(act, nn.GELU) and act.approximate == "tanh") or hidden_act in _GEGLU_ACTS:
        return "geglu"
    return None


def apply_to(model, rms_norm=True, swiglu=True, geglu=True):
    """Replaces, in place, every Llama-style RMSNorm (a module named *RMSNorm with a 1-D weight
    and an eps; Gemma's, which offsets the weight, are left alone) with LigerRMSNorm, and every
    gated MLP (gate_proj, up_proj, down_proj and a SiLU, or tanh-GELU, activation) with
    LigerSwiGLUMLP (LigerGEGLUMLP), keeping their parameters. Returns the counts swapped.

    The swapped norms compute their input gradient out of place (in_place=False), so a swapped
    model's gradients are those of the same model with opreg's out-of-place kernels, whatever
    its blocks' shape (post-norm, shared norms)."""
    swapped = {"rms_norm": 0, "swiglu": 0, "geglu": 0}
    replaced = {}  # id(old module) -> its replacement: a module registered twice stays one module
    for parent in list(model.modules()):
        for child_name, child in list(parent._modules.items()):
            if child is None:
                continue
            if id(child) in replaced:
                setattr(parent, child_name, replaced[id(child)])
                continue
            new = None
            if rms_norm and _is_llama_rms_norm(child):
                new = LigerRMSNorm.__new__(LigerRMSNorm)
                nn.Module.__init__(new)
                new.elementwise_affine = True
                new.weight = child.weight
                new.variance_epsilon, new.offset, new.casting_mode = _rms_norm_eps(child), 0.0, "llama"
                # Never in place: in a post-norm block (h + norm(f(h))) or with one norm used twice,
                # autograd hands the norm's backward a gradient tensor that another branch holds
                # too, and an in-place backward would overwrite it (Liger swaps with in_place=False).
                new.in_place, new.row_mode = False, None
                swapped["rms_norm"] += 1
            else:
                kind = _glu_kind(child)
                if (kind == "swiglu" and swiglu) or (kind == "geglu" and geglu):
                    config = getattr(child, "config", None) or types.SimpleNamespace(
                        hidden_size=child.gate_proj.in_features, intermediate_size=child.gate_proj.out_features,
                        hidden_act="silu" if kind == "swiglu" else "gelu_pytorch_tanh")
                    cls = LigerSwiGLUMLP if kind == "swiglu" else LigerGEGLUMLP
                    new = _mlp_from(cls, child.gate_proj, child.up_proj, child.down_proj, config)
                    swapped[kind] += 1
            if new is not None:
                new.train(child.training)
                replaced[id(child)] = new
                setattr(parent, child_name, new)
    return swapped
