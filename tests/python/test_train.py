"""A small Llama-style decoder written in plain PyTorch (RMSNorm, causal attention, SwiGLU MLP),
swapped to opreg's modules with apply_to, trains 20 steps from one seed with the losses of the
unswapped model (f32: within 1e-4). On a GPU machine the same runs on cuda, and a Hugging Face
LlamaForCausalLM from a small random config trains in bf16 (tests skip, saying why, elsewhere)."""
import copy
import math

import pytest
import torch
import torch.nn as nn

import opreg.torch as otorch
from conftest import CUDA_SKIP, DEVICES


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(dtype)


class MLP(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(hidden, hidden, bias=False) for _ in range(4))

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = (p(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = scores.masked_fill(mask, float("-inf")).softmax(-1)
        return self.o_proj((att @ v).transpose(1, 2).reshape(b, t, h))


class DecoderLayer(nn.Module):
    def __init__(self, hidden, heads, intermediate):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(hidden), RMSNorm(hidden)
        self.self_attn, self.mlp = Attention(hidden, heads), MLP(hidden, intermediate)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyLlama(nn.Module):
    def __init__(self, vocab=64, hidden=64, heads=4, intermediate=176, layers=2):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(DecoderLayer(hidden, heads, intermediate) for _ in range(layers))
        self.norm, self.lm_head = RMSNorm(hidden), nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def train(model, ids, steps=20):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(steps):
        logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("device", DEVICES)
def test_swapped_decoder_trains_like_the_plain_one(device):
    torch.manual_seed(0)
    plain = TinyLlama().to(device)
    swapped = copy.deepcopy(plain)
    ids = torch.randint(0, 64, (4, 17), device=device)
    counts = otorch.apply_to(swapped)
    assert counts == {"rms_norm": 5, "swiglu": 2, "geglu": 0}
    assert isinstance(swapped.norm, otorch.LigerRMSNorm) and isinstance(swapped.layers[0].mlp, otorch.LigerSwiGLUMLP)
    assert list(swapped.state_dict()) == list(plain.state_dict())
    want, got = train(plain, ids), train(swapped, ids)
    assert want[-1] < want[0]
    for step, (w, g) in enumerate(zip(want, got)):
        assert abs(w - g) <= 1e-4, f"step {step}: loss {g} with opreg, {w} without"


@CUDA_SKIP
def test_hf_llama_bf16_trains_like_the_plain_one():
    transformers = pytest.importorskip("transformers", reason="needs Hugging Face transformers")
    config = transformers.LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)
    torch.manual_seed(0)
    plain = transformers.LlamaForCausalLM(config).to("cuda", torch.bfloat16)
    swapped = copy.deepcopy(plain)
    assert otorch.apply_to(swapped)["rms_norm"] == 2 * 2 + 1
    ids = torch.randint(0, 1024, (4, 128), device="cuda")

    def hf_train(model):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        losses = []
        for _ in range(20):
            loss = model(input_ids=ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    want, got = hf_train(plain), hf_train(swapped)
    # Liger-Kernel's bf16 convergence tests compare losses with atol=1e-2, rtol=1e-2 (or looser).
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), atol=1e-2, rtol=1e-2)
