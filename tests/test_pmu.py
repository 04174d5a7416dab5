"""Instructions from the CPU's hardware counters, where a PMU can count (issue 56, item 2).

This VM exposes no PMU, so the road is proven here on a software counter of the same system call:
the user-space page faults a step takes, which are exact (a step that touches N new pages takes N).
What stays unproven here: the hardware event itself (instructions:u) and its run-to-run spread."""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

import pytest

from perfsuite.measuring import instructions, pmu

PAGE_FAULTS = 2  # PERF_COUNT_SW_PAGE_FAULTS

STEPS_FILE = """
import mmap

import perfsuite


@perfsuite.workload(params={"pages": 64})
def touches_pages(pages: int, device: str):
    def step():
        m = mmap.mmap(-1, pages * 4096)
        for i in range(pages):
            m[i * 4096] = 1
        m.close()

    return perfsuite.Step(step, items=1, unit="calls")
"""

# Loaded first by the counting child (PYTHONPATH): page faults stand in for instructions there.
STAND_IN = """
import functools

from perfsuite.measuring import pmu

pmu.open_counter = functools.partial(pmu.open_counter, pmu.PERF_TYPE_SOFTWARE, 2)
"""


def _touch(pages: int) -> None:
    m = mmap.mmap(-1, pages * 4096)
    for i in range(pages):
        m[i * 4096] = 1
    m.close()


def test_a_counter_counts_the_block_only_and_exactly():
    """The system call's struct, its ioctls and its read, on a software event: the pages touched
    inside the block are counted, those outside are not."""
    try:
        fd = pmu.open_counter(pmu.PERF_TYPE_SOFTWARE, PAGE_FAULTS)
    except pmu.CounterRefused as exc:
        pytest.skip(f"this kernel opens no counter at all: {exc}")
    try:
        _touch(50)  # outside: not counted
        with pmu.counting(fd) as got:
            _touch(100)
        _touch(50)
        with pmu.counting(fd) as again:
            _touch(300)
    finally:
        os.close(fd)
    # the pages of the block, and at most a page or two of the interpreter's own beside them; the 50
    # touched before and after each block are not counted
    assert 100 <= got[0] <= 103 and 300 <= again[0] <= 303, (got, again)


def test_a_count_the_kernel_multiplexed_is_refused_not_scaled(monkeypatch):
    """A counter shared with other counters (perf or a profiler beside the step) runs part of the
    block only; its value would be an estimate. The enabled and running times that come with the
    value (read_format) say so, and the count is refused, naming why."""
    import struct

    try:
        fd = pmu.open_counter(pmu.PERF_TYPE_SOFTWARE, PAGE_FAULTS)
    except pmu.CounterRefused as exc:
        pytest.skip(f"this kernel opens no counter at all: {exc}")
    try:
        with pmu.counting(fd) as whole:  # a software counter runs the whole block
            _touch(10)
        assert 10 <= whole[0] <= 13
        monkeypatch.setattr(pmu.os, "read", lambda fd, n: struct.pack("QQQ", 1000, 2_000_000, 1_000_000))
        with pytest.raises(pmu.Multiplexed, match="ran 50% of the counted step"):
            with pmu.counting(fd):
                pass
    finally:
        monkeypatch.undo()
        os.close(fd)


def test_what_keeps_the_hardware_counter_from_counting_is_said(monkeypatch):
    """No PMU (this VM: ENOENT), the kernel's refusal (EACCES under perf_event_paranoid 3, as
    Debian's kernels), a container's filter (EPERM where the sysctl would allow it), no system call.
    Here, whatever the refusal, the count falls back to Callgrind."""
    assert "no PMU" in pmu._why(errno.ENOENT)
    monkeypatch.setattr(pmu, "_paranoid", lambda: 3)
    assert "perf_event_paranoid 3" in pmu._why(errno.EACCES) and "sysctl" in pmu._why(errno.EACCES)
    monkeypatch.setattr(pmu, "_paranoid", lambda: 2)
    assert "seccomp" in pmu._why(errno.EPERM) and "perf_event_paranoid is 2" in pmu._why(errno.EPERM)
    assert "not available" in pmu._why(errno.ENOSYS)
    monkeypatch.undo()
    why = pmu.refused()
    if why is None:
        pytest.skip("this machine's hardware counter counts: no refusal to show")
    assert instructions.method() == instructions.CALLGRIND  # refused, whatever the reason: Callgrind counts


def test_where_a_pmu_counts_the_step_is_counted_on_it_by_a_process_of_its_own(tmp_path, monkeypatch):
    """The whole road with the hardware counter stood in by the page-fault counter (in the counting
    process, through PYTHONPATH): no Valgrind runs, the record says "pmu", and the count is the
    step's: 64 and 192 pages touched a call."""
    try:
        os.close(pmu.open_counter(pmu.PERF_TYPE_SOFTWARE, PAGE_FAULTS))
    except pmu.CounterRefused as exc:
        pytest.skip(f"this kernel opens no counter at all: {exc}")
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(STAND_IN)
    root = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(shim), root]))
    monkeypatch.setenv("PATH", "/nonexistent")  # no valgrind: this road must not need it
    monkeypatch.setattr(pmu, "refused", lambda: None)
    monkeypatch.setattr(instructions, "child_folder_path", lambda: str(tmp_path / "count"))
    (tmp_path / "steps.py").write_text(STEPS_FILE)
    load = [str(tmp_path / "steps.py")]
    assert instructions.unavailable("cpu") is None
    small = instructions.count("touches_pages", {"pages": 64}, "cpu", load=load)
    large = instructions.count("touches_pages", {"pages": 192}, "cpu", load=load)
    assert small["status"] == "ok" and small["method"] == "pmu", small
    assert "hardware counter" in small["hardware"]
    # a step's page faults: its own pages, and at most a few of the interpreter's around them
    assert 64 <= small["per_step"] <= 70 and 192 <= large["per_step"] <= 198, (small, large)
    assert large["per_step"] - small["per_step"] == 128


def test_a_step_that_fails_on_the_pmu_road_is_a_failed_count_naming_why(tmp_path, monkeypatch):
    """Here the child's own hardware counter is refused (no PMU here; a kernel's or a container's
    refusal elsewhere): the count fails, saying why, and nothing raises (the timing stands)."""
    why = pmu.refused()
    if why is None:
        pytest.skip("this machine's PMU counts: the refusal cannot be shown here")
    monkeypatch.setattr(instructions, "method", lambda: instructions.PMU)
    monkeypatch.setattr(instructions, "child_folder_path", lambda: str(tmp_path / "count"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    (tmp_path / "steps.py").write_text(STEPS_FILE)
    got = instructions.count("touches_pages", {"pages": 8}, "cpu", load=[str(tmp_path / "steps.py")])
    assert got["status"] == "failed" and got["method"] == "pmu" and why in got["reason"], (why, got)


def test_counts_of_another_method_or_version_are_not_compared():
    """A hardware count and a simulated one differ; so do counts of other calls (method version 3
    counts the third call, records before it a mean of the fourth to sixth: up to 2% apart)."""
    from perfsuite.compare import work

    by_pmu = {"status": "ok", "per_step": 1_000_000.0, "method": "pmu", "method_version": 3}
    by_callgrind = {"status": "ok", "per_step": 2_000_000.0, "method": "callgrind", "method_version": 3}
    kind, details = work.change(None, None, by_pmu, by_callgrind)
    assert kind == work.UNKNOWN and any("not compared" in d for d in details), (kind, details)
    before_v3 = {"status": "ok", "per_step": 2_040_000.0, "method": "callgrind"}  # a stored record of before
    kind, details = work.change(None, None, before_v3, by_callgrind)
    assert kind == work.UNKNOWN and "callgrind before v3 and by callgrind v3: not compared" in details[-1], details
    kind, _ = work.change(None, None, by_callgrind, {**by_callgrind, "per_step": 2_100_000.0})
    assert kind == work.MORE  # the same method and version: compared
