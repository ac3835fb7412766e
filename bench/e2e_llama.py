#!/usr/bin/env python3
"""One training step of a random-init Hugging Face LlamaForCausalLM, plain, with Liger-Kernel's
RMSNorm and SwiGLU swapped in, and with opreg.torch.apply_to, in one process on one GPU (issue 22,
"Speed where users feel it"); and each of the two with its rope added (issue 38). No download:
the model is built from a config.

  e2e_llama.py [--layers 8] [--steps 25] [--warmup 5] [--batch 4] [--seq 2048]

Prints, per variant, the median step time of the steps after the warm-up and the losses' largest
difference from the plain model's (same seed, same data)."""
import argparse
import statistics
import sys
import time

import torch


def build(args, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=args.layers, num_attention_heads=16,
                      num_key_value_heads=16, vocab_size=32000, max_position_embeddings=args.seq, rms_norm_eps=1e-6)
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)


def swap(kind, model):
    """plain; liger, opreg: RMSNorm and SwiGLU swapped; liger+rope, opreg+rope: and the rotary
    embedding (Liger's patch of modeling_llama.apply_rotary_pos_emb, which this process undoes
    after its run; opreg's per-module swap)."""
    if kind == "plain":
        return "-"
    rope = kind.endswith("+rope")
    if kind.startswith("liger"):
        from liger_kernel.transformers.monkey_patch import _apply_liger_kernel_to_instance
        _apply_liger_kernel_to_instance(model=model, rope=False, cross_entropy=False,
                                        fused_linear_cross_entropy=False, rms_norm=True, swiglu=True)
        if rope:  # Liger's rope is a module-level patch (apply_liger_kernel_to_llama(rope=True) does this)
            from liger_kernel.transformers.rope import liger_rotary_pos_emb
            from transformers.models.llama import modeling_llama
            modeling_llama.apply_rotary_pos_emb = liger_rotary_pos_emb
        return "liger " + sys.modules["liger_kernel"].__dict__.get("__version__", "")
    import opreg.torch
    return f"opreg {opreg.torch.apply_to(model, rope=rope)}"


def run(kind, args, data):
    from transformers.models.llama import modeling_llama
    hf_rope = modeling_llama.apply_rotary_pos_emb
    model = build(args)
    try:
        return timed(kind, args, data, model)
    finally:
        modeling_llama.apply_rotary_pos_emb = hf_rope  # Liger's rope patch is process-wide


def timed(kind, args, data, model):
    what = swap(kind, model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model(input_ids=data, labels=data)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(out.loss.item())
    del model, opt
    torch.cuda.empty_cache()
    return what, statistics.median(times[args.warmup:]) * 1e3, losses


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--kinds", default="plain,liger,opreg,liger+rope,opreg+rope")
    args = p.parse_args()
    g = torch.Generator(device="cpu").manual_seed(1)
    data = torch.randint(0, 32000, (args.batch, args.seq), generator=g).cuda()
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__}; batch {args.batch}x{args.seq}, "
          f"{args.layers} layers, bf16, AdamW; median of {args.steps} steps after {args.warmup}")
    ref = None
    for kind in args.kinds.split(","):
        try:
            what, ms, losses = run(kind, args, data)
        except Exception as e:  # a peer that cannot run is reported, not dropped
            print(f"{kind:6s} failed: {type(e).__name__}: {e}")
            continue
        ref = ref or losses
        diff = max(abs(a - b) for a, b in zip(losses, ref))
        print(f"{kind:6s} step {ms:8.2f} ms  loss[0] {losses[0]:.4f} loss[-1] {losses[-1]:.4f}  "
              f"max |loss - plain| {diff:.2e}  ({what})", flush=True)


if __name__ == "__main__":
    main()
