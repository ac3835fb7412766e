"""The built extension and the libopreg it loads are self-contained (issue 33: importing opreg
before torch killed the process; libopreg needed libfmt and exported libstdc++'s and fmt's
template instances): checked with readelf on the build tree's files, which the wheel's are."""
import os
import shutil

import pytest

import opreg
from opreg import _opreg

import self_contained

pytestmark = pytest.mark.skipif(shutil.which("readelf") is None or shutil.which("nm") is None,
                                reason="needs binutils' readelf and nm")


def _libopreg():
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "/libopreg.so" in path:
            return path
    pytest.fail("libopreg.so is not mapped into this process")


def test_needed_entries_are_base_system_or_opregs_own():
    for path in (_opreg.__file__, _libopreg()):
        assert self_contained.problems(path) == []


def test_no_opencl_or_cuda_library_is_needed_even_with_those_backends_built():
    needed, _ = self_contained.dynamic(_libopreg())
    assert not [n for n in needed if "OpenCL" in n or "cuda" in n or "fmt" in n], needed


def test_the_extension_exports_its_init_function_alone():
    assert self_contained.exported(_opreg.__file__) == ["PyInit__opreg"]


def test_libopreg_exports_only_namespace_opreg():
    names = self_contained.exported(_libopreg())
    assert names and all("opreg::" in n for n in names), [n for n in names if "opreg::" not in n][:5]
    assert os.path.basename(_libopreg()).startswith("libopreg.so")
