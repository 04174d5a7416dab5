"""Every registered workload through pytest-benchmark's fixture, in pedantic mode.

`pytest --benchmark-only` measures them; `make test` runs each once with `--benchmark-disable`
as a smoke test. The clock is device-correct: on CUDA each call ends with a synchronise, so
pytest-benchmark's wall clock sees the device work (host-inclusive timing). Rounds and
iterations come from perfsuite's own calibration, so the clock's cost stays under 0.1%.
"""

import pytest

from perfsuite.core import registry
from perfsuite.frontends.pytest_plugin import benchmark_case, replayed


@pytest.mark.slow
@replayed  # the fixture times with the plugin's replay clock: the record's samples, read back
def test_workload(benchmark, bench_case, request):
    name, params = bench_case
    benchmark_case(benchmark, registry.get(name), params, request)
    if benchmark.disabled:
        assert benchmark.stats is None  # the smoke test ran the step once, untimed
