"""Distributed workloads (ddp, allreduce) in pytest-benchmark, through perfsuite's one case loop.

Their steps run in ranks that torchrun starts (perfsuite.distributed), not in this process, so
pytest-benchmark cannot time them itself. Each workload's grid (declared in its file) is measured
once per session with perfsuite.run.execute.run_cases, exactly as `perfsuite run` and asv's track
classes do (world_size=1 first, so the others carry their scaling efficiency); each test then
hands its record to pytest-benchmark through the fixture's timer (the plugin's replay_clock, given
by the `replayed` marker), which replays the record's per-step samples (the slowest rank's), so the table shows the record's own median and spread. `extra_info` carries global
throughput, per-rank medians, scaling efficiency, communication share, algbw and busbw.

`make test` (--benchmark-disable) skips them: every launch starts torch in each rank (about 10 s
on 2 cores), and tests/test_distributed.py already runs both workloads.
"""

import pytest

from perfsuite.core import registry
from perfsuite.core.config import RunConfig, resolve_device
from perfsuite.core.errors import Unsupported
from perfsuite.frontends.pytest_plugin import replay, replayed

_MEASURED: dict = {}


def _measured(name: str, size: str, device: str, max_time: float) -> dict:
    """Every grid case of `name`, measured once in one run_cases call: {params key: record or reason}."""
    key = (name, size, device)
    if key not in _MEASURED:
        from perfsuite.measuring.fingerprint import fingerprint
        from perfsuite.run.execute import Case, Events, check_cases, run_cases

        got: dict = {}

        class Keep(Events):
            def done(self, case, record):
                got[repr(sorted(case.params.items()))] = record

            def failed(self, case, failure):
                got[repr(sorted(case.params.items()))] = f"failed: {failure['error']}"

            def skipped(self, case, reason):
                got[repr(sorted(case.params.items()))] = f"skipped: {reason}"

        w = registry.get(name)
        run_cases(
            check_cases([Case(w, c) for c in w.cases(size)], device),
            RunConfig(device=device, max_time=max_time),
            env=fingerprint(),
            events=Keep(),
        )
        _MEASURED[key] = got
    return _MEASURED[key]


@replayed
def test_distributed(benchmark, dist_case, request):
    name, params = dist_case
    w = registry.get(name)
    device = resolve_device(request.config.getoption("--perfsuite-device"))
    try:
        w.validate_case(params, device)
    except Unsupported as exc:
        pytest.skip(str(exc))
    if benchmark.disabled:
        pytest.skip("a torchrun launch per case: measured with --benchmark-only; tests/test_distributed.py runs it")
    size = request.config.getoption("--perfsuite-size")
    rec = _measured(name, size, device, request.config.getoption("--perfsuite-max-time")).get(
        repr(sorted(params.items())), "not measured"
    )
    if isinstance(rec, str):
        pytest.fail(rec) if rec.startswith("failed") else pytest.skip(rec)
    benchmark.group = name
    e = rec.extra
    benchmark.extra_info.update(
        params=rec.params,
        device=rec.device,
        timing="replayed: the slowest rank's per-step samples",
        world_size=e["world_size"],
        rank_medians_s=e["rank_medians_s"],
        throughput=rec.throughput,
        throughput_unit=rec.throughput_unit,
        scaling_efficiency=e.get("scaling_efficiency"),
        comm_share=(e.get("comm") or {}).get("comm_share"),
        algbw_Bps=e.get("algbw_Bps"),
        busbw_Bps=e.get("busbw_Bps"),
    )
    replay(benchmark, rec.samples_s)  # as perfsuite.frontends.pytest_plugin.benchmark_case does
    assert benchmark.stats.stats.median == pytest.approx(rec.stats.median, rel=1e-6)
