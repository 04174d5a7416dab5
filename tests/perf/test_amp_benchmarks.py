"""AMP in pytest-benchmark: each training workload's step in fp32 and in each lower precision, in
one group per workload, so the table shows both side by side. The lower precision's
`extra_info` carries the speed-up over fp32 (ratio of the two medians of this session) and the
ratio of bytes saved for backward; `perfsuite amp` is the interleaved, drift-cancelling version.

`make test` runs them once each with --benchmark-disable (one step, untimed) as a smoke test.
"""

import pytest

from perfsuite.core import registry
from perfsuite.core.config import RunConfig, resolve_device
from perfsuite.core.errors import Unsupported
from perfsuite.measure.saved import saved_tensor_bytes
from perfsuite.measure.timing import PerfCounterClock
from perfsuite.measure.runner import calibrate

# fp32 first: the lower precisions' ratios read its median.
PRECISIONS = ("fp32", "bf16", "fp16")
_FP32: dict[tuple, dict] = {}


def _train_step(workload: str, params: dict, device: str):
    """The training step `perfsuite amp` compares (the same weights and batch for every
    precision), built without the workload's FLOP counting: this front-end needs none."""
    from perfsuite.training.setup import training_setup
    from perfsuite.training.step import make_train_step

    s = training_setup(workload, params, device, seed=0)
    return make_train_step(s.parts, *s.batch(0), forward=s.forward)


def _synchronised(fn, device: str):
    """On CUDA each call ends with a synchronise, so the wall clock sees the device's work."""
    if not device.startswith("cuda"):
        return fn
    import torch

    def step():
        fn()
        torch.cuda.synchronize(device)

    return step


def _timed(benchmark, step, max_time):
    cal = calibrate([step], PerfCounterClock(), RunConfig(max_time=max_time))
    rounds = max(5, min(10_000, int(max_time * 0.6 / max(cal.step_estimate_s * cal.block_size, 1e-9))))
    benchmark.pedantic(step, rounds=rounds, iterations=cal.block_size, warmup_rounds=0)
    return benchmark.stats.stats.median


def _fp32_median(step) -> float:
    """fp32's median when its test did not run in this session (-k): measured here, briefly."""
    from perfsuite.stats.summary import median

    clock = PerfCounterClock()
    cal = calibrate([step], clock, RunConfig(max_time=1.0))
    return median([clock.time_block(step, cal.block_size) / cal.block_size for _ in range(5)])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("workload", ["autoencoder", "resnet"])
@pytest.mark.slow
def test_amp(benchmark, workload, precision, request):
    size = request.config.getoption("--perfsuite-size")
    device = resolve_device(request.config.getoption("--perfsuite-device"))
    w = registry.get(workload)
    params = {"size": size, "precision": precision}
    try:
        w.check(params, device)
    except Unsupported as exc:
        pytest.skip(str(exc))
    raw = _train_step(workload, params, device)
    step = _synchronised(raw, device)

    benchmark.group = f"amp-{workload}"
    key = (workload, size, device)
    benchmark.extra_info.update(params=w.resolve(params), device=device, precision=precision)
    if benchmark.disabled:
        benchmark.pedantic(step, rounds=1, iterations=1)
        assert benchmark.stats is None
        return
    saved = saved_tensor_bytes(raw)
    benchmark.extra_info["saved_bytes"] = saved
    median = _timed(benchmark, step, request.config.getoption("--perfsuite-max-time"))
    if precision == "fp32":
        _FP32[key] = {"median": median, "saved": saved}
        return
    if key not in _FP32:
        fp32 = _train_step(workload, {**params, "precision": "fp32"}, device)
        _FP32[key] = {"median": _fp32_median(_synchronised(fp32, device)), "saved": saved_tensor_bytes(fp32)}
    ref = _FP32[key]
    benchmark.extra_info.update(speedup_vs_fp32=ref["median"] / median,
                                saved_memory_ratio_vs_fp32=saved / ref["saved"] if ref["saved"] else None)
