"""perfsuite.measuring.workers: a case's budget over fresh processes, merged into one record; failures are the case's.

Most tests start workers with "fork" (milliseconds: torch is imported here once, not per worker)
and fake clocks; one takes the real "spawn" road with a worker body that imports no torch.
"""

import json
import os
import sys

import numpy as np
import pytest
import torch  # noqa: F401 - imported once here, so that forked workers do not each import it
from fakeclock import FakeClock
from records import make_record

from perfsuite.core.config import RunConfig
from perfsuite.core.errors import Unsupported
from perfsuite.core.params import Param
from perfsuite.core.record import Record, Work
from perfsuite.core.workload import BuiltStep, Workload
from perfsuite.measuring import workers
from perfsuite.run.execute import Case, check_cases, run_cases
from perfsuite.storage.files import ResultsWriter, load_records


def _noop():
    return None


def _build(params, device):
    if params["x"] == 2:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    if params["x"] == 3:
        os._exit(7)  # a crash: no exception, no message
    if params["x"] == 4:
        raise Unsupported("x=4 needs a package this machine lacks")
    return BuiltStep(fn=_noop, work=Work(items_per_step=1, item_unit="calls"))


TOY = Workload("toy", "a test workload", (Param("x", int, 1),), _build)


@pytest.fixture
def fork(monkeypatch):
    monkeypatch.setattr(workers, "START_METHOD", "fork")


def _child(median_s, seed, **conditions):
    rec = make_record(median_s=median_s, n=20, seed=seed, sigma=0.01)
    from dataclasses import replace

    return replace(
        rec,
        conditions={
            "processes": 1,
            "cpus": [0, 1],
            "torch_threads": 2,
            "timed_wall_s": 1.0,
            "steal_fraction": 0.0,
            "others_cpus": 0.1,
            **conditions,
        },
        config={"clock_overhead_s": 1e-7, "measure_s": 0.8},
        warnings=("noisy: IQR is 12% of the median",),
    )


def test_merge_keeps_every_process_and_reports_the_median_of_their_medians():
    children = [_child(1e-3, 0), _child(1.2e-3, 1, steal_fraction=0.09, timed_wall_s=3.0), _child(1.02e-3, 2)]
    rec = workers.merge(children, [11, 12, 13], RunConfig(max_time=3.0, processes=3))
    assert [p["pid"] for p in rec.processes] == [11, 12, 13]
    assert rec.samples_s == tuple(s for c in children for s in c.samples_s)
    assert rec.median_s == pytest.approx(children[2].median_s)  # the middle process, not the pooled samples
    assert rec.stats.ci_low < 1.0e-3 and rec.stats.ci_high > 1.2e-3  # the slow process widens the interval
    c = rec.conditions
    assert c["processes"] == 3 and c["between_share"] > 0.9 and c["timed_wall_s"] == 5.0
    assert c["steal_fraction"] == pytest.approx(0.09 * 3 / 5)  # weighted by each process's timed seconds
    text = "\n".join(rec.warnings)
    assert "steal took 5.4%" in text and "between processes" in text and "did not converge" in text
    assert "processes 1,2,3 of 3: noisy" in text  # one line for what every process said
    # The "did not converge" line ends with the next step: processes 10% apart cannot reach +-1%.
    assert "compare versions in one interleaved `perfsuite gate`" in text
    close = [_child(1e-3, 0), _child(1.01e-3, 1), _child(1.005e-3, 2)]
    near = "\n".join(workers.merge(close, [1, 2, 3], RunConfig(max_time=3.0, processes=3)).warnings)
    need = int(near.split("next: --processes ")[1].split()[0])
    assert 3 < need <= 64 and f"--max-time {need}" in near  # one second a process, as this run had
    back = Record.from_dict(json.loads(rec.to_json()))
    assert back.median_s == rec.median_s and back.processes == rec.processes


def test_describe_says_how_much_is_between_processes():
    rec = workers.merge([_child(1e-3, 0), _child(1.2e-3, 1)], [1, 2], RunConfig(processes=2))
    line = workers.describe(rec)
    assert "2 processes" in line and "between processes" in line and "t interval" in line
    assert workers.describe(make_record()) is None


@pytest.mark.slow
def test_the_budget_is_spread_over_the_workers(fork):
    clock = FakeClock(step_s=1e-3, noise=0.01, seed=3)
    rec = workers.run_in_workers(TOY, {"x": 1}, RunConfig(max_time=0.6, processes=3, device="cpu"), clock=clock)
    assert len(rec.processes) == 3 and len({p["pid"] for p in rec.processes}) == 3
    assert os.getpid() not in {p["pid"] for p in rec.processes}
    assert all(p["conditions"]["processes"] == 1 for p in rec.processes)
    # Each worker measured a third of the budget: its fake clock ran out at about 0.2 s.
    assert all(p["conditions"]["timed_wall_s"] > 0 for p in rec.processes)
    assert rec.config["max_time"] == 0.6 and rec.conditions["processes"] == 3


@pytest.mark.parametrize(
    "x, kind, message",
    [
        (2, "oom", "worker 1/2 (pid"),
        (3, "error", "exited with code 7 before sending its record"),
    ],
)
@pytest.mark.slow
def test_a_worker_failure_is_the_cases_failure_and_the_run_goes_on(fork, tmp_path, x, kind, message):
    writer = ResultsWriter(tmp_path / "out.json")
    out = run_cases(
        check_cases([Case(TOY, {"x": x}), Case(TOY, {"x": 1})], "cpu"),
        RunConfig(max_time=0.2, processes=2),
        outputs=(writer,),
        env={},
        clock=FakeClock(step_s=1e-3, seed=0),
    )
    (failure,) = out.failures
    assert failure["kind"] == kind and message in failure["error"] and failure["params"] == {"x": x}
    assert [r.params["x"] for r in out.records] == [1] and len(load_records(tmp_path / "out.json")) == 1


def test_unsupported_in_a_worker_is_a_skip(fork):
    out = run_cases(
        check_cases([Case(TOY, {"x": 4})], "cpu"),
        RunConfig(max_time=0.2, processes=2),
        env={},
        clock=FakeClock(step_s=1e-3, seed=0),
    )
    assert not out.failures and not out.records and "lacks" in out.unsupported[0][1]


@pytest.mark.slow
def test_spawned_workers_are_fresh_interpreters_that_find_the_workload_by_name():
    from workerjobs import fake_worker

    from perfsuite.core import registry

    rec = workers.run_in_workers(
        registry.get("noop"),
        {},
        RunConfig(max_time=0.4, processes=2),
        clock=FakeClock(step_s=1e-4, noise=0.01, seed=5),
        target=fake_worker,
    )
    procs = rec.processes
    assert [p["conditions"]["found_by_name"] for p in procs] == [True, True]
    assert [p["conditions"]["share_s"] for p in procs] == [0.2, 0.2] and procs[0]["conditions"]["processes"] == 1
    assert len({p["pid"] for p in procs} | {os.getpid()}) == 3


@pytest.mark.slow
def test_a_workload_registered_by_a_plain_import_reaches_spawned_workers(tmp_path, monkeypatch):
    """Not found by discovery (the user's script imported its module): the worker's registry
    does not hold it, so the worker gets the object, not a name it cannot look up."""
    from workerjobs import fake_worker

    (tmp_path / "plainmod_toy.py").write_text(
        "import perfsuite\n\n\n@perfsuite.workload()\ndef plain_toy(device: str):\n"
        "    return perfsuite.Step(lambda: None)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import plainmod_toy  # noqa: F401 - registers plain_toy, as a user's script would

    from perfsuite.core import registry

    try:
        rec = workers.run_in_workers(
            registry.get("plain_toy"),
            {},
            RunConfig(max_time=0.4, processes=2),
            clock=FakeClock(step_s=1e-4, noise=0.01, seed=5),
            target=fake_worker,
            start_method="spawn",
        )
        assert [p["conditions"]["found_by_name"] for p in rec.processes] == [False, False]
    finally:
        registry._REGISTRY.pop("plain_toy", None)
        sys.modules.pop("plainmod_toy", None)


@pytest.mark.slow
def test_run_processes_option_measures_in_workers(fork, capsys, tmp_path):
    from perfsuite.cli.app import main

    out = tmp_path / "r.json"
    assert main(["run", "noop", "--device", "cpu", "--processes", "2", "--max-time", "0.4", "--out", str(out)]) == 0
    (rec,) = load_records(out)
    assert len(rec.processes) == 2 and rec.conditions["processes"] == 2 and rec.config["processes"] == 2
    assert all(p["pid"] != os.getpid() and len(p["samples_s"]) >= 1 for p in rec.processes)
    assert "noop[]: 2 processes" in capsys.readouterr().out.replace("\n", "")


def test_trace_cannot_be_combined_with_workers(tmp_path):
    from perfsuite.core.errors import ConfigError

    with pytest.raises(ConfigError, match="--trace"):
        run_cases(check_cases([Case(TOY, {"x": 1})], "cpu"), RunConfig(processes=2), trace_dir=tmp_path)


# ---- processes that differ in speed (issue 26, item 4) ---------------------------------------------


@pytest.mark.slow
def test_processes_that_differ_in_speed_give_an_interval_that_covers_the_spread_between_runs(no_gc_pauses):
    # Each process runs 5% apart (SD) and every build inside it alike (0.5%); samples say +-1%. A run in
    # worker processes takes its interval from the process medians and covers the true median (1 ms)
    # as often as it claims; one process with three builds sees only the builds' 0.5% and misses it.
    from fakeclock import multi_process_run, process_spread_case

    from perfsuite.measuring.runner import time_case

    covered = one_process_covered = 0
    for seed in range(20):
        rec = multi_process_run(seed)
        medians = rec.process_medians
        assert len(medians) == 5 and rec.builds is None and rec.conditions["processes"] == 5
        # The interval is the process medians' own spread, divided by sqrt(N), times t (2.78), with the
        # drift between runs (RunConfig.run_drift, 1%) that no run sees in itself added in quadrature.
        sd = float(np.std(np.log(medians), ddof=1))
        own = 2.776 * sd / 5**0.5
        assert np.log(rec.stats.ci_high / rec.median_s) == pytest.approx(np.hypot(own, np.log1p(0.01)), rel=0.01)
        assert rec.spread.rel_ci_halfwidth == pytest.approx(np.sinh(own), rel=0.01)  # the run's own, unwidened
        covered += rec.stats.ci_low <= 1e-3 <= rec.stats.ci_high
        workload, clock = process_spread_case(1000 * seed)
        alone = time_case(workload, {}, RunConfig(max_time=2.0, device="cpu", processes=1, builds=3), clock=clock)
        one_process_covered += alone.stats.ci_low <= 1e-3 <= alone.stats.ci_high
    assert covered >= 18
    assert one_process_covered <= 10  # what this test would have caught: builds of one process agree


@pytest.mark.slow
def test_compare_of_two_such_runs_of_the_same_step_is_never_slower_but_sees_a_real_slowdown(no_gc_pauses):
    from fakeclock import multi_process_run

    from perfsuite.compare.records import compare_records

    same = [compare_records([multi_process_run(2 * i)], [multi_process_run(2 * i + 1)]).cases[0] for i in range(10)]
    assert all(c.verdict != "slower" for c in same)
    assert all(c.basis.startswith("process medians (5 vs 5) per reference-kernel time") for c in same)
    slowed = [
        compare_records([multi_process_run(2 * i)], [multi_process_run(2 * i + 1, slower=1.3)]).cases[0]
        for i in range(10)
    ]
    assert [c.verdict for c in slowed] == ["slower"] * 10


def test_workers_by_default_are_as_many_as_the_budget_allows_each_with_one_build(fork):
    clock = FakeClock(step_s=1e-3, noise=0.01, seed=3)
    rec = workers.run_in_workers(TOY, {"x": 1}, RunConfig(max_time=4.0, device="cpu"), clock=clock)
    assert len(rec.processes) == 3 and rec.conditions["processes"] == 3  # one per 2 s of budget, never two
    assert rec.builds is None and all(p["conditions"]["builds"] == 1 for p in rec.processes)
    assert rec.config["processes"] is None and rec.config["builds"] is None  # the defaults, as asked


def test_an_entry_point_workload_goes_by_name_a_plain_import_as_the_object(monkeypatch, tmp_path):
    """A worker loads the entry points again, so their workloads are found by name there; a
    workload only a plain import registered is not, so it is sent as the object."""
    import importlib.metadata

    from perfsuite.core import discover, registry

    (tmp_path / "ep_pkg_toy.py").write_text(
        "import perfsuite\n\n\n@perfsuite.workload()\ndef ep_toy(device: str):\n    return perfsuite.Step(lambda: None)\n"
    )
    (tmp_path / "plain_pkg_toy.py").write_text(
        "import perfsuite\n\n\n@perfsuite.workload()\ndef plain_toy2(device: str):\n    return perfsuite.Step(lambda: None)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint("toy", "ep_pkg_toy", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [ep] if group == ep.group else [])
    monkeypatch.setattr(discover, "_entry_points_loaded", False)
    monkeypatch.setattr(discover, "_entry_point_workloads", set())
    try:
        discover.load_entry_points()
        import plain_pkg_toy  # noqa: F401

        assert workers._portable(registry.get("ep_toy")) == "ep_toy"
        assert workers._portable(registry.get("plain_toy2")) is registry.get("plain_toy2")
        assert workers._portable(registry.get("matmul")) == "matmul"
    finally:
        for name in ("ep_toy", "plain_toy2"):
            registry._REGISTRY.pop(name, None)
        for mod in ("ep_pkg_toy", "plain_pkg_toy"):
            sys.modules.pop(mod, None)


def _nvml(n, power, clock):
    return {
        "status": "ok",
        "n": n,
        "interval_s": 0.05,
        "gpu": {"uuid": "GPU-x", "matched_by": "uuid"},
        "power_w": {"mean": power, "max": power + 10},
        "sm_clock_mhz": {"mean": clock, "max": clock},
    }


def test_the_merged_record_pools_every_processs_nvml_samples():
    # Measured on an H200 (2026-11-28): the first process ran cool, the others at the power cap;
    # the record kept the first one's summary alone and showed neither the power nor the clock.
    from dataclasses import replace

    kids = [
        replace(_child(1e-3, 0), nvml=_nvml(5, 180.0, 1900.0)),
        replace(_child(1e-3, 1), nvml=_nvml(30, 690.0, 1530.0)),
        replace(_child(1e-3, 2), nvml={"status": "unavailable", "reason": "NVML read failed"}),
    ]
    got = workers.merge(kids, [1, 2, 3], RunConfig(max_time=3.0, processes=3)).nvml
    assert got["n"] == 35 and got["processes"] == 2
    assert got["power_w"]["mean"] == pytest.approx((5 * 180 + 30 * 690) / 35)
    assert got["power_w"]["max"] == 700.0
    assert got["sm_clock_mhz"]["mean"] == pytest.approx((5 * 1900 + 30 * 1530) / 35)
    # No process sampled: the first one's reason is kept.
    none = [replace(_child(1e-3, i), nvml={"status": "unavailable", "reason": "not a CUDA device"}) for i in range(2)]
    assert workers.merge(none, [1, 2], RunConfig(processes=2)).nvml["reason"] == "not a CUDA device"


def test_a_compiled_case_is_measured_in_one_process_by_default():
    """Issue 54: `compile=true` compiled the step again in every worker (five compiles of 0.7-0.8 s
    at --max-time 10); by default a compiled case keeps to one process, as a one-build workload
    does. Processes asked for are given."""
    import dataclasses

    from perfsuite.core.config import RunConfig
    from perfsuite.core.registry import get
    from perfsuite.measuring.workers import worker_count

    w = get("resnet")
    cfg = RunConfig(max_time=10.0)
    assert cfg.workers > 1 and worker_count(w, cfg, {"compile": False}) == cfg.workers
    assert worker_count(w, cfg, {"compile": True}) == 1
    assert worker_count(w, RunConfig(max_time=10.0, processes=3), {"compile": True}) == 3
    assert worker_count(dataclasses.replace(w, max_builds=1), cfg, {}) == 1
