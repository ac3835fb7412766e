"""A Hugging Face LlamaForCausalLM from Liger-Kernel's mini_llama3 convergence config (no download)
and the training loop its convergence test runs, shared by test_train.py and the torchrun worker
ddp_llama.py. Liger's bf16 test (test/convergence/bf16/test_mini_models.py) trains 32 steps at
lr 1e-4 with AdamW and asserts per-step losses within atol 1e-3 + rtol 1e-2 and the final
parameters within atol 1e-2 + rtol 1e-2 of the unpatched model's: opreg is held to the same."""
import torch

STEPS, LR = 32, 1e-4
LOSS_TOL = dict(atol=1e-3, rtol=1e-2)
PARAM_TOL = dict(atol=1e-2, rtol=1e-2)
BATCH, SEQ, VOCAB = 8, 256, 32000


def build(device, seed=42):
    import transformers
    config = transformers.LlamaConfig(
        hidden_size=1024, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
        vocab_size=VOCAB, max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0,
        attention_bias=False, attention_dropout=0.0, tie_word_embeddings=False, attn_implementation="sdpa")
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config).to(device=device, dtype=torch.bfloat16)


def data(device, steps=STEPS):
    """One fresh batch per step, as Liger's test draws them from its dataset, the same on every
    rank (each takes its rows). Each sequence repeats a random 32-token phrase drawn from the
    first 1024 token ids, so there is something to learn (the loss falls from ln 32000); training on one batch over and over would instead memorise it and
    amplify bf16 rounding differences far past what a real run sees."""
    g = torch.Generator(device="cpu").manual_seed(1)
    phrases = torch.randint(0, 1024, (steps, BATCH, 32), generator=g)
    return phrases.repeat(1, 1, SEQ // 32).to(device)


def train(model, batches, reduce=None, rows=slice(None)):
    """Per-step losses over `batches` (the `rows` of each); `reduce` (torch.distributed) averages
    each step's loss over the ranks."""
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = []
    for ids in batches:
        ids = ids[rows]
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        value = loss.detach().float()
        if reduce is not None:
            reduce(value)
        losses.append(value.item())
    return losses


def params(model):
    m = getattr(model, "module", model)
    return {name: p.detach().float().cpu() for name, p in m.named_parameters()}
