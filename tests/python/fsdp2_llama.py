"""torchrun worker of test_dtensor.py's FSDP2 test: hf_llama's model with opreg's modules swapped
in (apply_to), then sharded with torch.distributed.fsdp.fully_shard (each decoder layer, then
the root) over NCCL, one process per GPU, each rank with half of every batch. Rank 0 saves the
rank-averaged losses and the final (gathered) parameters to the path given.

  torchrun --nproc_per_node 2 tests/python/fsdp2_llama.py OUT.pt"""
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
    from torch.distributed.fsdp import fully_shard

    x = torch.randn(4, 64, device=device)
    plan = opreg.explain("rms_norm.fwd", x, torch.ones(64, device=device), torch.empty_like(x),
                         torch.empty(4, device=device))
    assert plan["device"] == f"cuda:{local}", plan

    model = hf_llama.build(device)
    counts = otorch.apply_to(model)
    assert counts["rms_norm"] == 9 and counts["swiglu"] == 4, counts
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    batches = hf_llama.data(device)
    rows = hf_llama.BATCH // world
    mine = slice(rank * rows, (rank + 1) * rows)

    def average(t):
        dist.all_reduce(t)
        t /= world

    losses = hf_llama.train(model, batches, reduce=average, rows=mine)
    params = {}
    for name, p in model.named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        params[name] = full.detach().float().cpu()
    if rank == 0:
        torch.save({"losses": losses, "params": params, "world": world}, sys.argv[1])
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
