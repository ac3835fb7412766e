"""liger_kernel.utils: the device helpers Liger's tests call."""
import torch


def is_npu_available() -> bool:
    return hasattr(torch, "npu") and callable(getattr(torch.npu, "is_available", None)) and torch.npu.is_available()


def infer_device() -> str:
    """'cuda' where torch sees a CUDA (or ROCm) GPU, 'xpu' for an Intel GPU, else 'cpu'."""
    if torch.cuda.is_available():
        return "cuda"
    if is_npu_available():
        return "npu"
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    return "cpu"


def infer_comm_backend() -> str:
    """The torch.distributed backend for infer_device()'s devices."""
    return {"cuda": "nccl", "npu": "hccl", "xpu": "xccl"}.get(infer_device(), "gloo")


def infer_device_arch(device_id: int = 0) -> str:
    if torch.cuda.is_available():
        major, _ = torch.cuda.get_device_capability(device_id)
        return {9: "hopper", 10: "blackwell", 8: "ampere"}.get(major, f"sm_{major}x")
    return infer_device()


def is_peft_available() -> bool:
    try:
        import peft  # noqa: F401
    except ImportError:
        return False
    return True


def transformers_version_dispatch(required_version, before_fn, after_fn, before_args=(), after_args=(),
                                  before_kwargs=None, after_kwargs=None):
    """after_fn(*after_args, **after_kwargs) when the installed transformers is at least
    required_version, else before_fn(*before_args, **before_kwargs) (the tests build HF modules
    whose constructors changed between versions through it)."""
    from packaging.version import Version
    import transformers

    if Version(transformers.__version__) >= Version(required_version):
        return after_fn(*after_args, **(after_kwargs or {}))
    return before_fn(*before_args, **(before_kwargs or {}))
