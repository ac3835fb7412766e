"""A small Llama-style decoder written in plain PyTorch (RMSNorm, causal attention, SwiGLU MLP),
swapped to opreg's modules with apply_to, trains 20 steps from one seed with the losses of the
unswapped model (f32: within 1e-4). On a GPU machine the same runs on cuda, a Hugging Face
LlamaForCausalLM from Liger-Kernel's mini_llama3 config trains in bf16 within Liger's convergence
tolerances (hf_llama.py), and with two GPUs the same model under DDP (torchrun, ddp_llama.py)
matches the one-process run (tests skip, saying why, elsewhere)."""
import copy
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import opreg.torch as otorch
from conftest import CUDA_SKIP, DEVICES, assert_close
from formulas import LlamaRMSNorm


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
        self.input_layernorm, self.post_attention_layernorm = LlamaRMSNorm(hidden), LlamaRMSNorm(hidden)
        self.self_attn, self.mlp = Attention(hidden, heads), MLP(hidden, intermediate)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyLlama(nn.Module):
    def __init__(self, vocab=64, hidden=64, heads=4, intermediate=176, layers=2):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(DecoderLayer(hidden, heads, intermediate) for _ in range(layers))
        self.norm, self.lm_head = LlamaRMSNorm(hidden), nn.Linear(hidden, vocab, bias=False)

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
    assert counts == {"rms_norm": 5, "swiglu": 2, "geglu": 0, "rope": 0}
    assert isinstance(swapped.norm, otorch.LigerRMSNorm) and isinstance(swapped.layers[0].mlp, otorch.LigerSwiGLUMLP)
    assert list(swapped.state_dict()) == list(plain.state_dict())
    want, got = train(plain, ids), train(swapped, ids)
    assert want[-1] < want[0]
    for step, (w, g) in enumerate(zip(want, got)):
        assert abs(w - g) <= 1e-4, f"step {step}: loss {g} with opreg, {w} without"


def _liger_close(got, want, tol, what):
    """Liger-Kernel's convergence check: |got - want| <= atol + rtol * |want| everywhere."""
    assert_close(torch.as_tensor(got), torch.as_tensor(want), tol["atol"], tol["rtol"], what)


def _plain_and_swapped_hf_llama():
    pytest.importorskip("transformers", reason="needs Hugging Face transformers")
    import hf_llama
    batches = hf_llama.data("cuda")
    plain = hf_llama.build("cuda")
    want = hf_llama.train(plain, batches)
    swapped = hf_llama.build("cuda")
    counts = otorch.apply_to(swapped)
    assert counts["rms_norm"] == 4 * 2 + 1 and counts["swiglu"] == 4 and counts["rope"] == 4, counts
    got = hf_llama.train(swapped, batches)
    return hf_llama, want, hf_llama.params(plain), got, hf_llama.params(swapped)


@CUDA_SKIP
def test_hf_llama_bf16_converges_as_liger_requires():
    """Liger-Kernel's mini_llama3 bf16 convergence test with opreg's modules: 32 steps, every
    step's loss and the final parameters within Liger's tolerances of the unswapped model's."""
    hf_llama, want, want_params, got, got_params = _plain_and_swapped_hf_llama()
    assert want[-1] < want[0]
    print(f"\nmini_llama3 bf16, {len(want)} steps: loss {want[0]:.4f} -> {want[-1]:.4f}, largest |loss difference| "
          f"{max(abs(a - b) for a, b in zip(got, want)):.3g}")
    _liger_close(got, want, hf_llama.LOSS_TOL, "loss per step")
    for name, p in want_params.items():
        _liger_close(got_params[name], p, hf_llama.PARAM_TOL, name)


@CUDA_SKIP
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs (device kind nvidia-h100-x2)")
def test_hf_llama_ddp_two_gpus_matches_one_process(tmp_path):
    """The same model under DDP over NCCL (torchrun, one process per GPU, each with half of the
    batch, opreg on its own cuda:N): losses and final parameters equal the one-process run's
    within Liger's convergence tolerances."""
    pytest.importorskip("transformers", reason="needs Hugging Face transformers")
    import hf_llama
    batches = hf_llama.data("cuda")
    single = hf_llama.build("cuda")
    otorch.apply_to(single)
    want = hf_llama.train(single, batches)
    want_params = hf_llama.params(single)
    out = tmp_path / "ddp.pt"
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_llama.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", worker, str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"torchrun failed ({run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    got = torch.load(out)
    assert got["world"] == 2
    print(f"\nDDP on 2 GPUs against one process: largest |loss difference| "
          f"{max(abs(a - b) for a, b in zip(got['losses'], want)):.3g}")
    _liger_close(got["losses"], want, hf_llama.LOSS_TOL, "loss per step, DDP against one process")
    for name, p in want_params.items():
        _liger_close(got["params"][name], p, hf_llama.PARAM_TOL, name)
