"""opreg.torch.apply_to(model): swaps a model's RMSNorm and gated MLP modules, in place, for
opreg's (the modules' own parameters are kept, so optimizers and state_dict keys stay), and
points its Llama-style attention modules' rotary embedding at opreg's rope.

Detection is duck-typed (transformers need not be importable): a module's class name and its
attributes say what it is, and anything that does not match exactly is left alone. The model's
own nn.Linear modules move into the new ones (their biases, where a model has them, with them)."""
import types

import torch.nn as nn

from .functional import liger_rotary_pos_emb

from .modules import (
    LigerBlockSparseTop2MLP,
    LigerExperts,
    LigerFalconH1SwiGLUMLP,
    LigerGEGLUMLP,
    LigerGEGLUMLPForGemma4,
    LigerPhi3SwiGLUMLP,
    LigerRMSNorm,
    LigerSwiGLUMLP,
    _bare,
    _mlp_from,
)

_SILU_NAMES = ("silu", "swish")
_GELU_TANH_NAMES = ("gelu_pytorch_tanh", "gelu_tanh")
_OURS = (LigerRMSNorm, LigerSwiGLUMLP, LigerGEGLUMLP, LigerPhi3SwiGLUMLP, LigerBlockSparseTop2MLP, LigerExperts,
         LigerFalconH1SwiGLUMLP)


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


def _act_kind(module, attrs=("act_fn", "activation_fn")):
    """'silu', 'gelu_tanh' or None: the gated activation of an MLP module, from its activation
    module (nn.SiLU, nn.GELU(approximate='tanh'), Hugging Face's SiLUActivation, GELUTanh,
    PytorchGELUTanh) or, where it holds none, from the activation its config names."""
    act = next((getattr(module, a) for a in attrs if getattr(module, a, None) is not None), None)
    if act is not None:
        kind = type(act).__name__.lower()
        if isinstance(act, nn.SiLU) or kind in ("silu", "siluactivation"):
            return "silu"
        if isinstance(act, nn.GELU):
            return "gelu_tanh" if act.approximate == "tanh" else None
        if "gelu" in kind and "tanh" in kind:
            return "gelu_tanh"
        return None
    config = getattr(module, "config", None)
    for name in (getattr(config, "hidden_act", None), getattr(config, "hidden_activation", None),
                 getattr(module, "hidden_activation", None)):
        if name in _SILU_NAMES:
            return "silu"
        if name in _GELU_TANH_NAMES:
            return "gelu_tanh"
    return None


def _linears(module, *names):
    layers = [getattr(module, n, None) for n in names]
    return layers if all(isinstance(p, nn.Linear) for p in layers) else None


def _config(module, **fields):
    return getattr(module, "config", None) or types.SimpleNamespace(**fields)


def _swap_gated_mlp(module, swiglu, geglu):
    """Llama/Gemma-style MLPs (gate_proj, up_proj, down_proj), Falcon-H1's (the same with
    gate and down multipliers) and Gemma 4's text MLP."""
    projs = _linears(module, "gate_proj", "up_proj", "down_proj")
    if projs is None:
        return None, None
    gate, up, down = projs
    if not (gate.in_features == up.in_features == down.out_features
            and gate.out_features == up.out_features == down.in_features):
        return None, None
    kind = _act_kind(module)
    fields = dict(hidden_size=gate.in_features, intermediate_size=gate.out_features)
    if hasattr(module, "gate_multiplier") or hasattr(module, "down_multiplier"):
        if kind != "silu" or not swiglu:
            return None, None
        gm, dm = getattr(module, "gate_multiplier", 1.0), getattr(module, "down_multiplier", 1.0)
        config = _config(module, hidden_act="silu", mlp_multipliers=(gm, dm),
                         mlp_bias=gate.bias is not None, **fields)
        return "swiglu", _bare(LigerFalconH1SwiGLUMLP, config, gate_proj=gate, up_proj=up, down_proj=down,
                               hidden_size=gate.in_features, intermediate_size=gate.out_features,
                               gate_multiplier=float(gm), down_multiplier=float(dm))
    if kind == "silu" and swiglu:
        return "swiglu", _mlp_from(LigerSwiGLUMLP, gate, up, down, _config(module, hidden_act="silu", **fields))
    if kind == "gelu_tanh" and geglu:
        cls = LigerGEGLUMLPForGemma4 if type(module).__name__.startswith("Gemma4") else LigerGEGLUMLP
        return "geglu", _mlp_from(cls, gate, up, down, _config(module, hidden_act="gelu_pytorch_tanh", **fields))
    return None, None


def _swap_phi3_mlp(module):
    """Phi-3's MLP: gate_up_proj (hidden -> 2 x intermediate, gate first), down_proj,
    activation_fn."""
    projs = _linears(module, "gate_up_proj", "down_proj")
    if projs is None or hasattr(module, "gate_proj") or hasattr(module, "up_proj"):
        return None
    gate_up, down = projs
    if (gate_up.in_features != down.out_features or gate_up.out_features != 2 * down.in_features
            or _act_kind(module) != "silu"):
        return None
    config = _config(module, hidden_size=down.out_features, intermediate_size=down.in_features, hidden_act="silu")
    return _bare(LigerPhi3SwiGLUMLP, config, gate_up_proj=gate_up, down_proj=down,
                 hidden_size=down.out_features, intermediate_size=down.in_features)


def _swap_mixtral_expert(module):
    """transformers < 5's MixtralBlockSparseTop2MLP: w2(act(w1(x)) * w3(x))."""
    if not type(module).__name__.endswith("BlockSparseTop2MLP"):
        return None
    projs = _linears(module, "w1", "w2", "w3")
    if projs is None or _act_kind(module) != "silu":
        return None
    w1, w2, w3 = projs
    if not (w1.in_features == w3.in_features == w2.out_features and w1.out_features == w3.out_features
            == w2.in_features):
        return None
    return _bare(LigerBlockSparseTop2MLP, None, w1=w1, w2=w2, w3=w3, ffn_dim=w1.out_features,
                 hidden_dim=w1.in_features)


def _swap_experts(module):
    """transformers >= 5's MixtralExperts (and the same layout elsewhere, Qwen3-MoE's):
    gate_up_proj (E, 2I, H) and down_proj (E, H, I) parameters, a SiLU, no bias, not transposed."""
    if not type(module).__name__.endswith("Experts"):
        return None
    gate_up, down = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    if not (isinstance(gate_up, nn.Parameter) and isinstance(down, nn.Parameter) and gate_up.dim() == 3
            and down.dim() == 3):
        return None
    experts, two_i, hidden = gate_up.shape
    if two_i % 2 or tuple(down.shape) != (experts, hidden, two_i // 2):
        return None
    # Hugging Face's @use_experts_implementation records the layout; opreg takes the default one.
    if (getattr(module, "has_bias", False) or getattr(module, "is_transposed", False)
            or not getattr(module, "has_gate", True) or not getattr(module, "is_concatenated", True)
            or any(n.endswith("bias") for n, _ in module.named_parameters(recurse=False))):
        return None
    if _act_kind(module) != "silu":
        return None
    return _bare(LigerExperts, getattr(module, "config", None), gate_up_proj=gate_up, down_proj=down,
                 num_experts=experts, intermediate_dim=two_i // 2, hidden_dim=hidden)


_ROPE_NAME = "apply_rotary_pos_emb"


def _swap_rope(module):
    """A Llama-style attention module (q_proj and k_proj, a forward that calls its modeling
    file's module-level apply_rotary_pos_emb, HF's rotate_half form): this module's forward
    becomes the same code with that one name bound to opreg's rope. Nothing module-level changes,
    so other models in the process keep theirs. The forward's other globals are its module's as
    they are now (a snapshot)."""
    if not type(module).__name__.endswith("Attention") or _linears(module, "q_proj", "k_proj") is None:
        return False
    if "forward" in vars(module):  # this instance's forward was replaced already (by us or by others)
        return False
    fn = type(module).forward
    if not isinstance(fn, types.FunctionType) or _ROPE_NAME not in fn.__code__.co_names:
        return False
    hf = fn.__globals__.get(_ROPE_NAME)
    if not callable(hf) or getattr(hf, "__name__", "") != _ROPE_NAME:
        return False
    names = dict(fn.__globals__)
    names[_ROPE_NAME] = liger_rotary_pos_emb
    ours = types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)
    ours.__kwdefaults__ = fn.__kwdefaults__
    ours.__qualname__, ours.__doc__, ours.__wrapped__ = fn.__qualname__, fn.__doc__, fn
    module.forward = types.MethodType(ours, module)
    return True


def apply_to(model, rms_norm=True, swiglu=True, geglu=True, rope=True):
    """Replaces, in place, every Llama-style RMSNorm (a module named *RMSNorm with a 1-D weight
    and an eps; Gemma's, which offsets the weight, are left alone) with LigerRMSNorm, and every
    gated MLP with its Liger module on opreg's kernels, keeping their parameters:

    - gate_proj, up_proj, down_proj with a SiLU (tanh-GELU): LigerSwiGLUMLP (LigerGEGLUMLP;
      Gemma 4's text MLP: LigerGEGLUMLPForGemma4); with gate_multiplier and down_multiplier
      (Falcon-H1): LigerFalconH1SwiGLUMLP;
    - Phi-3's gate_up_proj and down_proj: LigerPhi3SwiGLUMLP;
    - Mixtral's experts: *BlockSparseTop2MLP (w1, w2, w3): LigerBlockSparseTop2MLP; *Experts
      holding 3-D gate_up_proj and down_proj parameters: LigerExperts.

    With rope, every Llama-style attention module (q_proj, k_proj and a forward calling its
    modeling file's apply_rotary_pos_emb, as HF's Llama, Mistral, Qwen2 and others do) gets a
    forward of its own that calls opreg's rope (liger_rotary_pos_emb) there instead: per module,
    not by patching the modeling file, so other models in the process are untouched.

    Returns the counts swapped: rms_norm, swiglu (every SiLU-gated module), geglu and rope.

    The swapped norms compute their input gradient out of place (in_place=False), so a swapped
    model's gradients are those of the same model with opreg's out-of-place kernels, whatever
    its blocks' shape (post-norm, shared norms)."""
    swapped = {"rms_norm": 0, "swiglu": 0, "geglu": 0, "rope": 0}
    if rope:
        for module in model.modules():
            swapped["rope"] += _swap_rope(module)
    replaced = {}  # id(old module) -> its replacement: a module registered twice stays one module
    for parent in list(model.modules()):
        if isinstance(parent, _OURS):
            continue
        for child_name, child in list(parent._modules.items()):
            if child is None:
                continue
            if id(child) in replaced:
                setattr(parent, child_name, replaced[id(child)])
                continue
            if isinstance(child, _OURS):
                continue
            new, kind = None, None
            if rms_norm and _is_llama_rms_norm(child):
                new, kind = LigerRMSNorm.__new__(LigerRMSNorm), "rms_norm"
                nn.Module.__init__(new)
                new.elementwise_affine = True
                new.weight = child.weight
                new.variance_epsilon, new.offset, new.casting_mode = _rms_norm_eps(child), 0.0, "llama"
                # Never in place: in a post-norm block (h + norm(f(h))) or with one norm used twice,
                # autograd hands the norm's backward a gradient tensor that another branch holds
                # too, and an in-place backward would overwrite it (Liger swaps with in_place=False).
                new.in_place, new.row_mode = False, None
            else:
                kind, new = _swap_gated_mlp(child, swiglu, geglu)
                if new is None and swiglu:
                    new = _swap_phi3_mlp(child) or _swap_mixtral_expert(child) or _swap_experts(child)
                    kind = "swiglu" if new is not None else None
            if new is not None:
                new.train(child.training)
                replaced[id(child)] = new
                swapped[kind] += 1
                setattr(parent, child_name, new)
    return swapped
