"""opreg follows torch's thread count without ever failing: torch may run more threads than
opreg's maximum (4096), and then opreg takes the maximum."""
import importlib
import sys

import torch

import opreg
from conftest import restore_config  # noqa: F401 (fixture)


def test_follow_torch_threads_clamps_to_the_maximum(monkeypatch, restore_config):  # noqa: F811
    monkeypatch.delenv("OPREG_NUM_THREADS", raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 5000)
    opreg.follow_torch_threads()
    assert opreg.MAX_NUM_THREADS == 4096
    assert opreg.config.num_threads == 4096


def test_follow_torch_threads_takes_torchs_count(monkeypatch, restore_config):  # noqa: F811
    monkeypatch.delenv("OPREG_NUM_THREADS", raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    opreg.follow_torch_threads()
    assert opreg.config.num_threads == 3


def test_opreg_num_threads_wins(monkeypatch, restore_config):  # noqa: F811
    opreg.config.num_threads = 2
    monkeypatch.setenv("OPREG_NUM_THREADS", "2")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 5000)
    opreg.follow_torch_threads()
    assert opreg.config.num_threads == 2


def test_import_with_5000_torch_threads_does_not_fail(monkeypatch, restore_config):  # noqa: F811
    """`import opreg` after torch (a fresh import of the package's Python part; the extension
    module stays loaded) with torch reporting 5000 threads."""
    monkeypatch.delenv("OPREG_NUM_THREADS", raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 5000)
    reloaded = importlib.reload(sys.modules["opreg"])
    assert reloaded.config.num_threads == 4096
