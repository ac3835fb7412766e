"""torchrun worker of test_train.py's two-GPU test: hf_llama's model under DDP over NCCL, one
process per GPU, each rank on its own cuda:N with half of the batch, opreg's modules swapped in.
Rank 0 saves the rank-averaged losses and the final parameters to the path given.

  torchrun --nproc_per_node 2 tests/python/ddp_llama.py OUT.pt"""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_llama  # noqa: E402

import opreg  # noqa: E402
import opreg.torch as otorch  # noqa: E402


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=device)

    # opreg dispatches to this rank's GPU and runs on the caller's stream: an rms_norm on a side
    # stream of cuda:N, checked against the formula.
    x = torch.randn(37, 1000, device=device)
    w = torch.randn(1000, device=device)
    plan = opreg.explain("rms_norm.fwd", x, w, torch.empty_like(x), torch.empty(37, device=device))
    assert plan["device"] == f"cuda:{local}", plan
    side = torch.cuda.Stream(device)
    with torch.cuda.stream(side):
        y = otorch.LigerRMSNorm(1000, eps=1e-6).to(device)
        with torch.no_grad():
            y.weight.copy_(w)
        out = y(x)
    side.synchronize()
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)

    model = hf_llama.build(device)
    counts = otorch.apply_to(model)
    assert counts["rms_norm"] == 9 and counts["swiglu"] == 4, counts
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    batches = hf_llama.data(device)
    rows = hf_llama.BATCH // world
    mine = slice(rank * rows, (rank + 1) * rows)

    def average(t):
        dist.all_reduce(t)
        t /= world

    losses = hf_llama.train(ddp, batches, reduce=average, rows=mine)
    if rank == 0:
        torch.save({"losses": losses, "params": hf_llama.params(ddp), "world": world}, sys.argv[1])
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
