"""Bisect's good revision keeps its side processes across probes (perfsuite.compare.sides.SidePool);
start_all starts the rest together (fake sides: no process is started), and one real side forked
from the fork server."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from perfsuite.compare import sides


class FakeProc:
    def __init__(self) -> None:
        self.code = None

    def poll(self):
        return self.code


class FakeSide:
    started: list = []

    def __init__(self, label, wait=True, **spec) -> None:
        self.label, self.spec, self.proc, self.closed, self.faults = label, spec, FakeProc(), False, 7
        self.readied = 0
        FakeSide.started.append(self)
        if label == "broken":
            raise RuntimeError("cannot start")

    def alive(self):
        return self.proc.poll() is None

    def ready(self):
        self.readied += 1
        return self

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake(monkeypatch):
    FakeSide.started = []
    monkeypatch.setattr(sides, "Side", FakeSide)
    return FakeSide


def spec(label, keep=False):
    return dict(
        label=label,
        file="w.py",
        workload="w",
        params={"n": 1},
        device="cpu",
        builds=1,
        heap="steady",
        threads=1,
        root=None,
        keep=keep,
    )


def test_the_pool_serves_the_same_processes_to_every_case_and_the_others_start_each_time(fake):
    pool = sides.SidePool()
    cases = []
    for _ in range(3):
        pool.next_case()
        running: list = []
        got = sides.start_all(
            [spec("good", keep=True), spec("cand"), spec("good", keep=True), spec("cand")], running, pool
        )
        assert all(s.readied for s in got)
        assert [s.label for s in running] == ["cand", "cand"]  # the caller closes only these
        cases.append(got)
    goods = [(c[0], c[2]) for c in cases]
    assert goods[0] == goods[1] == goods[2] and goods[0][0] is not goods[0][1]  # two kept, reused
    assert len({id(c[1]) for c in cases}) == 3  # a candidate's sides are new in every case
    assert len(fake.started) == 2 + 2 * 3
    assert cases[2][0].faults == 0  # counted per case
    pool.close()
    assert all(s.closed for s in goods[0])


def test_a_kept_side_whose_process_ended_is_replaced(fake):
    pool = sides.SidePool()
    first = pool.side({k: v for k, v in spec("good").items() if k != "keep"})
    first.proc.code = -9
    pool.next_case()
    second = pool.side({k: v for k, v in spec("good").items() if k != "keep"})
    assert second is not first and first.closed and not second.closed
    pool.close()
    assert second.closed


def test_without_a_pool_every_side_starts_and_a_failing_start_leaves_the_started_ones_to_close(fake):
    running: list = []
    with pytest.raises(RuntimeError, match="cannot start"):
        sides.start_all([spec("a", keep=True), spec("broken")], running)
    assert [s.label for s in running] == ["a"]  # started, handed to the caller to close


# ---- a real side process ----------------------------------------------------------------------------

SIDE_FILE = """import os
import sys

import perfsuite
import mymod

try:
    import only_in_the_parent  # on the parent's sys.path, never a side's
    print("leaked", flush=True)
except ImportError:
    pass
print("side", os.getpid(), "parent", os.getppid(), flush=True)


@perfsuite.workload(params={"n": 1})
def w(n: int, device: str):
    def step():
        pass

    return perfsuite.Step(step, items=mymod.VALUE, unit="things")
"""


def test_a_real_side_is_forked_from_the_server_runs_its_checkouts_code_and_its_death_is_reported(tmp_path, monkeypatch):
    """Sides fork from the fork server the workers come from (torch imported there once), not from a
    new interpreter each: the side's parent is that server, its project module comes from its own
    checkout, its prints go to its log (kept readable, its name removed), and a side that dies is a
    SideFailed naming its exit code."""
    import os
    import re
    import sys

    root = tmp_path / "checkout"
    (root / "mymod").mkdir(parents=True)
    (root / "mymod" / "__init__.py").write_text("VALUE = 3\n")
    (root / "w.py").write_text(SIDE_FILE)
    logs = tmp_path / "tmp"
    logs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(logs))
    # The parent's own path and modules: another mymod, and a module no checkout has.
    other = tmp_path / "working-tree"
    (other / "mymod").mkdir(parents=True)
    (other / "mymod" / "__init__.py").write_text("VALUE = 5\n")
    (other / "only_in_the_parent.py").write_text("")
    monkeypatch.syspath_prepend(str(other))
    monkeypatch.setitem(sys.modules, "mymod", None)  # what is there now comes back after the test
    del sys.modules["mymod"]
    import mymod  # in this process's module table while the side starts

    assert mymod.VALUE == 5
    s = sides.Side("base", root / "w.py", "w", {"n": 1}, "cpu", builds=2, heap="default", threads=1, root=root)
    try:
        assert s.work["items_per_step"] == 3 and len(s.steps) == 2  # mymod of this checkout, not ours
        assert "leaked" not in s.output()
        assert s.steps[1].time(4) >= 0
        side_pid, parent_pid = (int(x) for x in re.search(r"side (\d+) parent (\d+)", s.output()).groups())
        assert side_pid == s.proc.pid and parent_pid != os.getpid()
        server = Path(f"/proc/{parent_pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        assert "multiprocessing.forkserver" in server and "torch" in server  # it preloaded torch
        assert not list(logs.glob("perfsuite-side-*"))  # the log's name is gone once the side has it open
        # Timing on the core every side shares (sides.side_cpus), once built: the driver keeps the others.
        allowed = Path(f"/proc/{side_pid}/status").read_text().split("Cpus_allowed_list:")[1].split()[0]
        want = sides.side_cpus("cpu", 1)
        assert allowed == (str(want[0]) if want else allowed)
        s.proc.kill()
        s.proc.join()
        assert not s.alive()
        with pytest.raises(sides.SideFailed, match=r"base: the side process ended \(exit -9\)"):
            s.steps[0].time(1)
    finally:
        s.close()


def test_sides_time_on_the_last_cpus_and_the_driver_on_the_others(monkeypatch):
    monkeypatch.setattr(sides, "_ALLOWED", (0, 1, 2, 3))
    assert sides.side_cpus("cpu", 1) == (3,) and sides.side_cpus("cpu", 2) == (2, 3)
    assert sides.side_cpus("cuda", 1) is None  # a GPU's sides are left where they are
    assert sides.side_cpus("cpu", 4) is None  # no CPU would be left to drive them
    monkeypatch.setattr(sides, "_ALLOWED", (0,))
    assert sides.side_cpus("cpu", None) is None


FLAGS_FILE = """
import perfsuite, torch


@perfsuite.workload(params={"n": [1]})
def w(n, device):
    print("flags", torch.backends.cudnn.benchmark, torch.are_deterministic_algorithms_enabled(), flush=True)
    return perfsuite.Step(lambda: None, items=1)
"""


def test_a_side_runs_with_the_callers_numerics_flags(tmp_path):
    """Issue 54: workers got the caller's TF32/cuDNN/determinism flags, side processes (gate,
    bisect, history, why) torch's defaults: a user who turned cuDNN's benchmark or deterministic
    algorithms on measured another step in the gate than in `run`."""
    import torch

    (tmp_path / "w.py").write_text(FLAGS_FILE)
    before = (torch.backends.cudnn.benchmark, torch.are_deterministic_algorithms_enabled())
    torch.backends.cudnn.benchmark = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        s = sides.Side("new", tmp_path / "w.py", "w", {"n": 1}, "cpu", builds=1, heap="default", threads=1)
        try:
            assert "flags True True" in s.output()
        finally:
            s.close()
    finally:
        torch.backends.cudnn.benchmark = before[0]
        torch.use_deterministic_algorithms(before[1])
