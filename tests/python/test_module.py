"""opreg's Python module: registry queries, configuration, errors, DLPack (numpy), device=."""
import numpy as np
import pytest
import torch

import opreg
from conftest import HAS_CUDA, plugin_path


def test_devices_list_backends_with_emulation_flags():
    by_name = {d["backend"]: d for d in opreg.devices()}
    assert by_name["cpu"]["available"] and by_name["cpu"]["devices"][0]["device"] == "cpu"
    assert not by_name["cpu"]["devices"][0]["emulated"]
    if by_name.get("npu", {}).get("available"):
        assert by_name["npu"]["devices"][0]["emulated"]


def test_ops_lists_every_op_direction_with_variants_in_priority_order():
    ops = opreg.ops()
    # Every op direction the module has a function for (both come from the manifest, by different
    # routes: the module's X-macros and the registry's lists).
    directions = sorted(n for n in dir(opreg) if n.endswith(("_fwd", "_bwd")) and callable(getattr(opreg, n)))
    assert len(directions) >= 12 and sorted(ops) == sorted(d[:-4] + "." + d[-3:] for d in directions)
    for base in sorted({d[:-4] for d in directions}):
        for direction in ("fwd", "bwd"):
            variants = ops[f"{base}.{direction}"]
            cpu = [v for v in variants if v["backend"] == "cpu"]
            assert cpu and cpu[-1]["impl"] == "ref", cpu  # the reference is tried last
            assert all(":" in v["site"] for v in cpu)
            assert [v["priority"] for v in cpu] == sorted((v["priority"] for v in cpu), reverse=True)


def test_infer_device_says_why():
    inf = opreg.infer_device()
    # CUDA first, then npu and xpu (emulated ones are skipped by inference), then the cpu.
    assert inf.device == ("cuda:0" if HAS_CUDA else "cpu") and inf.why


def test_signature_comes_from_the_manifest():
    sig = opreg.signature("rms_norm.fwd")
    assert [t["name"] for t in sig["tensors"]] == ["x", "weight", "y", "rstd"]
    assert {s["name"]: s["default"] for s in sig["scalars"]} == {"eps": "1e-6", "offset": "0.0", "casting": "llama"}
    assert opreg.signature("rms_norm.bwd")["tensors"][4]["partner"] == "dy"
    rope = opreg.signature("rope.fwd")
    assert [(t["name"], t["kind"]) for t in rope["tensors"]] == [
        ("q", "act"), ("k", "act2"), ("cos", "table"), ("sin", "table"), ("position_ids", "index"),
        ("q_out", "act"), ("k_out", "act2")]
    assert {s["name"]: (s["type"], s["default"]) for s in rope["scalars"]} == {"style": ("rope_style", "half")}


def test_rope_through_the_module_strided_and_with_position_ids():
    q = torch.randn(2, 5, 3, 8).transpose(1, 2)  # HF's view of [B, T, H, D] memory
    k = torch.randn(2, 5, 1, 8).transpose(1, 2)
    cos, sin = torch.randn(7, 8), torch.randn(7, 8)
    pos = torch.tensor([[6, 0, 3, 1, 2], [5, 4, 3, 2, 1]])
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    opreg.rope_fwd(q, k, cos, sin, pos, q_out, k_out, style="interleaved")
    c, s = cos[pos][:, None, :, 0::2], sin[pos][:, None, :, 0::2]  # pair i: entry 2i of a full row
    x1, x2 = q[..., 0::2], q[..., 1::2]
    want = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    assert torch.allclose(q_out, want, atol=1e-5, rtol=1e-5)
    with pytest.raises(opreg.InvalidArgumentError, match="rope.fwd: rope style 'sideways' is not accepted"):
        opreg.rope_fwd(q, k, cos, sin, pos, q_out, k_out, style="sideways")
    with pytest.raises(opreg.InvalidArgumentError, match="position_ids"):
        opreg.rope_fwd(q, k, cos, sin, pos[:, :4], q_out, k_out)


def _rms_args(rows=4, hidden=64, dtype=torch.float32):
    x = torch.randn(rows, hidden, dtype=dtype)
    w = torch.randn(hidden, dtype=dtype)
    return x, w, torch.empty_like(x), torch.empty(rows)


def test_raw_binding_runs_without_copies_and_reports_the_variant():
    x, w, y, rstd = _rms_args()
    r = opreg.rms_norm_fwd(x, w, y, rstd, eps=1e-6)
    assert r.variant.startswith("cpu.rms_norm.fwd.") and r.device == "cpu" and not r.copied and not r.fell_back
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(y, want, atol=1e-5, rtol=1e-5)


def test_explain_names_the_variant_and_the_rejected_ones():
    x, w, y, rstd = _rms_args()
    e = opreg.explain("rms_norm.fwd", x, w, y, rstd)
    assert e["variant"] == opreg.rms_norm_fwd(x, w, y, rstd).variant
    assert e["device"] == "cpu" and e["how"] and e["text"].startswith("opreg: dispatch rms_norm.fwd on cpu")
    variants = [v["name"] for v in opreg.ops()["rms_norm.fwd"] if v["backend"] == "cpu"]
    assert all(r["variant"] in variants and r["reason"] for r in e["rejected"])


def test_explain_with_a_disabled_variant_lists_it(restore_config):
    x, w, y, rstd = _rms_args()
    first = opreg.explain("rms_norm.fwd", x, w, y, rstd)["variant"]
    opreg.config.disable = [first]
    e = opreg.explain("rms_norm.fwd", x, w, y, rstd)
    assert e["variant"] != first
    assert {"variant": first, "reason": "disabled by OPREG_DISABLE"} in e["rejected"]


def test_explain_unknown_op():
    with pytest.raises(opreg.InvalidArgumentError, match="rms_norm.fwd"):
        opreg.explain("rms_norm.sideways")


def test_config_is_readable_settable_and_validated(restore_config):
    assert set(opreg.config.as_dict()) >= {"device", "verbose", "num_threads", "fallback", "disable"}
    opreg.config.verbose = 1
    assert opreg.config.verbose == 1
    with pytest.raises(opreg.InvalidArgumentError, match=r"config\.verbose=7: out of range; expected 0, 1 or 2"):
        opreg.config.verbose = 7
    assert opreg.config.verbose == 1  # a refused value changes nothing
    with pytest.raises(opreg.InvalidArgumentError, match="fallback"):
        opreg.config.fallback = "sometimes"
    with pytest.raises(opreg.InvalidArgumentError, match="no such setting"):
        opreg.config.update(colour="blue")
    with pytest.raises(AttributeError):
        opreg.config.plugins = []
    opreg.config.disable = "npu"
    assert opreg.config.disable == ["npu"]


def test_threads_follow_torch_unless_opreg_num_threads_is_set():
    import os
    import opreg.torch  # noqa: F401
    if "OPREG_NUM_THREADS" in os.environ:
        assert opreg.config.num_threads == int(os.environ["OPREG_NUM_THREADS"])
    else:
        assert opreg.config.num_threads == torch.get_num_threads()


def test_errors_are_one_class_per_kind_carrying_opregs_message():
    assert issubclass(opreg.InvalidArgumentError, opreg.Error) and issubclass(opreg.InvalidArgumentError, ValueError)
    assert issubclass(opreg.UnsupportedError, NotImplementedError) and issubclass(opreg.DeviceError, opreg.Error)
    x, w, y, rstd = _rms_args()
    with pytest.raises(opreg.InvalidArgumentError, match=r"rms_norm.fwd.*weight") as e:
        opreg.rms_norm_fwd(x, torch.randn(3), y, rstd)
    assert "\n" not in str(e.value)
    with pytest.raises(opreg.InvalidArgumentError, match=r"rms_norm.fwd: x is a list, not a tensor"):
        opreg.rms_norm_fwd([1.0], w, y, rstd)
    with pytest.raises(opreg.InvalidArgumentError, match="casting mode 'fancy'"):
        opreg.rms_norm_fwd(x, w, y, rstd, casting="fancy")
    with pytest.raises(opreg.InvalidArgumentError, match="f64"):
        opreg.rms_norm_fwd(x.double(), w.double(), y.double(), rstd)
    with pytest.raises(opreg.InvalidArgumentError, match="int8|i8|dtype"):
        opreg.rms_norm_fwd(x.to(torch.int8), w, y, rstd)
    with pytest.raises(opreg.InvalidArgumentError, match="device"):
        opreg.rms_norm_fwd(x, w, y, rstd, device="nowhere")


def test_numpy_arrays_through_dlpack_without_copies():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 40), dtype=np.float32)
    w = rng.standard_normal(40, dtype=np.float32)
    y = np.empty_like(x)
    rstd = np.empty(3, dtype=np.float32)
    opreg.rms_norm_fwd(x, w, y, rstd)
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, want, atol=1e-5, rtol=1e-5)
    a, b = rng.standard_normal((2, 8), dtype=np.float32), rng.standard_normal((2, 8), dtype=np.float32)
    c = np.empty_like(a)
    opreg.swiglu_fwd(a, b, c)
    np.testing.assert_allclose(c, a / (1 + np.exp(-a)) * b, atol=1e-6, rtol=1e-5)


def _npu_available():
    return any(d["backend"] == "npu" and d["available"] for d in opreg.devices())


@pytest.mark.skipif(not _npu_available(), reason="this build has no npu backend")
def test_device_npu_copies_in_and_out_and_says_so():
    x, w, y, rstd = _rms_args(rows=5, hidden=96)
    r = opreg.rms_norm_fwd(x, w, y, rstd, device="npu")
    assert r.copied and r.device == "npu:0" and r.variant.startswith("npu.rms_norm.fwd.")
    y_cpu, rstd_cpu = torch.empty_like(y), torch.empty_like(rstd)
    opreg.rms_norm_fwd(x, w, y_cpu, rstd_cpu)
    torch.testing.assert_close(y, y_cpu, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rstd, rstd_cpu, atol=1e-6, rtol=1e-5)
    e = opreg.explain("rms_norm.fwd", x, w, y, rstd, device="npu")
    assert e["emulated"] and e["variant"].startswith("npu.") and "(emulated)" in e["text"]


@pytest.mark.skipif(not plugin_path(), reason="OPREG_TEST_PLUGIN (the example plugin's path) is not set")
def test_load_plugin_registers_its_backend_and_variants():
    path = plugin_path()
    if path not in " ".join(opreg.plugins()):
        opreg.load_plugin(path)
    assert any(path.split("/")[-1] in p for p in opreg.plugins())
    from_plugin = [v for vs in opreg.ops().values() for v in vs if v["plugin"]]
    assert from_plugin and all(v["site"] for v in from_plugin)
    with pytest.raises(opreg.Error, match="already|twice|loaded"):
        opreg.load_plugin(path)
