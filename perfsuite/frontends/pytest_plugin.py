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

import types
from pathlib import Path

import pytest


def add_options(parser) -> None:
    group = parser.getgroup("perfsuite")
    group.addoption("--perfsuite-device", default="auto", help="auto | cpu | cuda | cuda:N")
    group.addoption("--perfsuite-max-time", type=float, default=3.0,
                    help="seconds per benchmark case, calibration included (default 3)")


def pytest_addoption(parser) -> None:
    add_options(parser)


@pytest.hookimpl(optionalhook=True)  # pytest-benchmark's hook: without it installed, nothing to update
def pytest_benchmark_update_machine_info(config, machine_info) -> None:
    from perfsuite.measure.env import fingerprint

    machine_info["perfsuite"] = fingerprint()


def benchmark_case(benchmark, workload, params: dict, request) -> None:
    """Measure one case of `workload` through pytest-benchmark's fixture, in pedantic mode."""
    from perfsuite.core.config import RunConfig, resolve_device
    from perfsuite.core.errors import Unsupported
    from perfsuite.measure.memory import HostPeakRSS
    from perfsuite.measure.runner import calibrate
    from perfsuite.measure.timing import PerfCounterClock

    device = resolve_device(request.config.getoption("--perfsuite-device"))
    try:
        workload.check(params, device)
    except Unsupported as exc:
        pytest.skip(str(exc))
    built = workload.build(params, device)
    if built.teardown is not None:
        request.addfinalizer(built.teardown)
    step = built.fn
    if device.startswith("cuda"):
        import torch

        inner = step

        def step():  # pytest-benchmark's wall clock must see the device work: host-inclusive timing
            inner()
            torch.cuda.synchronize(device)

    benchmark.group = workload.name
    benchmark.extra_info.update(params=workload.resolve(params), device=device, item_unit=built.work.item_unit,
                                items_per_step=built.work.items_per_step,
                                flops_per_step=built.work.flops_per_step)
    if benchmark.disabled:
        # Smoke test: the fixture runs the step once, untimed; benchmark.stats stays None.
        benchmark.pedantic(step, rounds=1, iterations=1)
        return
    from perfsuite.measure.system import pinned

    max_time = request.config.getoption("--perfsuite-max-time")  # seconds per case, as everywhere
    cfg = RunConfig(max_time=max_time)
    # pytest-benchmark times the step in this process (no worker processes here), on perfsuite's
    # default torch threads (one on the CPU: RunConfig.threads_on), as `perfsuite run` measures it.
    threads = cfg.threads_on(device)
    with pinned(None, threads):
        cal = calibrate([step], PerfCounterClock(), cfg)  # perfsuite's warm-up, block size
        est, iterations = cal.step_estimate_s, cal.block_size
        rounds = max(5, min(10_000, int(max_time * 0.6 / max(est * iterations, 1e-9))))
        with HostPeakRSS() as mem:
            benchmark.pedantic(step, rounds=rounds, iterations=iterations, warmup_rounds=0)
    benchmark.extra_info.update(torch_threads=threads)
    median = benchmark.stats.stats.median
    benchmark.extra_info.update(
        throughput=built.work.items_per_step / median, throughput_unit=f"{built.work.item_unit}/s",
        flops_per_s=None if built.work.flops_per_step is None else built.work.flops_per_step / median,
        **mem.to_dict())


def case_id(params: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items())


def _tests_for(workloads) -> types.ModuleType:
    """A module object holding one parametrised `test_<workload>` per user workload."""
    from perfsuite.core.params import expand_sweep

    module = types.ModuleType("perfsuite_workloads")
    for w in workloads:
        cases = expand_sweep(w.default_sweep({}))

        def test(benchmark, case, request, _w=w):
            benchmark_case(benchmark, _w, case, request)

        test.__name__ = f"test_{w.name}"
        test.__doc__ = w.description
        setattr(module, test.__name__, pytest.mark.parametrize("case", cases, ids=[case_id(c) for c in cases])(test))
    return module


class UserWorkloads(pytest.Module):
    """The project's workloads as a test module, collected from its pyproject.toml."""

    def _getobj(self):
        from perfsuite.core.discover import discover, project_workloads

        if not self.config.pluginmanager.has_plugin("benchmark"):  # pytest-benchmark, by its entry-point name
            raise self.CollectError("perfsuite's workloads need pytest-benchmark (pip install pytest-benchmark)")
        discover(start=self.path.parent)
        return _tests_for(project_workloads(self.path))


def pytest_collect_file(file_path: Path, parent):
    if file_path.name != "pyproject.toml":
        return None
    from perfsuite.core.discover import find_project
    from perfsuite.core.errors import ConfigError

    try:
        project = find_project(file_path.parent)
    except ConfigError:
        return None  # someone else's broken pyproject.toml (a template, a fixture): not ours to judge
    if project is None or project.resolve() != file_path.resolve():
        return None  # no [tool.perfsuite] here: the plugin stays out of the way
    return UserWorkloads.from_parent(parent, path=file_path)
