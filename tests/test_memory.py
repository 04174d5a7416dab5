import sys

import numpy as np
import pytest

from perfsuite.measuring.memory import CudaPeakMemory, HostPeakRSS, current_rss_bytes

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux only)")
MiB = 2**20


def _touch_fresh_pages(nbytes: int) -> None:
    """Map new anonymous memory and write every page: resident for sure, whatever malloc caches."""
    import mmap

    m = mmap.mmap(-1, nbytes)
    for off in range(0, nbytes, mmap.PAGESIZE):
        m[off] = 1
    m.close()


@linux_only
def test_peak_of_region_sees_an_allocation_inside_it():
    with HostPeakRSS() as mem:
        _touch_fresh_pages(200 * MiB)
    d = mem.to_dict()
    assert d["host_method"] == "clear_refs+VmHWM"
    assert d["host_peak_delta_bytes"] >= 150 * MiB


@linux_only
def test_peak_of_region_excludes_what_came_before():
    _touch_fresh_pages(300 * MiB)  # unmapped again, but the process high-water mark stays
    with HostPeakRSS() as mem:
        small = np.ones(1 * MiB // 8)
        del small
    assert mem.to_dict()["host_peak_delta_bytes"] < 50 * MiB


@linux_only
def test_fallback_warns_when_clear_refs_is_unavailable(monkeypatch):
    from perfsuite.measuring import memory

    monkeypatch.setattr(memory, "_CLEAR_REFS", "/nonexistent/clear_refs")
    with HostPeakRSS() as mem:
        pass
    assert mem.method == "ru_maxrss"
    assert any("whole process" in w for w in mem.warnings)
    assert mem.peak_bytes >= current_rss_bytes() * 0.5


def test_cuda_peak_memory_tracks_allocations(cuda_available):
    import torch

    with CudaPeakMemory(device="cuda:0") as mem:
        x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda:0")
        del x
    assert mem.max_allocated - mem.allocated_before >= 64 * MiB
    assert mem.max_reserved >= mem.max_allocated
