"""pytest-benchmark front-end: perfsuite's runner behind the `benchmark` fixture.

A pytest plugin (entry point `pytest11`), inert unless the project's pyproject.toml has a
[tool.perfsuite] table. Then `pytest --benchmark-only` in that project collects one benchmark
test per case of each of its workloads' default sweep, with no test file written:
perfsuite's calibration chooses the rounds and iterations, the clock synchronises CUDA, and
throughput, FLOP/s and peak memory land in `extra_info`. `pytest --benchmark-disable` runs
each step once, as a smoke test. `benchmark_case` is also the body of perfsuite's own
benchmark tests (tests/perf/) and can be called from a user's test for custom cases.
"""

from __future__ import annotations

import collections
import contextlib
import sys
import time
import types
from pathlib import Path

import pytest

from perfsuite.core.config import RunConfig
from perfsuite.core.discover import discover, find_project, project_workloads
from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.core.params import expand_sweep
from perfsuite.measuring.fingerprint import fingerprint
from perfsuite.storage.machine_drift import default_log


def add_options(parser) -> None:
    group = parser.getgroup("perfsuite")
    group.addoption("--perfsuite-device", default="auto", help="auto | cpu | cuda | cuda:N")
    group.addoption(
        "--perfsuite-max-time",
        type=float,
        default=3.0,
        help="seconds per benchmark case, calibration included (default 3)",
    )


def pytest_addoption(parser) -> None:
    add_options(parser)


@pytest.hookimpl(optionalhook=True)  # pytest-benchmark's hook: without it installed, nothing to update
def pytest_benchmark_update_machine_info(config, machine_info) -> None:
    machine_info["perfsuite"] = fingerprint()


class Replay:
    """Recorded step times as clock readings: two per round, one recorded step apart, so that
    pytest-benchmark's statistics, table, JSON and comparisons show the record's own samples."""

    def __init__(self, samples) -> None:
        self._times: collections.deque[float] = collections.deque()
        t = 0.0
        for s in samples:
            self._times += [t, t + s]
            t += s

    def __call__(self) -> float:
        return self._times.popleft()

    def __len__(self) -> int:
        return len(self._times)


_replay: Replay | None = None


def replay_clock() -> float:
    """The timer a benchmark test that replays perfsuite's samples gives pytest-benchmark (its
    public way to choose the clock: `@pytest.mark.benchmark(timer=...)`, read when the fixture is
    made): the recorded readings while `replaying` holds some, the ordinary clock otherwise."""
    return _replay() if _replay else time.perf_counter()


# The marker such a test carries (the plugin's own tests carry it): `@replayed`, or
# `@pytest.mark.benchmark(timer=replay_clock, ...)` beside other benchmark settings.
replayed = pytest.mark.benchmark(timer=replay_clock)


@contextlib.contextmanager
def replaying(samples):
    """While inside, replay_clock reads back `samples` (per-step seconds) as a timer would."""
    global _replay
    _replay = Replay(samples)
    try:
        yield
    finally:
        _replay = None


def replays(request) -> bool:
    """Whether the test's benchmark fixture times with replay_clock (its `benchmark` marker)."""
    marker = request.node.get_closest_marker("benchmark")
    return marker is not None and marker.kwargs.get("timer") is replay_clock


def replay(benchmark, samples) -> None:
    """Hand a record's per-step samples to pytest-benchmark: one pedantic round per sample, each
    timed by replay_clock as the sample's own duration (the test must carry `replayed`)."""
    with replaying(samples):
        benchmark.pedantic(lambda: None, rounds=len(samples), iterations=1, warmup_rounds=0)


def measure_record(workload, params: dict, device: str, max_time: float):
    """One case measured by perfsuite's one case loop (perfsuite.run.execute.run_cases), as
    `perfsuite run` measures it: its record, or a skip or failure with the reason."""
    from perfsuite.database.recorder import for_frontend
    from perfsuite.run.execute import Case, check_cases, run_cases

    store = for_frontend(
        "pytest",
        {"workload": workload.name, "params": params, "max_time": max_time},
        warn=lambda text: sys.stderr.write(f"perfsuite: {text}\n"),
    )
    # The machine-speed log `perfsuite run` keeps too: the interval says where the next run lands.
    try:
        out = run_cases(
            check_cases([Case(workload, params)], device),
            RunConfig(device=device, max_time=max_time),
            env=fingerprint(device=device),
            machine_log=default_log(),
            outputs=(store,),
        )
    finally:
        if store is not None:
            store.finish()
            for note in store.notes:
                sys.stderr.write(f"perfsuite store: {note}\n")
    if out.interrupted:
        raise out.interrupted
    if out.unsupported:
        pytest.skip(out.unsupported[0][1])
    if out.failures:
        f = out.failures[0]
        pytest.fail(f"{f['error']}\n{f.get('traceback') or ''}", pytrace=False)
    return out.records[0]


def benchmark_case(benchmark, workload, params: dict, request, group: str | None = None) -> None:
    """Measure one case of `workload` for pytest-benchmark's fixture.

    Timed: perfsuite's runner measures the case (builds rotated, calibrated blocks, the device
    synchronised, memory, FLOPs), and its per-step samples are replayed through the fixture's timer
    in pedantic mode, so pytest-benchmark's figures are the record's samples: the test carries the
    `replayed` marker, which gives the fixture replay_clock (the tests this plugin collects do). perfsuite's own median
    (`median_s` in extra_info, from the builds' medians: it carries the variance between builds)
    and the throughput and FLOP/s computed from it may differ slightly from the pooled samples'
    median pytest-benchmark shows. Disabled
    (`--benchmark-disable`): the step runs once, untimed, as a smoke test."""
    from perfsuite.core.config import resolve_device

    if not replays(request):
        pytest.fail(
            f"{request.node.nodeid}: benchmark_case replays perfsuite's samples through the fixture's "
            "timer, which pytest-benchmark takes from the test's benchmark marker: mark the test "
            "@perfsuite.frontends.pytest_plugin.replayed (or give your benchmark marker "
            "timer=perfsuite.frontends.pytest_plugin.replay_clock)",
            pytrace=False,
        )
    device = resolve_device(request.config.getoption("--perfsuite-device"))
    try:
        workload.validate_case(params, device)
    except Unsupported as exc:
        pytest.skip(str(exc))
    benchmark.group = group or workload.name  # before pedantic(): the stats take it from there
    if benchmark.disabled:
        built = workload.build(params, device)
        if built.teardown is not None:
            request.addfinalizer(built.teardown)
        benchmark.pedantic(built.fn, rounds=1, iterations=1)  # benchmark.stats stays None
        return
    rec = measure_record(workload, params, device, request.config.getoption("--perfsuite-max-time"))
    benchmark.extra_info.update(
        params=rec.params,
        device=rec.device,
        item_unit=rec.work.item_unit,
        items_per_step=rec.work.items_per_step,
        flops_per_step=rec.work.flops_per_step,
        throughput=rec.throughput,
        throughput_unit=rec.throughput_unit,
        flops_per_s=rec.flops_per_s,
        record_id=rec.id,
        median_s=rec.median_s,
        median_ci_s=[rec.stats.ci_low, rec.stats.ci_high],
        timing=f"perfsuite's per-step samples ({rec.timing_method}), replayed",
        **rec.memory,
    )
    replay(benchmark, rec.samples_s)


def case_id(params: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items())


def _tests_for(workloads) -> types.ModuleType:
    """A module object holding one parametrised `test_<workload>` per user workload."""
    module = types.ModuleType("perfsuite_workloads")
    for w in workloads:
        cases = expand_sweep(w.default_sweep({}))

        def test(benchmark, case, request, _w=w):
            benchmark_case(benchmark, _w, case, request)

        test.__name__ = f"test_{w.name}"
        test.__doc__ = w.description
        # Ids from every parameter's value, defaults included: a workload of scalar defaults was `test_x[]`.
        setattr(
            module,
            test.__name__,
            replayed(pytest.mark.parametrize("case", cases, ids=[case_id(w.resolve(c)) for c in cases])(test)),
        )
    return module


class UserWorkloads(pytest.Module):
    """The project's workloads as a test module, collected from its pyproject.toml."""

    def _getobj(self):
        if not self.config.pluginmanager.has_plugin("benchmark"):  # pytest-benchmark, by its entry-point name
            raise self.CollectError("perfsuite's workloads need pytest-benchmark (pip install pytest-benchmark)")
        discover(start=self.path.parent)
        return _tests_for(project_workloads(self.path))


def _benchmarks_only(config) -> Path | None:
    """The project's pyproject.toml when `pytest --benchmark-only` was given no paths in a project
    with [tool.perfsuite]: then only its perfsuite workloads are collected (issue 50: in a repository
    whose pytest config sets `testpaths = ['tests']`, the documented command collected 15,551 of the
    project's own tests and stopped at one that could not import, exit 2). Named paths are
    collected as pytest would, their own benchmarks included."""
    if not getattr(config.option, "benchmark_only", False):
        return None
    source = getattr(config, "args_source", None)
    if source is None or source == pytest.Config.ArgsSource.ARGS:
        return None
    try:
        project = find_project(config.rootpath)
    except ConfigError:
        return None
    if project is None or project.parent.resolve() != Path(config.rootpath).resolve():
        return None
    return project


def pytest_configure(config) -> None:
    project = _benchmarks_only(config)
    if project is not None:
        config.args[:] = [str(project)]
        config.stash[_ONLY_WORKLOADS] = project


_ONLY_WORKLOADS = pytest.StashKey[Path]()


def pytest_report_header(config) -> str | None:
    project = config.stash.get(_ONLY_WORKLOADS, None)
    if project is None:
        return None
    return (
        f"perfsuite: --benchmark-only without paths collects the workloads of {project.name} only; "
        "name test paths to collect their benchmarks too"
    )


def pytest_collect_file(file_path: Path, parent):
    if file_path.name != "pyproject.toml":
        return None

    try:
        project = find_project(file_path.parent)
    except ConfigError:
        return None  # someone else's broken pyproject.toml (a template, a fixture): not ours to judge
    if project is None or project.resolve() != file_path.resolve():
        return None  # no [tool.perfsuite] here: the plugin stays out of the way
    return UserWorkloads.from_parent(parent, path=file_path)
