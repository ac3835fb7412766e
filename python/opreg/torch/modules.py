"""nn.Modules with Liger-Kernel's names, constructor arguments and state_dict keys
(liger_kernel.transformers), so that `from opreg.torch import LigerRMSNorm` replaces
`from liger_kernel.transformers import LigerRMSNorm` in a model."""
import torch
import torch.nn as nn

from .functions import *  # noqa: F401,F403 (functions.__all__: the six autograd functions)


__all__ = ["LigerRMSNorm", "LigerFusedAddRMSNorm", "LigerLayerNorm", "LigerGroupNorm", "LigerSwiGLUMLP", "LigerGEGLUMLP",
           "LigerGEGLUMLPForGemma4", "LigerPhi3SwiGLUMLP", "LigerBlockSparseTop2MLP", "LigerExperts",
           "LigerFalconH1SwiGLUMLP"]


def _init(size, init_fn, owner):
    if init_fn not in ("ones", "zeros"):
        raise ValueError(f"{owner}: init_fn must be 'ones' or 'zeros', got {init_fn!r}")
    return torch.ones(size) if init_fn == "ones" else torch.zeros(size)


class LigerRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6, offset=0.0, casting_mode="llama", init_fn="ones", in_place=True,
                 row_mode=None, elementwise_affine=True):
        super().__init__()
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(_init(hidden_size, init_fn, "LigerRMSNorm"))
        else:
            self.register_parameter("weight", None)
        self.variance_epsilon, self.offset, self.casting_mode = eps, offset, casting_mode
        self.in_place, self.row_mode = in_place, row_mode

    def forward(self, hidden_states):
        return LigerRMSNormFunction.apply(hidden_states, self.weight, self.variance_epsilon, self.offset,
                                          self.casting_mode, self.in_place, self.row_mode)

    def extra_repr(self):
        shape = tuple(self.weight.shape) if self.weight is not None else None
        return (f"weight_shape={shape}, eps={self.variance_epsilon}, offset={self.offset}, "
                f"in_place={self.in_place}, row_mode={self.row_mode}")


class LigerFusedAddRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6, offset=0.0, casting_mode="llama", init_fn="ones", in_place=False):
        super().__init__()
        self.weight = nn.Parameter(_init(hidden_size, init_fn, "LigerFusedAddRMSNorm"))
        self.variance_epsilon, self.offset, self.casting_mode, self.in_place = eps, offset, casting_mode, in_place

    def forward(self, hidden_states, residual):
        return LigerFusedAddRMSNormFunction.apply(hidden_states, residual, self.weight, self.variance_epsilon,
                                                  self.offset, self.casting_mode, self.in_place)

    def extra_repr(self):
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}, offset={self.offset}, in_place={self.in_place}"


class LigerLayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6, bias=False, init_fn="ones"):
        super().__init__()
        self.hidden_size, self.eps, self.variance_epsilon = hidden_size, eps, eps
        self.weight = nn.Parameter(_init(hidden_size, init_fn, "LigerLayerNorm"))
        # As Liger: the bias always exists (a state_dict key); bias=True starts it random.
        self.bias = nn.Parameter(torch.randn(hidden_size) if bias else torch.zeros(hidden_size))

    def forward(self, hidden_states):
        return LigerLayerNormFunction.apply(hidden_states, self.weight, self.bias, self.variance_epsilon)

    def extra_repr(self):
        return f"{self.hidden_size}, eps={self.eps}"


class LigerGroupNorm(nn.Module):
    def __init__(self, num_channels, num_groups, eps=1e-6, bias=False, init_fn="ones"):
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups != 0:
            raise ValueError(f"LigerGroupNorm: num_channels={num_channels} must be divisible by num_groups={num_groups}")
        self.num_channels, self.num_groups, self.eps, self.variance_epsilon = num_channels, num_groups, eps, eps
        self.weight = nn.Parameter(_init(num_channels, init_fn, "LigerGroupNorm"))
        self.bias = nn.Parameter(torch.randn(num_channels) if bias else torch.zeros(num_channels))

    def forward(self, hidden_states):
        if hidden_states.dim() < 3 or hidden_states.size(1) != self.num_channels:
            raise ValueError(f"LigerGroupNorm: input of shape {tuple(hidden_states.shape)}; accepted: "
                             f"(N, {self.num_channels}, spatial...) with at least 3 dimensions")
        return LigerGroupNormFunction.apply(hidden_states, self.weight, self.bias, self.num_channels,
                                            self.num_groups, self.variance_epsilon)

    def extra_repr(self):
        return f"num_channels={self.num_channels}, num_groups={self.num_groups}, eps={self.eps}"


class _GLUMLP(nn.Module):
    _function = None
    _activations = None

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.hidden_size, self.intermediate_size = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        act = getattr(config, "hidden_act", None)
        if self._activations is not None and act not in self._activations:
            raise ValueError(f"{type(self).__name__}: activation function {act!r} not supported; "
                             f"accepted: {', '.join(self._activations)}")

    def forward(self, x):
        return self.down_proj(self._function.apply(self.gate_proj(x), self.up_proj(x)))


class LigerSwiGLUMLP(_GLUMLP):
    """down_proj(silu(gate_proj(x)) * up_proj(x)); config has hidden_size, intermediate_size,
    hidden_act ('silu' or 'swish')."""
    _function = LigerSiLUMulFunction
    _activations = ("silu", "swish")


class LigerGEGLUMLP(_GLUMLP):
    """down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)); config has hidden_size, intermediate_size."""
    _function = LigerGELUMulFunction


def _check_silu(owner, config):
    act = getattr(config, "hidden_act", None)
    if act not in ("silu", "swish"):
        raise ValueError(f"{owner}: activation function {act!r} not supported; accepted: silu, swish")


class LigerGEGLUMLPForGemma4(LigerGEGLUMLP):
    """Gemma 4's text MLP (Gemma4TextMLP(config, layer_idx)): LigerGEGLUMLP, with the
    intermediate size doubled on the KV-shared layers when config.use_double_wide_mlp is set
    (layer_idx >= num_hidden_layers - num_kv_shared_layers > 0), as Hugging Face does."""

    def __init__(self, config, layer_idx=None):
        super().__init__(config)
        if layer_idx is not None and getattr(config, "use_double_wide_mlp", False):
            shared = getattr(config, "num_kv_shared_layers", 0) or 0
            first_shared = (getattr(config, "num_hidden_layers", 0) or 0) - shared
            if shared > 0 and layer_idx >= first_shared:
                self.intermediate_size = 2 * config.intermediate_size
                self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
                self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
                self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)


class LigerPhi3SwiGLUMLP(nn.Module):
    """Phi-3's MLP: gate and up from one projection (gate_up_proj, hidden -> 2 x intermediate,
    gate first), down_proj(silu(gate) * up)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.hidden_size, self.intermediate_size = config.hidden_size, config.intermediate_size
        self.gate_up_proj = nn.Linear(self.hidden_size, 2 * self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        _check_silu("LigerPhi3SwiGLUMLP", config)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(LigerSiLUMulFunction.apply(gate, up))


class LigerBlockSparseTop2MLP(nn.Module):
    """One Mixtral expert (transformers < 5's MixtralBlockSparseTop2MLP): w2(silu(w1(x)) * w3(x))."""

    def __init__(self, config):
        super().__init__()
        self.ffn_dim, self.hidden_dim = config.intermediate_size, config.hidden_size
        self.w1 = nn.Linear(self.hidden_dim, self.ffn_dim, bias=False)
        self.w2 = nn.Linear(self.ffn_dim, self.hidden_dim, bias=False)
        self.w3 = nn.Linear(self.hidden_dim, self.ffn_dim, bias=False)
        _check_silu("LigerBlockSparseTop2MLP", config)

    def forward(self, x):
        return self.w2(LigerSiLUMulFunction.apply(self.w1(x), self.w3(x)))


class LigerExperts(nn.Module):
    """Mixtral's experts as transformers >= 5 stores them (MixtralExperts; Qwen3-MoE's have the
    same layout): gate_up_proj (experts, 2 x intermediate, hidden), gate rows first, and
    down_proj (experts, hidden, intermediate). forward(hidden_states, top_k_index,
    top_k_weights): each token's output is the sum over its top-k experts e of
    weight * down_proj[e] @ (silu(gate_e) * up_e). The routing, gathers and matmuls are
    torch's; the gated activation is opreg's swiglu (opreg has no fused MoE op)."""

    def __init__(self, config):
        super().__init__()
        self.num_experts = getattr(config, "num_experts", None) or config.num_local_experts
        self.intermediate_dim = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
        self.hidden_dim = config.hidden_size
        self.gate_up_proj = nn.Parameter(torch.empty(self.num_experts, 2 * self.intermediate_dim, self.hidden_dim))
        self.down_proj = nn.Parameter(torch.empty(self.num_experts, self.hidden_dim, self.intermediate_dim))
        _check_silu("LigerExperts", config)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, self.hidden_dim)
        index = top_k_index.reshape(-1, top_k_index.shape[-1])
        weights = top_k_weights.reshape(-1, top_k_weights.shape[-1])
        out = torch.zeros_like(x)
        with torch.no_grad():
            hit = torch.bincount(index.flatten().long(), minlength=self.num_experts)[:self.num_experts].nonzero()
        for e in hit.flatten().tolist():
            token, slot = torch.where(index == e)
            gate, up = nn.functional.linear(x[token], self.gate_up_proj[e]).chunk(2, dim=-1)
            h = nn.functional.linear(LigerSiLUMulFunction.apply(gate, up), self.down_proj[e])
            h = h * weights[token, slot, None]
            out.index_add_(0, token, h.to(out.dtype))
        return out.reshape(shape)


class LigerFalconH1SwiGLUMLP(nn.Module):
    """Falcon-H1's MLP: down_proj(silu(gate_proj(x) * gate_multiplier) * up_proj(x)) *
    down_multiplier, (gate_multiplier, down_multiplier) = config.mlp_multipliers; the
    projections have a bias when config.mlp_bias is set. The down multiplier scales
    down_proj's output, as Hugging Face's FalconH1MLP does (with a bias that is not the same as
    scaling its input)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.hidden_size, self.intermediate_size = config.hidden_size, config.intermediate_size
        bias = bool(getattr(config, "mlp_bias", False))
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=bias)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=bias)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=bias)
        _check_silu("LigerFalconH1SwiGLUMLP", config)
        gate_multiplier, down_multiplier = config.mlp_multipliers
        self.gate_multiplier, self.down_multiplier = float(gate_multiplier), float(down_multiplier)

    def forward(self, x):
        c = LigerSiLUMulFunction.apply(self.gate_proj(x), self.up_proj(x), self.gate_multiplier)
        y = self.down_proj(c)
        return y if self.down_multiplier == 1.0 else y * self.down_multiplier


def _bare(cls, config, **attributes):
    # A module of cls without running its __init__ (nothing initialised, no random number
    # drawn), holding the given submodules and parameters: apply_to keeps the model's own.
    module = cls.__new__(cls)
    nn.Module.__init__(module)
    if config is not None:
        module.config = config
    for name, value in attributes.items():
        setattr(module, name, value)
    return module


def _mlp_from(cls, gate_proj, up_proj, down_proj, config):
    # The model's own Linear modules (their parameters, and so an optimizer's references and the
    # state_dict keys, stay); nothing is initialised, so no random number is drawn.
    mlp = cls.__new__(cls)
    nn.Module.__init__(mlp)
    mlp.config = config
    mlp.hidden_size, mlp.intermediate_size = gate_proj.in_features, gate_proj.out_features
    mlp.gate_proj, mlp.up_proj, mlp.down_proj = gate_proj, up_proj, down_proj
    return mlp


