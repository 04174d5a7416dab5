"""Every registered workload through pytest-benchmark's fixture, in pedantic mode.

`pytest --benchmark-only` measures them; `make test` runs each once with `--benchmark-disable`
as a smoke test. The clock is device-correct: on CUDA each call ends with a synchronise, so
pytest-benchmark's wall clock sees the device work (host-inclusive timing). Rounds and
iterations come from perfsuite's own calibration, so the clock's cost stays under 0.1%.
"""

import pytest

from perfsuite.core import registry
from perfsuite.core.config import RunConfig, resolve_device
from perfsuite.core.errors import Unsupported
from perfsuite.measure.memory import HostPeakRSS
from perfsuite.measure.timing import PerfCounterClock
from perfsuite.measure.runner import calibrate



def test_workload(benchmark, bench_case, request):
    name, params = bench_case
    workload = registry.get(name)
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

        def step():
            inner()
            torch.cuda.synchronize(device)

    benchmark.group = name
    resolved = workload.resolve(params)
    benchmark.extra_info.update(params=resolved, device=device, item_unit=built.work.item_unit,
                                items_per_step=built.work.items_per_step,
                                flops_per_step=built.work.flops_per_step)
    if benchmark.disabled:
        # Smoke test: the fixture runs the step once, untimed; benchmark.stats stays None.
        benchmark.pedantic(step, rounds=1, iterations=1)
        assert benchmark.stats is None
        return

    clock = PerfCounterClock()
    max_time = request.config.getoption("--perfsuite-max-time")  # seconds per case, as everywhere
    cfg = RunConfig(max_time=max_time)
    cal = calibrate([step], clock, cfg)  # perfsuite's own warm-up and block size
    est, iterations = cal.step_estimate_s, cal.block_size
    rounds = max(5, min(10_000, int(max_time * 0.6 / max(est * iterations, 1e-9))))
    with HostPeakRSS() as mem:
        benchmark.pedantic(step, rounds=rounds, iterations=iterations, warmup_rounds=0)
    median = benchmark.stats.stats.median
    benchmark.extra_info.update(
        throughput=built.work.items_per_step / median,
        throughput_unit=f"{built.work.item_unit}/s",
        flops_per_s=None if built.work.flops_per_step is None else built.work.flops_per_step / median,
        **mem.to_dict(),
    )
