"""Hostile inputs to the Python module (issue 34): every check of the caller's tensors runs before
anything does, with or without device=; no string is cut at a NUL; wrong types and ranges in
config.update are opreg errors naming the key; a made-up stream handle is refused, never read."""
import os
import stat
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import torch

import opreg


def _available(backend):
    return any(d["backend"] == backend and d["available"] for d in opreg.devices())


# Every device= target a build here has: the checks must not depend on it.
TARGETS = [None, "cpu"] + [b for b in ("npu", "xpu") if _available(b)]


def _rms(rows=4, hidden=64):
    torch.manual_seed(0)
    x = torch.randn(rows, hidden)
    w = torch.randn(hidden)
    y = torch.full((rows, hidden), 7.0)
    rstd = torch.full((rows,), 7.0)
    return x, w, y, rstd


@pytest.mark.parametrize("device", TARGETS)
def test_overlapping_outputs_are_refused_before_anything_runs(device):
    x, w, y, _ = _rms()
    before = y.clone()
    rstd_inside_y = y.reshape(-1)[:4]
    with pytest.raises(opreg.InvalidArgumentError, match="rms_norm.fwd: output rstd overlaps y"):
        opreg.rms_norm_fwd(x, w, y, rstd_inside_y, device=device)
    assert torch.equal(y, before), "a refused call wrote into the caller's tensors"


@pytest.mark.parametrize("device", TARGETS)
def test_dweight_inside_dx_is_refused_before_anything_runs(device):
    x, w, _, _ = _rms()
    rstd = torch.rand(4) + 0.5
    dy = torch.randn(4, 64)
    dx = torch.full((4, 64), 7.0)
    before = dx.clone()
    with pytest.raises(opreg.InvalidArgumentError, match="rms_norm.bwd: output dweight overlaps dx"):
        opreg.rms_norm_bwd(dy, x, w, rstd, dx, dx.reshape(-1)[:64], device=device)
    assert torch.equal(dx, before)


@pytest.mark.parametrize("device", [d for d in TARGETS if d not in (None, "cpu")])
def test_non_contiguous_output_with_device_is_refused_before_the_run(device):
    x, w, _, rstd = _rms()
    y_t = torch.full((64, 4), 7.0).t()  # (4, 64), not contiguous
    with pytest.raises(opreg.InvalidArgumentError, match=r"rms_norm.fwd: output y is not contiguous"):
        opreg.rms_norm_fwd(x, w, y_t, rstd, device=device)
    assert torch.all(rstd == 7.0), "another output was written before the refusal"


@pytest.mark.parametrize("device", TARGETS)
def test_in_place_form_still_works_with_device(device):
    x, w, _, _ = _rms()
    rstd = 1.0 / torch.sqrt((x.double() ** 2).mean(-1) + 1e-6)
    dy = torch.randn(4, 64)
    want_dx = torch.empty_like(dy)
    opreg.rms_norm_bwd(dy, x, w, rstd.float(), want_dx, torch.empty(64))
    dx = dy.clone()
    opreg.rms_norm_bwd(dx, x, w, rstd.float(), dx, torch.empty(64), device=device)  # dx is dy: in place
    torch.testing.assert_close(dx, want_dx, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value, what", [
    ("npu\x00:7", "device"), ("cpu\x00", "device")])
def test_device_with_a_nul_is_refused(value, what):
    x, w, y, rstd = _rms()
    with pytest.raises(opreg.InvalidArgumentError, match=r"rms_norm.fwd: device='.*\\x00.*': contains a NUL"):
        opreg.rms_norm_fwd(x, w, y, rstd, device=value)


def test_casting_with_a_nul_is_refused():
    x, w, y, rstd = _rms()
    with pytest.raises(opreg.InvalidArgumentError, match=r"rms_norm.fwd: casting='gemma\\x00bogus': contains a NUL"):
        opreg.rms_norm_fwd(x, w, y, rstd, casting="gemma\x00bogus")
    with pytest.raises(opreg.InvalidArgumentError, match="casting: expected a string, got int"):
        opreg.rms_norm_fwd(x, w, y, rstd, casting=1)


def test_plugin_path_with_a_nul_is_refused():
    with pytest.raises(opreg.InvalidArgumentError, match=r"load_plugin: path='.*\\x00/elsewhere': contains a NUL"):
        opreg.load_plugin("/nonexistent/libx.so\x00/elsewhere")
    assert opreg.plugins() == []


def test_plugin_fifo_or_device_is_refused_without_blocking():
    with tempfile.TemporaryDirectory() as tmp:
        fifo = os.path.join(tmp, "plugin.so")
        os.mkfifo(fifo)
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)
        with pytest.raises(opreg.InvalidArgumentError, match="it is a FIFO"):
            opreg.load_plugin(fifo)
    with pytest.raises(opreg.InvalidArgumentError, match="it is a character device"):
        opreg.load_plugin("/dev/zero")


@pytest.mark.parametrize("changes, message", [
    ({"num_threads": 2**70}, r"config\.num_threads=1180591620717411303424: out of range"),
    ({"num_threads": 5000}, r"config\.num_threads=5000: out of range; expected 0 \(the machine's cores\) to 4096"),
    ({"num_threads": 2.0}, r"config\.num_threads: expected a whole number .*got float"),
    ({"verbose": True}, r"config\.verbose: expected a whole number .*got bool"),
    ({"device": 3}, r"config\.device: expected a string, got int"),
    ({"fallback": 1}, r"config\.fallback: expected a string, got int"),
    ({"device": "cpu\x00x"}, r"config\.device='cpu\\x00x': contains a NUL"),
    ({"backend_order": ",cpu"}, r"config\.backend_order=',cpu': empty entry"),
    ({"backend_order": "cpu,"}, r"config\.backend_order='cpu,': empty entry"),
    ({"disable": "npu,,xpu"}, r"config\.disable='npu,,xpu': empty entry"),
    ({"force_variant": " , "}, r"config\.force_variant=' , ': empty entry"),
    ({"disable": ["npu", ""]}, r"config\.disable='': empty entry"),
    ({"disable": ["npu", 3]}, r"config\.disable entry: expected a string, got int"),
    ({"disable": 3}, r"config\.disable: expected a list of names or a comma-separated string, got int"),
])
def test_config_update_refuses_wrong_types_and_values_by_name(restore_config, changes, message):
    before = opreg.config.as_dict()
    with pytest.raises(opreg.InvalidArgumentError, match=message):
        opreg.config.update(**changes)
    assert opreg.config.as_dict() == before


def test_config_lists_are_parsed_as_the_variables_are(restore_config):
    opreg.config.update(backend_order=" cpu , npu ")
    assert opreg.config.backend_order == ["cpu", "npu"]
    opreg.config.update(backend_order="")
    assert opreg.config.backend_order == []


@pytest.mark.skipif(not _available("xpu"), reason="this build has no available xpu device")
@pytest.mark.parametrize("stream", [1, 0x1000, 2**64 - 8])
def test_made_up_xpu_stream_is_refused_not_dereferenced(stream):
    # In a child: before the fix the first one killed the interpreter (SIGSEGV in the driver).
    code = ("import torch, opreg\n"
            "x = torch.randn(4, 64); w = torch.randn(64); y = torch.empty(4, 64); r = torch.empty(4)\n"
            "try:\n"
            f"    opreg.rms_norm_fwd(x, w, y, r, device='xpu', stream={stream})\n"
            "except opreg.InvalidArgumentError as e:\n"
            "    print('refused:', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert "is not a command queue opreg made for this device" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("first", ["opreg, torch, numpy", "opreg.torch", "numpy, opreg, torch"])
def test_opreg_imports_before_torch_and_numpy(first):
    code = f"import {first}\nimport torch, numpy, opreg.torch\nprint(opreg.__version__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"`import {first}` then torch: exit {done.returncode}: {done.stderr[-2000:]}"


_HAS_CUDA = torch.cuda.is_available() and _available("cuda")


@pytest.mark.skipif(not _HAS_CUDA, reason="needs a CUDA GPU and opreg's cuda backend")
def test_cuda_streams_that_cannot_be_checked_are_refused_not_dereferenced():
    # In a child: before the fix a made-up handle crashed the process in the CUDA driver.
    code = """
import torch, opreg
x = torch.randn(4, 64, device='cuda'); w = torch.randn(64, device='cuda')
y = torch.empty(4, 64, device='cuda'); r = torch.empty(4, device='cuda')
dead = torch.cuda.Stream(); dead_handle = dead.cuda_stream; del dead
other = torch.cuda.Stream()
for bogus in (3, 0x1234, dead_handle, other.cuda_stream):
    try:
        opreg.rms_norm_fwd(x, w, y, r, stream=bogus)
        print('accepted', hex(bogus))
    except opreg.InvalidArgumentError as e:
        assert 'cannot be checked without the CUDA driver' in str(e), e
        print('refused', hex(bogus))
for good in (0, 1, 2, torch.cuda.current_stream().cuda_stream):
    opreg.rms_norm_fwd(x, w, y, r, stream=good)
with torch.cuda.stream(other):
    opreg.rms_norm_fwd(x, w, y, r, stream=other.cuda_stream)
torch.cuda.synchronize()
print('done')
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout}{done.stderr[-2000:]}"
    assert done.stdout.count("refused") == 4 and "done" in done.stdout, done.stdout


@pytest.mark.parametrize("value, message", [
    ("sometimes", r"geglu\.fwd: rounding mode 'sometimes' is not accepted; accepted: once, torch"),
    ("torch\x00x", r"geglu\.fwd: rounding='torch\\x00x': contains a NUL"),
    (3, r"geglu\.fwd: rounding: expected a string, got int")])
def test_bad_rounding_names_the_op_and_the_value(value, message):
    a = torch.randn(2, 8)
    with pytest.raises(opreg.InvalidArgumentError, match=message):
        opreg.geglu_fwd(a, a, torch.empty_like(a), rounding=value)
