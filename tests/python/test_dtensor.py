"""DTensor and FSDP2 with opreg.torch, on two GPUs (NCCL); skipped, saying why, where torch has no
torch.distributed.tensor (Debian's torch 1.13), fewer than two GPUs are visible or opreg has no
cuda backend.

- Liger-Kernel's own DTensor tests (test/transformers/test_rms_norm.py's _test_dtensor_rms_norm
  and test_swiglu.py's _test_dtensor_liger_silumul, v0.8.2) at world size 2, their bodies run
  on opreg.torch (dtensor_workers.py), with Liger's shapes and tolerances;
- opreg's placement cases: norms local on row shards and replicas, geglu/swiglu on any Shard
  or Replicate placement, Partial refused with InvalidArgumentError naming it;
- FSDP2: tests/python/hf_llama.py's mini-Llama, apply_to then fully_shard on two GPUs, matching
  the one-process run within Liger's convergence tolerances (fsdp2_llama.py under torchrun)."""
import os
import subprocess
import sys
import tempfile

import pytest
import torch

import opreg.torch as otorch
from conftest import HAS_CUDA, assert_close

try:
    from torch.distributed.tensor import DTensor  # noqa: F401
    HAS_DTENSOR = torch.distributed.is_available()
except Exception:  # noqa: BLE001
    HAS_DTENSOR = False

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dtensor_workers as W  # noqa: E402

NEEDS_DTENSOR = pytest.mark.skipif(
    not HAS_DTENSOR, reason=f"torch {torch.__version__} has no torch.distributed.tensor.DTensor (torch >= 2.4)")
NEEDS_TWO_GPUS = pytest.mark.skipif(
    not (HAS_CUDA and torch.cuda.device_count() >= 2 and torch.distributed.is_nccl_available()),
    reason="needs two CUDA GPUs with NCCL and opreg built with its cuda backend (device kind nvidia-h200-x2)")


def _spawn(fn, *args):
    import torch.multiprocessing as mp
    os.environ.update(W.NCCL_ENV)
    with tempfile.NamedTemporaryFile() as f:
        mp.spawn(fn, args=(2, *args, f.name), nprocs=2, join=True)


@NEEDS_DTENSOR
@NEEDS_TWO_GPUS
@pytest.mark.parametrize("bs, sl, hd", [(2, 2, 8), (9, 7, 64)])
@pytest.mark.parametrize("dtype, atol, rtol", [(torch.float32, 1e-4, 1e-6), (torch.bfloat16, 2e-1, 2e-2)])
@pytest.mark.parametrize("offset, casting_mode", [(0.0, "llama"), (1.0, "gemma")])
def test_liger_dtensor_rms_norm(bs, sl, hd, dtype, atol, rtol, offset, casting_mode):
    _spawn(W.liger_rms_norm_body, bs, sl, hd, dtype, atol, rtol, offset, casting_mode)


@NEEDS_DTENSOR
@NEEDS_TWO_GPUS
@pytest.mark.parametrize("bsz, seq_len, hidden_size", [(2, 2, 8), (9, 7, 64)])
@pytest.mark.parametrize("dtype, atol, rtol", [(torch.float32, 1e-4, 1e-6), (torch.bfloat16, 2e-1, 2e-2)])
def test_liger_dtensor_silumul(bsz, seq_len, hidden_size, dtype, atol, rtol):
    _spawn(W.liger_silumul_body, bsz, seq_len, hidden_size, dtype, atol, rtol)


@NEEDS_DTENSOR
@NEEDS_TWO_GPUS
def test_dtensor_placements():
    _spawn(W.placements_body)


def test_plain_tensors_take_no_dtensor_path():
    """Plain tensors and Parameters never reach the DTensor code (no torch.distributed import)."""
    from opreg.torch import _dtensor as D
    x, w = torch.randn(3, 8), torch.nn.Parameter(torch.ones(8))
    assert not D.any_dtensor(x, w, None)
    (x2,), (w2,), dist = D.enter("rms_norm", (x,), (w,), D.rows_last)
    assert x2 is x and w2 is w and dist is None
    y = otorch.LigerRMSNormFunction.apply(x.requires_grad_(), w, 1e-6)
    assert type(y) is torch.Tensor


@NEEDS_DTENSOR
@NEEDS_TWO_GPUS
def test_fsdp2_llama_two_gpus_matches_one_process(tmp_path):
    """hf_llama's mini-Llama with opreg's modules, fully_shard on two GPUs (half of each batch a
    rank): losses and final parameters equal the one-process run's within Liger's convergence
    tolerances."""
    pytest.importorskip("transformers", reason="needs Hugging Face transformers")
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        pytest.skip(f"torch {torch.__version__} has no torch.distributed.fsdp.fully_shard (FSDP2)")
    import hf_llama
    batches = hf_llama.data("cuda")
    single = hf_llama.build("cuda")
    otorch.apply_to(single)
    want = hf_llama.train(single, batches)
    want_params = hf_llama.params(single)
    del single
    torch.cuda.empty_cache()
    out = tmp_path / "fsdp2.pt"
    worker = os.path.join(HERE, "fsdp2_llama.py")
    env = {**os.environ, **W.NCCL_ENV}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", worker, str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=500, env=env)
    assert run.returncode == 0, f"torchrun failed ({run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    got = torch.load(out)
    assert got["world"] == 2
    print(f"\nFSDP2 on 2 GPUs against one process: largest |loss difference| "
          f"{max(abs(a - b) for a, b in zip(got['losses'], want)):.3g}")
    tol = hf_llama.LOSS_TOL
    assert_close(torch.as_tensor(got["losses"]), torch.as_tensor(want), tol["atol"], tol["rtol"],
                 "loss per step, FSDP2 against one process")
    assert set(got["params"]) == set(want_params)
    for name, p in want_params.items():
        assert_close(got["params"][name], p, hf_llama.PARAM_TOL["atol"], hf_llama.PARAM_TOL["rtol"], name)
