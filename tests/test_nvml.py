import sys
import types

import pytest

from perfsuite.measure.nvml import NvmlSampler


def _fake_pynvml(fail_init=False):
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM = 1
    state = {"i": 0}

    def init():
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def util(h):
        state["i"] += 1
        return types.SimpleNamespace(gpu=50 + state["i"] % 2 * 40, memory=30)

    m.nvmlInit = init
    m.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    m.nvmlDeviceGetUtilizationRates = util
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=2 * 2**30)
    m.nvmlDeviceGetPowerUsage = lambda h: 150_000  # milliwatts
    m.nvmlDeviceGetClockInfo = lambda h, kind: 1410
    return m


def test_samples_are_summarised(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    import time

    with NvmlSampler(index=0, interval_s=0.005) as s:
        time.sleep(0.1)
    summary = s.summary()
    assert summary["status"] == "ok" and summary["n"] >= 5
    assert summary["gpu_util_pct"]["max"] == 90.0
    assert 50.0 < summary["gpu_util_pct"]["mean"] < 90.0
    assert summary["power_w"]["mean"] == pytest.approx(150.0)
    assert summary["sm_clock_mhz"]["max"] == 1410.0
    assert not s._thread.is_alive()


def test_without_nvml_the_summary_says_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(fail_init=True))
    with NvmlSampler(index=0) as s:
        pass
    assert s.summary() == {"status": "unavailable", "reason": "NVML could not start: NVML Shared Library Not Found"}


def test_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with NvmlSampler(index=0) as s:
        pass
    assert "nvidia-ml-py is not installed" in s.summary()["reason"]


def test_cpu_device_is_not_sampled():
    with NvmlSampler(index=None) as s:
        pass
    assert s.summary() == {"status": "unavailable", "reason": "not a CUDA device"}
