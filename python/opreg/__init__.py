"""opreg for Python: one front door for ML kernels on many devices.

Every op direction of opreg's manifest is a function here (``rms_norm_fwd``, ``rms_norm_bwd``,
``layer_norm_fwd``, ...) taking DLPack-capable tensors (torch, NumPy, CuPy, JAX) without a copy,
on their own device; the caller passes the outputs, as in the C++ API. ``opreg.torch`` is the
PyTorch face (Liger-Kernel-shaped autograd functions and modules). docs/python.md has the tour.
"""
import os as _os
import sys as _sys
from collections import namedtuple as _namedtuple

from . import _opreg
from ._config import config
from ._opreg import (
    CallResult,
    DeviceError,
    Error,
    InternalError,
    InvalidArgumentError,
    UnsupportedError,
)

__version__ = _opreg.__version__

# The op functions, one per op direction of the manifest: rms_norm_fwd(x, weight, y, rstd, *,
# eps=1e-06, offset=0.0, casting='llama', device=None, stream=0) and so on.
for _full, _entry in _opreg.OPS.items():
    globals()[_entry["function"].__name__] = _entry["function"]
del _full, _entry

Inference = _namedtuple("Inference", ["device", "why"])


def devices():
    """Every backend: availability and why, fallback policy, and its devices with properties
    (emulated ones say so), as a list of dicts."""
    return _opreg.devices()


def ops():
    """Every op ('rms_norm.fwd', ...) mapped to its variants in choice order (the first accepted
    one runs), each with priority, tunables, registration site (file:line, or the plugin's
    path) and whether OPREG_DISABLE or OPREG_FORCE_VARIANT applies to it."""
    return _opreg.ops()


def infer_device():
    """The device opreg picks when none is named (OPREG_DEVICE, else OPREG_BACKEND_ORDER or the
    backends' priority, skipping emulated ones), and why, as Inference(device, why)."""
    device, why = _opreg.infer_device()
    return Inference(device, why)


def _entry(op):
    entry = _opreg.OPS.get(op)
    if entry is None:
        raise InvalidArgumentError(
            f"op {op!r} is not an opreg op; accepted: {', '.join(_opreg.OPS)}")
    return entry


def signature(op):
    """The parameters of an op direction ('rms_norm.fwd'), from the manifest: its tensors in
    order (name, role in/out, kind, when present, in-place partner) and its scalars with
    defaults."""
    entry = _entry(op)
    return {"family": entry["family"], "tensors": entry["tensors"], "scalars": entry["scalars"]}


def explain(op, *args, **kwargs):
    """Which variant would run for these arguments and why, without running anything: the
    OPREG_VERBOSE=2 lines as data. Takes the op's full name ('rms_norm.fwd') and then exactly
    the arguments of its function (opreg.rms_norm_fwd). Returns a dict: op, device, emulated,
    variant (None when none would run), how, rejected ([{variant, reason}] in choice order),
    copied and text (the log lines)."""
    return _entry(op)["explain"](*args, **kwargs)


def load_plugin(path):
    """Loads a plugin shared library (include/opreg/plugin.h) into the process-wide registry."""
    _opreg.load_plugin(_os.fsdecode(path) if isinstance(path, (bytes, _os.PathLike)) else path)


def plugins():
    """The plugins loaded, as resolved paths, in load order."""
    return _opreg.plugins()


def fallback_count():
    """How many calls ran on the cpu through host copies because a backend lacked the op."""
    return _opreg.fallback_count()


# The most cpu threads opreg takes (OPREG_NUM_THREADS and opreg.config.num_threads: 1 to 4096).
MAX_NUM_THREADS = 4096


def follow_torch_threads():
    """Sets opreg's cpu thread count to torch.get_num_threads(), clamped to 1..MAX_NUM_THREADS
    (4096), so that opreg's pool and torch's intra-op threads do not oversubscribe the cores;
    does nothing when OPREG_NUM_THREADS is set (it wins) or torch is not imported. opreg.torch
    calls it on import, and ``import opreg`` does when torch was imported first; it never makes
    an import fail (a value opreg refuses leaves the count as it was, with a warning)."""
    torch = _sys.modules.get("torch")
    if torch is None or "OPREG_NUM_THREADS" in _os.environ:
        return
    try:
        threads = min(max(int(torch.get_num_threads()), 1), MAX_NUM_THREADS)
        config.num_threads = threads
    except Exception as e:  # noqa: BLE001 - following torch is a courtesy, never a failure
        import warnings
        warnings.warn(f"opreg.follow_torch_threads: kept opreg's cpu thread count "
                      f"({config.num_threads}): {e}", RuntimeWarning, stacklevel=2)


follow_torch_threads()
