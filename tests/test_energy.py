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


def test_a_step_s_joules_are_read_over_a_region_of_its_own(tmp_path, monkeypatch):
    """A gate's side answers its energy from a region of its own (perfsuite.measuring.step_energy):
    one call before it, then steps until the region is long enough, joules divided by its steps."""
    from perfsuite.measuring.step_energy import step_energy

    root = _powercap(tmp_path, packages=(1_000_000,))
    monkeypatch.setattr(energy, "RAPL_ROOT", root)
    monkeypatch.setattr(energy, "MIN_REGION_S", 0.05)
    calls = []

    def step():
        calls.append(1)
        _advance(root, 2_000)  # 2 mJ a step
        time.sleep(0.005)

    got = step_energy(step, "cpu", 0.0)
    assert got["status"] == "ok" and got["source"] == "rapl"
    assert got["steps"] == len(calls) - 1 and got["per_step_j"] == pytest.approx(0.002)  # the first call is outside
    monkeypatch.setattr(energy, "RAPL_ROOT", tmp_path / "none")
    assert "no RAPL counter here" in step_energy(step, "cpu", 0.0)["reason"]


class _Side:
    """A gate side answering energy requests with joules per step from `joules` (None: no counter)."""

    def __init__(self, joules):
        self.joules, self.asked = joules, 0

    def request(self, req):
        assert req["op"] == "energy" and req["seconds"] > 0
        self.asked += 1
        if self.joules is None:
            return {"energy": energy.unavailable("no RAPL counter here")}
        return {"energy": {"status": "ok", "source": "rapl", "per_step_j": next(self.joules)}}


def test_energy_is_paired_like_time_and_read_as_a_word():
    """Issue 54: "same speed, 10% more energy" is a verdict too. Pairs of readings in turns, their
    ratios' t interval, the word from the interval against the threshold."""
    from perfsuite.compare.energy_pairs import LESS, MORE, SAME, UNDECIDED, sides_energy

    def around(j, spread=0.01):
        return iter([j * (1 + spread * s) for s in (1, -1, 0.5, -0.5, 0.2, -0.2, 0, 0)])

    more = sides_energy(_Side(around(2.0)), _Side(around(2.2)), threshold=0.01, alpha=0.01)
    assert more.word == MORE and len(more.ratios) == 6 and more.interval[0] > 1.05
    assert "more energy, ratio 1.1" in more.describe() and "6 pairs of rapl readings" in more.describe()
    same = sides_energy(_Side(around(2.0, 0.001)), _Side(around(2.0, 0.001)), threshold=0.01, alpha=0.01)
    assert same.word == SAME and same.interval[0] <= 1 <= same.interval[1]
    less = sides_energy(_Side(around(2.0)), _Side(around(1.6)), threshold=0.01, alpha=0.01)
    assert less.word == LESS
    noisy = sides_energy(_Side(around(2.0, 0.3)), _Side(around(2.04, -0.3)), threshold=0.01, alpha=0.01)
    assert noisy.word == UNDECIDED  # spread of 30% between pairs: neither more, less nor the same
    base, new = _Side(None), _Side(around(2.0))
    none = sides_energy(base, new, threshold=0.01, alpha=0.01)
    assert not none.ratios and base.asked == 1 and new.asked == 0  # ended at the first reading that failed
    assert none.describe() == "energy not measured: no RAPL counter here"


def test_a_gate_verdict_keeps_its_energy_and_says_it():
    """The verdict carries the paired energy (gate documents version 4) and describes it after the
    time; a verdict read back from its document keeps it."""
    from perfsuite.compare.energy_pairs import EnergyVerdict
    from perfsuite.compare.paired_gate import GateVerdict, PairedRun
    from perfsuite.core import documents

    run = PairedRun(ratios=[1.0, 1.01, 0.99, 1.0] * 5, block_size=1)
    v = GateVerdict("case", 0.01, run, energy=EnergyVerdict("nvml", [1.1, 1.12, 1.09, 1.11], 2.0, 2.2))
    assert v.describe().startswith(v.word) and "; more energy, ratio 1.10" in v.describe()
    back = documents.validate("gate", [v.to_dict()], "here", model=GateVerdict)[0]
    assert back.energy == v.energy and v.to_dict()["energy"]["word"] == "more energy"
    older = {k: x for k, x in v.to_dict().items() if k != "energy"}  # a verdict of version 3
    assert documents.validate("gate", [older], "here", model=GateVerdict)[0].energy is None
    # The console's line: the pairs counted beside the time verdict, the energy after it all.
    from perfsuite.cli.gate import verdict_line

    line = verdict_line(v)
    assert line.index(" over 20 pairs in ") < line.index("more energy") and "readings over 20 pairs" not in line


def test_a_cuda_steps_joules_come_from_nvmls_counter_emulated(monkeypatch):
    """The CUDA road of a side's energy region (perfsuite.measuring.step_energy), on the CPU: a fake
    NVML whose counter advances 45 J a reading, the device's wait stood in. Joules per step are the
    counter's two readings' difference over the steps in the region; a board without the counter
    says so."""
    from perfsuite.measuring import step_energy as region

    waited = []
    monkeypatch.setattr(region, "synchronize", lambda device: waited.append(device))
    monkeypatch.setattr(energy, "MIN_REGION_S", 0.02)
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(itertools.count(5_000_000, 45_000)))  # mJ
    calls = []

    def step():
        calls.append(1)
        time.sleep(0.005)

    got = region.step_energy(step, "cuda:0", 0.0)
    assert got["status"] == "ok" and got["source"] == "nvml" and waited == ["cuda:0", "cuda:0"]
    assert got["steps"] == len(calls) - 1 and got["per_step_j"] == pytest.approx(45.0 / got["steps"])
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(None))
    assert "no NVML energy counter" in region.step_energy(step, "cuda:0", 0.0)["reason"]


@pytest.mark.parametrize(
    ("asked", "device", "paired"),
    [(None, "cuda:0", True), (None, "cuda", True), (None, "cpu", False), (False, "cuda:1", False), (True, "cpu", True)],
)
def test_energy_is_paired_by_default_on_cuda_only(asked, device, paired):
    """A gate's sides pair joules by default where NVML's counter is the rule (any cuda device,
    cuda:N included) and not on the CPU; what the user asks wins either way."""
    from perfsuite.compare.gate_sides import GateArms
    from perfsuite.compare.settings import GateSettings

    arms = GateArms.of(GateSettings(energy=asked), "base.py", "new.py", ("base", "new"), device)
    assert arms.energy is paired
