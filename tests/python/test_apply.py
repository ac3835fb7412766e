"""apply_to never changes a model's gradients: whatever the shape of its blocks (pre-norm,
post-norm as OLMo2 and GLM-4 have, one norm module used twice), the swapped model's gradients are
bitwise those of the same model swapped with in_place=False, and within the ops' tolerances of
the unswapped model's. An in-place norm backward in a post-norm block overwrites the gradient
tensor that autograd also hands to the residual branch (parameter gradients 19-35% off)."""
import copy

import pytest
import torch
import torch.nn as nn

import opreg.torch as otorch
from conftest import DEVICES, assert_close
from formulas import LlamaRMSNorm


def ToyRMSNorm(hidden):
    return LlamaRMSNorm(hidden, noise=0.1)


class PostNormBlock(nn.Module):
    """OLMo2 / GLM-4: h = h + norm(f(h))."""

    def __init__(self, hidden):
        super().__init__()
        self.attn, self.mlp = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.post_attention_layernorm, self.post_feedforward_layernorm = ToyRMSNorm(hidden), ToyRMSNorm(hidden)

    def forward(self, h):
        h = h + self.post_attention_layernorm(self.attn(h))
        return h + self.post_feedforward_layernorm(torch.tanh(self.mlp(h)))


class PreNormBlock(nn.Module):
    """Llama: h = h + f(norm(h))."""

    def __init__(self, hidden):
        super().__init__()
        self.attn, self.mlp = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.input_layernorm, self.post_attention_layernorm = ToyRMSNorm(hidden), ToyRMSNorm(hidden)

    def forward(self, h):
        h = h + self.attn(self.input_layernorm(h))
        return h + torch.tanh(self.mlp(self.post_attention_layernorm(h)))


class SharedNormBlock(nn.Module):
    """One norm module used twice (and registered under two names): both calls' outputs are
    summed, so both backward calls receive the same gradient tensor."""

    def __init__(self, hidden):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)
        self.norm = ToyRMSNorm(hidden)
        self.norm_again = self.norm

    def forward(self, h):
        return h + self.norm(h) + self.norm_again(self.proj(h))


class Toy(nn.Module):
    def __init__(self, block, hidden=48, layers=2):
        super().__init__()
        self.layers = nn.ModuleList(block(hidden) for _ in range(layers))
        self.norm, self.head = ToyRMSNorm(hidden), nn.Linear(hidden, 5)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


BLOCKS = {"post_norm": PostNormBlock, "pre_norm": PreNormBlock, "shared_norm": SharedNormBlock}
EXPECTED_NORMS = {"post_norm": 5, "pre_norm": 5, "shared_norm": 3}


def _grads(model, x):
    model.zero_grad(set_to_none=True)
    out = model(x)
    (out * torch.linspace(-1, 1, out.shape[-1], device=out.device)).sum().backward()
    return {name: p.grad.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("block", list(BLOCKS))
def test_apply_to_keeps_gradients(block, device):
    torch.manual_seed(0)
    plain = Toy(BLOCKS[block]).to(device)
    x = torch.randn(3, 7, 48, device=device)

    swapped = copy.deepcopy(plain)
    counts = otorch.apply_to(swapped)
    assert counts["rms_norm"] == EXPECTED_NORMS[block], counts
    assert list(swapped.state_dict()) == list(plain.state_dict())
    norms = [m for m in swapped.modules() if isinstance(m, otorch.LigerRMSNorm)]
    assert norms and not any(type(m).__name__ == "LlamaRMSNorm" for m in swapped.modules())
    if block == "shared_norm":
        assert all(layer.norm is layer.norm_again for layer in swapped.layers)

    # The same model with every swapped norm out of place, set by hand.
    reference = copy.deepcopy(plain)
    otorch.apply_to(reference)
    for m in reference.modules():
        if isinstance(m, otorch.LigerRMSNorm):
            m.in_place = False

    want, got, oracle = _grads(reference, x), _grads(swapped, x), _grads(plain, x)
    for name in want:
        assert torch.equal(got[name], want[name]), \
            f"{block}: {name}'s gradient after apply_to differs from the out-of-place swap's " \
            f"(max |diff| {(got[name] - want[name]).abs().max().item():.3g})"
        assert_close(got[name], oracle[name], 1e-5, 1e-4, f"{block}: {name}'s gradient against the plain model")


# ---- rope: a Llama-style attention module whose forward calls this file's module-level
# apply_rotary_pos_emb, as Hugging Face's modeling files do.

def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    from formulas import rotate_half
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class ToyLlamaAttention(nn.Module):
    def __init__(self, hidden=32, heads=4, kv_heads=2):
        super().__init__()
        self.head_dim = hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)

    def forward(self, h, position_embeddings):
        shape = (*h.shape[:-1], -1, self.head_dim)
        q = self.q_proj(h).view(shape).transpose(1, 2)
        k = self.k_proj(h).view(shape).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return q.sum(1) + k.sum(1)


@pytest.mark.parametrize("device", DEVICES)
def test_apply_to_swaps_each_attentions_rope_not_the_modeling_files(device):
    from formulas import rope_tables
    torch.manual_seed(3)
    plain = nn.ModuleList([ToyLlamaAttention(), ToyLlamaAttention()]).to(device)
    swapped, untouched = copy.deepcopy(plain), copy.deepcopy(plain)
    assert otorch.apply_to(swapped)["rope"] == 2
    assert otorch.apply_to(swapped)["rope"] == 0  # once only
    assert all(m.forward.__func__.__globals__["apply_rotary_pos_emb"] is otorch.liger_rotary_pos_emb for m in swapped)
    # Nothing module-level changed: another model in the process keeps HF's function.
    assert globals()["apply_rotary_pos_emb"].__module__ == __name__
    assert all("forward" not in vars(m) for m in untouched)
    h = torch.randn(2, 5, 32, device=device)
    cos, sin = (t.to(device) for t in rope_tables(1, 5, 8))
    for p, s, u in zip(plain, swapped, untouched):
        want = p(h, (cos, sin))
        assert_close(s(h, (cos, sin)), want, 1e-5, 1e-5, "swapped attention")
        assert torch.equal(u(h, (cos, sin)), want)
    # The swapped forward is opreg's: its copy after deepcopy binds the copy.
    again = copy.deepcopy(swapped)
    assert again[0].forward.__self__ is again[0]
