"""nn.Modules with Liger-Kernel's names, constructor arguments and state_dict keys
(liger_kernel.transformers), so that `from opreg.torch import LigerRMSNorm` replaces
`from liger_kernel.transformers import LigerRMSNorm` in a model."""
import torch
import torch.nn as nn

from .functions import (
    LigerFusedAddRMSNormFunction,
    LigerGELUMulFunction,
    LigerGroupNormFunction,
    LigerLayerNormFunction,
    LigerRMSNormFunction,
    LigerSiLUMulFunction,
)


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


def _mlp_from(cls, gate_proj, up_proj, down_proj, config):
    # The model's own Linear modules (their parameters, and so an optimizer's references and the
    # state_dict keys, stay); nothing is initialised, so no random number is drawn.
    mlp = cls.__new__(cls)
    nn.Module.__init__(mlp)
    mlp.config = config
    mlp.hidden_size, mlp.intermediate_size = gate_proj.in_features, gate_proj.out_features
    mlp.gate_proj, mlp.up_proj, mlp.down_proj = gate_proj, up_proj, down_proj
    return mlp


