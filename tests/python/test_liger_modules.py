"""Liger-Kernel's MLP modules for Phi-3, Mixtral (transformers < 5's per-expert modules and >= 5's
stacked experts), Falcon-H1 and Gemma 4, on opreg's kernels: each against its torch formula,
forward and backward, f32 and bf16; and apply_to on hand-made modules with the attribute names
and forward formulas of Hugging Face's classes (transformers is not needed), which it swaps
keeping the parameters and state_dict keys, with the same outputs and gradients."""
import copy
import types

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import opreg.torch as otorch
from conftest import DEVICES, assert_close

# (atol, rtol) against the torch formula. bf16: opreg rounds the gated product once where torch
# rounds silu(gate) first, a bf16 ulp that the down projection sums over the intermediate size.
TOL = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (3e-2, 3e-2)}
H, I, E, K = 48, 80, 4, 2


def cfg(**kw):
    base = dict(hidden_size=H, intermediate_size=I, hidden_act="silu")
    base.update(kw)
    return types.SimpleNamespace(**base)


# ---- Hand-made modules with Hugging Face's class names, attributes and forward formulas.

class Phi3MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.activation_fn = nn.SiLU()

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(up * self.activation_fn(gate))


class MixtralBlockSparseTop2MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ffn_dim, self.hidden_dim = config.intermediate_size, config.hidden_size
        self.w1 = nn.Linear(self.hidden_dim, self.ffn_dim, bias=False)
        self.w2 = nn.Linear(self.ffn_dim, self.hidden_dim, bias=False)
        self.w3 = nn.Linear(self.hidden_dim, self.ffn_dim, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.w2(self.act_fn(self.w1(x)) * self.w3(x))


class MixtralSparseMoeBlock(nn.Module):
    """transformers < 5: a router and a ModuleList of per-expert MLPs."""

    def __init__(self, config):
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.gate = nn.Linear(config.hidden_size, config.num_local_experts, bias=False)
        self.experts = nn.ModuleList(MixtralBlockSparseTop2MLP(config) for _ in range(config.num_local_experts))

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        weights, chosen = torch.topk(F.softmax(self.gate(x), dim=-1, dtype=torch.float), self.top_k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            if token.numel():
                out.index_add_(0, token, (expert(x[token]) * weights[token, slot, None]).to(x.dtype))
        return out.reshape(shape)


class MixtralExperts(nn.Module):
    """transformers >= 5: the experts stacked in 3-D parameters."""

    def __init__(self, config):
        super().__init__()
        self.num_experts, self.hidden_dim = config.num_local_experts, config.hidden_size
        self.intermediate_dim = config.intermediate_size
        self.gate_up_proj = nn.Parameter(torch.randn(self.num_experts, 2 * self.intermediate_dim, self.hidden_dim) / 8)
        self.down_proj = nn.Parameter(torch.randn(self.num_experts, self.hidden_dim, self.intermediate_dim) / 8)
        self.act_fn = nn.SiLU()

    def forward(self, hidden_states, top_k_index, top_k_weights):
        final = torch.zeros_like(hidden_states)
        with torch.no_grad():
            mask = F.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit:
            e = e[0]
            pos, token = torch.where(mask[e])
            gate, up = F.linear(hidden_states[token], self.gate_up_proj[e]).chunk(2, dim=-1)
            h = F.linear(self.act_fn(gate) * up, self.down_proj[e]) * top_k_weights[token, pos, None]
            final.index_add_(0, token, h.to(final.dtype))
        return final


class MixtralMoe5(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.gate = nn.Linear(config.hidden_size, config.num_local_experts, bias=False)
        self.experts = MixtralExperts(config)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        weights, chosen = torch.topk(F.softmax(self.gate(x), dim=-1, dtype=torch.float), self.top_k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        return self.experts(x, chosen, weights).reshape(shape)


class FalconH1MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.mlp_bias)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.mlp_bias)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)
        self.act_fn = nn.SiLU()
        self.gate_multiplier, self.down_multiplier = config.mlp_multipliers

    def forward(self, x):
        y = self.up_proj(x) * self.act_fn(self.gate_proj(x) * self.gate_multiplier)
        return self.down_proj(y) * self.down_multiplier


class GELUTanh(nn.Module):
    """Hugging Face's ACT2FN['gelu_pytorch_tanh']."""

    def forward(self, x):
        return F.gelu(x, approximate="tanh")


class Gemma4TextMLP(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        first_shared = config.num_hidden_layers - config.num_kv_shared_layers
        wide = config.use_double_wide_mlp and layer_idx >= first_shared > 0
        self.config = config
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size * (2 if wide else 1)
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        self.act_fn = GELUTanh()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, mlp):
        super().__init__()
        self.mlp = mlp

    def forward(self, x):
        return x + self.mlp(x)


GEMMA4 = cfg(hidden_act=None, hidden_activation="gelu_pytorch_tanh", num_hidden_layers=4, num_kv_shared_layers=2,
             use_double_wide_mlp=True)
MIXTRAL = cfg(num_local_experts=E, num_experts_per_tok=K)


# ---- Each Liger module against its formula.

def _run(module, inputs):
    out = module(*inputs)
    grad = torch.linspace(-1, 1, out.numel(), device=out.device).reshape(out.shape).to(out.dtype)
    out.backward(grad)
    params = {n: p.grad.detach().clone() for n, p in module.named_parameters()}
    return out.detach(), [t.grad.detach().clone() for t in inputs if t.requires_grad], params


def _compare(liger, plain, inputs, dtype, what):
    ins = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    ins2 = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    got, got_dx, got_p = _run(liger, ins)
    want, want_dx, want_p = _run(plain, ins2)
    tol = TOL[dtype]
    assert_close(got, want, *tol, f"{what} forward")
    for i, (a, b) in enumerate(zip(got_dx, want_dx)):
        assert_close(a, b, *tol, f"{what} input grad {i}")
    assert set(got_p) == set(want_p)
    for name in want_p:
        assert_close(got_p[name], want_p[name], *tol, f"{what} {name} grad")


def _pair(make_plain, make_liger, device, dtype):
    """Both modules, seeded alike, on `device` in `dtype`, opreg's with the plain one's weights."""
    torch.manual_seed(0)
    plain, liger = make_plain().to(device, dtype), make_liger().to(device, dtype)
    liger.load_state_dict(plain.state_dict())
    return plain, liger


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_phi3_swiglu_mlp(device, dtype):
    plain, liger = _pair(lambda: Phi3MLP(cfg()), lambda: otorch.LigerPhi3SwiGLUMLP(cfg()), device, dtype)
    assert list(liger.state_dict()) == ["gate_up_proj.weight", "down_proj.weight"]
    _compare(liger, plain, [torch.randn(2, 7, H, device=device, dtype=dtype)], dtype, "phi3")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_block_sparse_top2_mlp(device, dtype):
    plain, liger = _pair(lambda: MixtralBlockSparseTop2MLP(cfg()), lambda: otorch.LigerBlockSparseTop2MLP(cfg()),
                         device, dtype)
    assert sorted(liger.state_dict()) == ["w1.weight", "w2.weight", "w3.weight"]
    _compare(liger, plain, [torch.randn(13, H, device=device, dtype=dtype)], dtype, "mixtral expert")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("config", [MIXTRAL, cfg(num_experts=E, num_experts_per_tok=K, moe_intermediate_size=I,
                                                  intermediate_size=7)], ids=["mixtral", "qwen3_moe"])
def test_experts(device, dtype, config):
    plain, liger = _pair(lambda: MixtralExperts(MIXTRAL), lambda: otorch.LigerExperts(config), device, dtype)
    assert (liger.num_experts, liger.intermediate_dim, liger.hidden_dim) == (E, I, H)
    assert sorted(liger.state_dict()) == ["down_proj", "gate_up_proj"]
    x = torch.randn(21, H, device=device, dtype=dtype)
    probs = torch.randn(21, E, device=device).softmax(-1)
    weights, index = probs.topk(K, dim=-1)
    index[3] = torch.tensor([0, 2])  # expert 3 unused by some tokens; expert 1 maybe by none
    weights = (weights / weights.sum(-1, keepdim=True)).to(dtype)

    def run(module):
        xs = x.clone().requires_grad_()
        out = module(xs, index, weights)
        out.backward(torch.linspace(-1, 1, out.numel(), device=device).reshape(out.shape).to(dtype))
        return out.detach(), xs.grad, {n: p.grad for n, p in module.named_parameters()}

    got, got_dx, got_p = run(liger)
    want, want_dx, want_p = run(plain)
    assert_close(got, want, *TOL[dtype], "experts forward")
    assert_close(got_dx, want_dx, *TOL[dtype], "experts dx")
    for n in want_p:
        assert_close(got_p[n], want_p[n], *TOL[dtype], f"experts {n} grad")
    # (batch, seq, hidden) with (batch, seq, K) routing, as Liger's module takes them.
    out3 = liger(x.reshape(3, 7, H), index.reshape(3, 7, K), weights.reshape(3, 7, K))
    assert torch.equal(out3.detach().reshape(21, H), got), "experts 3-d"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [False, True])
def test_falcon_h1_mlp(device, dtype, bias):
    config = cfg(mlp_bias=bias, mlp_multipliers=(0.7, 1.3))
    plain, liger = _pair(lambda: FalconH1MLP(config), lambda: otorch.LigerFalconH1SwiGLUMLP(config), device, dtype)
    assert (liger.gate_multiplier, liger.down_multiplier) == (0.7, 1.3)
    _compare(liger, plain, [torch.randn(2, 5, H, device=device, dtype=dtype)], dtype, "falcon_h1")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layer_idx", [0, 3])
def test_gemma4_geglu_mlp(device, dtype, layer_idx):
    plain, liger = _pair(lambda: Gemma4TextMLP(GEMMA4, layer_idx),
                         lambda: otorch.LigerGEGLUMLPForGemma4(GEMMA4, layer_idx=layer_idx), device, dtype)
    assert liger.intermediate_size == plain.intermediate_size == (2 * I if layer_idx == 3 else I)
    assert otorch.LigerGEGLUMLPForGemma4(GEMMA4).intermediate_size == I
    _compare(liger, plain, [torch.randn(2, 5, H, device=device, dtype=dtype)], dtype, "gemma4")


def test_silu_only():
    for cls in (otorch.LigerPhi3SwiGLUMLP, otorch.LigerBlockSparseTop2MLP, otorch.LigerExperts):
        with pytest.raises(ValueError, match="not supported"):
            cls(cfg(hidden_act="gelu", num_local_experts=2))


# ---- apply_to on models made of these modules.

def _models():
    return {
        "phi3": (lambda: Block(Phi3MLP(cfg())), otorch.LigerPhi3SwiGLUMLP, {"swiglu": 1}),
        "mixtral_v4": (lambda: Block(MixtralSparseMoeBlock(MIXTRAL)), otorch.LigerBlockSparseTop2MLP, {"swiglu": E}),
        "mixtral_v5": (lambda: Block(MixtralMoe5(MIXTRAL)), otorch.LigerExperts, {"swiglu": 1}),
        "falcon_h1": (lambda: Block(FalconH1MLP(cfg(mlp_bias=False, mlp_multipliers=(0.5, 1.5)))),
                      otorch.LigerFalconH1SwiGLUMLP, {"swiglu": 1}),
        "falcon_h1_bias": (lambda: Block(FalconH1MLP(cfg(mlp_bias=True, mlp_multipliers=(1.5, 0.25)))),
                           otorch.LigerFalconH1SwiGLUMLP, {"swiglu": 1}),
        "gemma4": (lambda: nn.Sequential(Block(Gemma4TextMLP(GEMMA4, 0)), Block(Gemma4TextMLP(GEMMA4, 3))),
                   otorch.LigerGEGLUMLPForGemma4, {"geglu": 2}),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(_models()))
def test_apply_to_swaps_hf_mlps(device, dtype, name):
    make, cls, counts = _models()[name]
    torch.manual_seed(0)
    plain = make().to(device, dtype)
    swapped = copy.deepcopy(plain)
    params_before = {n: p for n, p in swapped.named_parameters()}
    got = otorch.apply_to(swapped)
    assert got == {"rms_norm": 0, "swiglu": 0, "geglu": 0, "rope": 0, **counts}, got
    assert sum(isinstance(m, cls) for m in swapped.modules()) == sum(counts.values())
    assert list(swapped.state_dict()) == list(plain.state_dict())
    # The same Parameter objects: an optimizer made before apply_to still updates the model.
    assert all(p is params_before[n] for n, p in swapped.named_parameters())
    assert otorch.apply_to(swapped) == {"rms_norm": 0, "swiglu": 0, "geglu": 0, "rope": 0}
    x = torch.randn(3, 7, H, device=device, dtype=dtype)
    _compare(swapped, plain, [x], dtype, name)


def test_apply_to_leaves_unknown_mlps_alone():
    class OtherMLP(nn.Module):  # gelu (erf), not tanh: no opreg kernel
        def __init__(self):
            super().__init__()
            self.gate_proj, self.up_proj, self.down_proj = nn.Linear(H, I), nn.Linear(H, I), nn.Linear(I, H)
            self.act_fn = nn.GELU()

    class TransposedExperts(nn.Module):  # GPT-OSS-like layout: (E, H, 2I) with biases
        def __init__(self):
            super().__init__()
            self.gate_up_proj = nn.Parameter(torch.zeros(E, H, 2 * I))
            self.down_proj = nn.Parameter(torch.zeros(E, I, H))
            self.gate_up_proj_bias = nn.Parameter(torch.zeros(E, 2 * I))
            self.act_fn = nn.SiLU()
            self.is_transposed, self.has_bias = True, True

    class FeedForward(MixtralBlockSparseTop2MLP):  # w1, w2, w3 under another name: not known to be Mixtral's
        pass

    model = nn.Sequential(OtherMLP(), TransposedExperts(), Block(FeedForward(cfg())))
    assert otorch.apply_to(model) == {"rms_norm": 0, "swiglu": 0, "geglu": 0, "rope": 0}
