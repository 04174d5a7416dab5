"""AMP in pytest-benchmark: each training workload's step in fp32 and in each lower precision, in
one group per workload, so the table shows both side by side. Each case is measured by
perfsuite's one case loop (perfsuite.frontends.pytest_plugin.benchmark_case: run_cases, its
samples replayed through the fixture), so its numbers are `perfsuite run`'s. The lower
precision's `extra_info` carries the speed-up over fp32 (ratio of the two records' medians of
this session) and the ratio of bytes saved for backward; `perfsuite amp` is the interleaved,
drift-cancelling version.

`make test` runs them once each with --benchmark-disable (one step, untimed) as a smoke test.
"""

import pytest

from perfsuite.core import registry
from perfsuite.core.config import resolve_device
from perfsuite.frontends.pytest_plugin import benchmark_case, measure_record, replayed

# fp32 first: the lower precisions' ratios read its median.
PRECISIONS = ("fp32", "bf16", "fp16")
_FP32: dict[tuple, dict] = {}


def _saved_bytes(workload: str, params: dict, device: str) -> int:
    """Bytes autograd saves for backward in the training step `perfsuite amp` compares."""
    from perfsuite.measuring.saved import saved_tensor_bytes
    from perfsuite.training.setup import training_setup
    from perfsuite.training.step import make_train_step

    s = training_setup(workload, params, device, seed=0)
    return saved_tensor_bytes(make_train_step(s.parts, *s.batch(0), forward=s.forward))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("workload", ["autoencoder", "resnet"])
@pytest.mark.slow
@replayed  # the fixture times with the plugin's replay clock: the record's samples, read back
def test_amp(benchmark, workload, precision, request):
    size = request.config.getoption("--perfsuite-size")
    device = resolve_device(request.config.getoption("--perfsuite-device"))
    w = registry.get(workload)
    params = {"size": size, "precision": precision}
    benchmark_case(benchmark, w, params, request, group=f"amp-{workload}")
    if benchmark.disabled:
        assert benchmark.stats is None
        return
    saved = _saved_bytes(workload, params, device)
    benchmark.extra_info.update(precision=precision, saved_bytes=saved)  # extra_info is read at the end
    key = (workload, size, device)
    if precision == "fp32":
        _FP32[key] = {"median": benchmark.extra_info["median_s"], "saved": saved}
        return
    if key not in _FP32:  # fp32's test did not run in this session (-k): measured here, briefly
        fp32 = {**params, "precision": "fp32"}
        _FP32[key] = {
            "median": measure_record(w, fp32, device, 1.0).median_s,
            "saved": _saved_bytes(workload, fp32, device),
        }
    ref = _FP32[key]
    benchmark.extra_info.update(
        speedup_vs_fp32=ref["median"] / benchmark.extra_info["median_s"],
        saved_memory_ratio_vs_fp32=saved / ref["saved"] if ref["saved"] else None,
    )
