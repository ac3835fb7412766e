"""A stand-in for the liger_kernel package, for running Liger-Kernel's own tests against
opreg.torch (tests/liger/README.md). Every name here is opreg's."""
import opreg.torch as _otorch  # noqa: F401  (fails loudly when opreg is not on the path)

__version__ = "0.8.2+opreg"
