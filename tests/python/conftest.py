"""Shared helpers of the opreg Python suites (run by `make test` on the cpu with Debian's torch;
the CUDA and torch >= 2.4 tests run on a GPU machine and are skipped here, saying why)."""
import os

import pytest
import torch

import opreg
import opreg.torch as otorch

HAS_CUDA = torch.cuda.is_available() and any(
    d["backend"] == "cuda" and d["available"] for d in opreg.devices())
CUDA_SKIP = pytest.mark.skipif(
    not HAS_CUDA, reason="needs a CUDA GPU, a CUDA-enabled torch and opreg built with its cuda backend")
CUSTOM_OP_SKIP = pytest.mark.skipif(not otorch.HAS_CUSTOM_OP, reason=str(otorch.CUSTOM_OP_SKIP_REASON))

DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
# (atol, rtol) per dtype: at most Liger-Kernel's own tests' for the op (test/transformers/test_*.py).
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def assert_close(got, want, atol, rtol, what=""):
    got, want = got.double().cpu(), want.double().cpu()
    err = (got - want).abs()
    bound = atol + rtol * want.abs()
    worst = (err / bound).max().item() if err.numel() else 0.0
    assert worst <= 1.0, f"{what}: max |got - want| = {err.max().item():.3g}, {worst:.3g} x the tolerance " \
                         f"(atol={atol}, rtol={rtol})"


@pytest.fixture
def restore_config():
    before = opreg.config.as_dict()
    yield
    before.pop("plugins")
    opreg.config.update(**before)


def plugin_path():
    return os.environ.get("OPREG_TEST_PLUGIN")
