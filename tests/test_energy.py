"""Joules per step (issue 54): NVML's total-energy counter read around a GPU's timed region (a fake
driver here: no GPU), RAPL's package counters on the CPU (a fake powercap tree), per step and
pooled over processes, and the record and report carrying it."""

from __future__ import annotations

import itertools
import sys
import time
import types

import pytest

from perfsuite.measuring import energy
from perfsuite.measuring.energy import RaplCounter
from perfsuite.measuring.nvml import NvmlSampler


def _powercap(tmp_path, packages=(1_000_000, 2_000_000), wrap=10_000_000):
    for i, uj in enumerate(packages):
        d = tmp_path / f"intel-rapl:{i}"
        d.mkdir()
        (d / "energy_uj").write_text(f"{uj}\n")
        (d / "max_energy_range_uj").write_text(f"{wrap}\n")
        sub = tmp_path / f"intel-rapl:{i}:0"  # a sub-domain (the cores): inside the package's count
        sub.mkdir()
        (sub / "energy_uj").write_text("999999999\n")
    return tmp_path


def _advance(root, by_uj):
    for d in root.glob("intel-rapl:?"):
        f = d / "energy_uj"
        max_uj = int((d / "max_energy_range_uj").read_text())
        f.write_text(f"{(int(f.read_text()) + by_uj) % max_uj}\n")


def test_rapl_sums_the_packages_not_their_sub_domains_and_survives_a_wrap(tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "MIN_REGION_S", 0.0)
    root = _powercap(tmp_path, packages=(9_500_000, 1_000_000))
    with RaplCounter(root) as c:
        _advance(root, 1_000_000)  # package 0 wraps past its 10 J range; 1 J each
    assert c.reading["status"] == "ok" and c.reading["source"] == "rapl"
    assert c.reading["energy_j"] == pytest.approx(2.0)


def test_rapl_says_why_when_there_is_none_or_the_region_is_too_short(tmp_path):
    with RaplCounter(tmp_path / "absent") as c:
        pass
    assert c.reading["status"] == "unavailable" and "no RAPL counter here" in c.reading["reason"]
    root = _powercap(tmp_path)
    with RaplCounter(root) as c:  # a region far shorter than the counters' updates
        _advance(root, 5)
    assert c.reading["status"] == "unavailable" and "updates every 20-100 ms" in c.reading["reason"]


def test_per_step_and_pooled_over_processes():
    a = energy.per_step({"status": "ok", "source": "nvml", "energy_j": 30.0, "region_s": 1.0}, 100, 8.0)
    assert a["per_step_j"] == pytest.approx(0.3) and a["items_per_j"] == pytest.approx(8 / 0.3)
    b = energy.per_step({"status": "ok", "source": "nvml", "energy_j": 10.0, "region_s": 1.0}, 100, 8.0)
    both = energy.pooled([a, b, energy.unavailable("short")])
    assert both["steps"] == 200 and both["per_step_j"] == pytest.approx(0.2)
    assert both["items_per_j"] == pytest.approx(40.0) and both["processes"] == 2
    assert energy.pooled([energy.unavailable("x")])["reason"] == "x"
    assert energy.per_step(energy.unavailable("y"), 10, 1.0)["reason"] == "y"


def _fake_pynvml(counter_mj):
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM = 1
    m.nvmlInit = lambda: None
    m.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=90, memory=30)
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=2**30)
    m.nvmlDeviceGetPowerUsage = lambda h: 300_000
    m.nvmlDeviceGetClockInfo = lambda h, kind: 1980
    if counter_mj is not None:
        m.nvmlDeviceGetTotalEnergyConsumption = lambda h: next(counter_mj)
    return m


def test_nvml_reads_the_energy_counter_at_the_regions_two_ends(monkeypatch):
    monkeypatch.setattr(energy, "MIN_REGION_S", 0.0)
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(itertools.count(5_000_000, 45_000)))  # mJ
    with NvmlSampler(index=0, interval_s=0.01) as s:
        time.sleep(0.05)
    assert s.energy["status"] == "ok" and s.energy["source"] == "nvml"
    assert s.energy["energy_j"] == pytest.approx(45.0)  # one reading at each end, 45 J between them


def test_a_gpu_without_the_energy_counter_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(None))
    with NvmlSampler(index=0, interval_s=0.01) as s:
        time.sleep(0.02)
    assert s.energy["status"] == "unavailable" and "no NVML energy counter" in s.energy["reason"]


def test_a_cpu_record_carries_its_joules_per_step_and_the_report_shows_them(tmp_path, monkeypatch):
    from perfsuite.core.config import RunConfig
    from perfsuite.core.registry import get
    from perfsuite.measuring.runner import time_case
    from perfsuite.report.markdown import write_report

    joules = itertools.count(0.0, 0.5)  # each read of the counter: 0.5 J later
    monkeypatch.setattr(RaplCounter, "_domains", lambda self: [tmp_path])
    monkeypatch.setattr(RaplCounter, "_read", lambda self, domains: [(next(joules), 1e9)])
    monkeypatch.setattr(energy, "MIN_REGION_S", 0.0)
    rec = time_case(get("noop"), {}, RunConfig(device="cpu", max_time=0.3))
    e = rec.conditions["energy"]
    steps = len(rec.samples_s) * rec.block_size
    assert e["status"] == "ok" and e["steps"] == steps and e["per_step_j"] == pytest.approx(0.5 / steps)
    page = write_report([rec], tmp_path / "rep").read_text()
    assert "| energy" in page and "J/step" in page and "rapl" in page
