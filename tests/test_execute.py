"""The one case loop: skips, failures and interrupts never lose a finished case or end a run."""

import json

import pytest
from fakeclock import FakeClock

from perfsuite.core.config import RunConfig
from perfsuite.core.errors import ConfigError, PerfsuiteError, Unsupported
from perfsuite.core.params import Param
from perfsuite.core.record import Work
from perfsuite.core.workload import BuiltStep, Workload
from perfsuite.run.execute import Case, Events, check_cases, run_cases
from perfsuite.storage.files import ResultsWriter, load_records


class Broken(PerfsuiteError):
    """Stands for a perfsuite error raised while building a case (a checkpoint that does not load)."""


def _workload(behaviour):
    def build(params, device):
        behaviour(params["x"])
        return BuiltStep(fn=lambda: None, work=Work(items_per_step=1, item_unit="calls"))

    def check(params, device):
        if params["x"] == 99:
            raise Unsupported("x=99 cannot run on this device")

    return Workload("toy", "a test workload", (Param("x", int, 1),), build, checker=check)


CFG = RunConfig(max_time=0.5)


def _run(cases, tmp_path, events=None):
    writer = ResultsWriter(tmp_path / "out.json")
    clock = FakeClock(step_s=1e-3, seed=0)
    return writer, run_cases(check_cases(cases, "cpu"), CFG, outputs=(writer,), env={}, events=events, clock=clock)


@pytest.mark.slow
def test_a_perfsuite_error_in_one_case_is_its_failure_and_the_run_goes_on(tmp_path):
    """On an H100 a checkpoint case raised a perfsuite error and the whole gpu suite stopped."""

    def behaviour(x):
        if x == 2:
            raise Broken("does not fit this model/optimiser; nothing restored")

    w = _workload(behaviour)
    writer, out = _run([Case(w, {"x": 1}), Case(w, {"x": 2}), Case(w, {"x": 3})], tmp_path)
    assert [r.params["x"] for r in out.records] == [1, 3]
    (failure,) = out.failures
    assert failure["params"] == {"x": 2} and failure["kind"] == "error"
    assert failure["error"].startswith("Broken: does not fit") and "test_execute.py" in failure["where"]
    doc = json.loads((tmp_path / "out.json").read_text())
    assert len(doc["failures"]) == 1 and len(load_records(tmp_path / "out.json")) == 2


def test_out_of_memory_is_recorded_as_oom(tmp_path):
    def behaviour(x):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    _, out = _run([Case(_workload(behaviour), {"x": 1})], tmp_path)
    assert out.failures[0]["kind"] == "oom" and not out.records


def test_unsupported_cases_are_skipped_with_their_reason(tmp_path):
    skipped = []

    class Hear(Events):
        def skipped(self, case, reason):
            skipped.append((case.params["x"], reason))

    w = _workload(lambda x: None)
    _, out = _run([Case(w, {"x": 99}), Case(w, {"x": 1})], tmp_path, Hear())
    assert skipped == [(99, "x=99 cannot run on this device")]
    assert len(out.records) == 1 and not out.failures


def test_bad_parameters_stop_before_anything_runs(tmp_path):
    built = []
    w = _workload(built.append)
    with pytest.raises(ConfigError, match="'x'"):
        check_cases([Case(w, {"x": 1}), Case(w, {"x": "many"})], "cpu")
    assert built == []


def test_interrupt_keeps_every_finished_case(tmp_path):
    def behaviour(x):
        if x == 3:
            raise KeyboardInterrupt

    w = _workload(behaviour)
    writer, out = _run([Case(w, {"x": 1}), Case(w, {"x": 2}), Case(w, {"x": 3}), Case(w, {"x": 4})], tmp_path)
    assert out.interrupted
    assert [r.params["x"] for r in load_records(tmp_path / "out.json")] == [1, 2]


def test_each_case_is_checked_once_and_the_loop_measures_what_was_checked(tmp_path):
    """Issue 52: commands checked their cases before claiming a file and the loop checked them
    again; now the loop measures the CheckedCases that check_cases made, without checking."""
    checked_params = []
    w = _workload(lambda x: None)
    validate = w.checker
    object.__setattr__(
        w, "checker", lambda params, device: checked_params.append(params["x"]) or validate(params, device)
    )
    checked = check_cases([Case(w, {"x": 1}), Case(w, {"x": 99}), Case(w, {"x": 2})], "cpu")
    assert checked_params == [1, 99, 2] and checked.unsupported == {1: "x=99 cannot run on this device"}
    with pytest.raises(Unsupported, match="x=99 cannot run"):
        checked.runnable()  # a command that measures exactly what it was asked to refuses it
    # a suite's cases not yet done: the selection keeps each case's reason, re-indexed
    assert checked.select([2, 1]).unsupported == {1: "x=99 cannot run on this device"}
    out = run_cases(checked.select([2, 1]), CFG, env={}, clock=FakeClock(step_s=1e-3, seed=0))
    assert checked_params == [1, 99, 2]  # the loop did not check again
    assert [r.params["x"] for r in out.records] == [2] and [c.params["x"] for c, _ in out.unsupported] == [99]
