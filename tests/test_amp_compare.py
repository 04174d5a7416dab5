import sys
import types

import pytest

from perfsuite.compare.amp import AmpComparison, compare_precisions, side_utilisation
from perfsuite.core.config import RunConfig
from perfsuite.measuring.timing import PerfCounterClock
from perfsuite.training.setup import training_setup

FAST = RunConfig(max_time=1.0)
PARAMS = {"variant": "fc", "batch_size": 16}


@pytest.mark.slow
def test_bf16_keeps_the_loss_and_reports_speed_and_memory():
    res = compare_precisions(
        "autoencoder", PARAMS, "cpu", PerfCounterClock(), "fp32", "bf16", pairs=6, steps=10, cfg=FAST
    )
    assert res.accuracy_ok, res.verdict()
    assert res.verdict().startswith("speed-up ")
    # up to 6 pairs within max_time (at least 2): the comparison honours its budget
    assert 2 <= len(res.pair_ratios) <= 6 and res.speedup > 0
    # bf16 autocast saves half-width activations for backward.
    assert 0 < res.memory_ratio < 1.0
    # On CPU nothing is sampled and there is no host/device verdict.
    assert res.nvml_a == {"status": "unavailable", "reason": "not a CUDA device"}
    assert res.bound_a.verdict == res.bound_b.verdict == "n/a (cpu)" and res.bound_line() is None
    assert res.to_dict()["bound_b"]["verdict"] == "n/a (cpu)"
    # The loss curves (TensorBoard draws them) end in the final losses compared.
    assert len(res.losses_a) == len(res.to_dict()["losses_b"]) == 10
    assert res.final_loss_a == pytest.approx(sum(res.losses_a[-5:]) / 5)


@pytest.mark.slow
def test_a_deliberately_broken_run_is_flagged():
    def broken(params, device, seed):
        return training_setup("autoencoder", params, device, seed, lr_scale=300.0)

    res = compare_precisions(
        "autoencoder", PARAMS, "cpu", PerfCounterClock(), "fp32", "bf16", pairs=2, steps=10, cfg=FAST, setup_b=broken
    )
    assert not res.accuracy_ok
    assert "diverges" in res.verdict()


def test_same_seed_means_same_initial_weights():
    import torch

    a = training_setup("resnet", {"batch_size": 2}, "cpu", seed=3)
    b = training_setup("resnet", {"batch_size": 2, "precision": "bf16"}, "cpu", seed=3)
    for (k, va), (_, vb) in zip(a.parts.model.state_dict().items(), b.parts.model.state_dict().items()):
        assert torch.equal(va, vb), k


def test_fp16_on_cpu_is_refused():
    from perfsuite.core.errors import Unsupported

    with pytest.raises(Unsupported, match="fp16"):
        compare_precisions("resnet", {}, "cpu", PerfCounterClock(), "fp32", "fp16", pairs=2, steps=5, cfg=FAST)


def _fake_pynvml(utils, fail_init=False):
    """NVML reading `utils` in turn, then the last one for ever."""
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM = 1
    reads = iter(utils)

    def init():
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def util(h):
        return types.SimpleNamespace(gpu=next(reads, utils[-1]), memory=10)

    m.nvmlInit = init
    m.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    m.nvmlDeviceGetUtilizationRates = util
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=2**30)
    m.nvmlDeviceGetPowerUsage = lambda h: 100_000
    m.nvmlDeviceGetClockInfo = lambda h, kind: 1410
    return m


def test_each_side_is_sampled_alone_after_the_settle_readings_are_dropped(monkeypatch):
    # The first readings still average in the other side's blocks (100% busy); this side's own is 20%.
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([100, 100, 100, 20]))
    monkeypatch.setattr("perfsuite.measuring.nvml.UTIL_WINDOW_S", 0.3)  # a driver whose window the settle covers
    calls = []
    summary = side_utilisation(
        lambda: calls.append(1), PerfCounterClock(), 4, index=0, interval_s=0.005, settle_s=0.3, window_s=0.1
    )
    assert summary["status"] == "ok" and summary["gpu_util_pct"] == {"mean": 20.0, "max": 20.0}
    assert calls and len(calls) % 4 == 0  # ran in whole blocks of the timed size


@pytest.mark.parametrize("index, fail_init", [(None, False), (0, True)])
def test_without_nvml_the_side_is_not_run(monkeypatch, index, fail_init):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([50], fail_init=fail_init))
    calls = []
    summary = side_utilisation(lambda: calls.append(1), PerfCounterClock(), 1, index=index)
    assert summary["status"] == "unavailable" and not calls


def _cuda_comparison(nvml_a, nvml_b) -> AmpComparison:
    return AmpComparison(
        workload="resnet",
        params={},
        device="cuda:0",
        precision_a="fp32",
        precision_b="bf16",
        pair_ratios=[1.1, 1.2],
        time_a_s=[0.02, 0.02],
        time_b_s=[0.018, 0.017],
        saved_bytes_a=100,
        saved_bytes_b=60,
        cuda_peak_a=None,
        cuda_peak_b=None,
        final_loss_a=1.0,
        final_loss_b=1.0,
        loss_tolerance=0.05,
        steps=10,
        nvml_a=nvml_a,
        nvml_b=nvml_b,
    )


def _ok(mean: float) -> dict:
    return {"status": "ok", "n": 20, "interval_s": 0.05, "gpu_util_pct": {"mean": mean, "max": 99.0}}


def test_a_cuda_comparison_gives_each_sides_verdict():
    res = _cuda_comparison(_ok(81.0), _ok(23.0))
    assert (res.bound_a.verdict, res.bound_b.verdict) == ("device-bound", "host-bound")
    line = res.bound_line()
    assert (
        line.startswith("fp32: device-bound: the GPU was busy 81%") and "bf16: host-bound: the GPU was busy 23%" in line
    )
    d = res.to_dict()
    assert d["bound_b"]["gpu_util_pct"] == 23.0 and d["nvml_a"]["gpu_util_pct"]["mean"] == 81.0
    unsampled = _cuda_comparison({"status": "unavailable", "reason": "NVML could not start: no driver"}, _ok(60.0))
    assert unsampled.bound_a.verdict == "unknown" and "no driver" in unsampled.bound_line()


def test_an_amp_comparison_round_trips_and_recomputes_what_it_derives():
    import json

    c = _cuda_comparison({"status": "unavailable", "reason": "test"}, {"status": "unavailable", "reason": "test"})
    d = json.loads(json.dumps(c.to_dict()))
    assert d["speedup"] == pytest.approx(1.15)  # the median of the pairs, written for readers
    d["speedup"] = 99.0  # a stored derived number is never believed: it is recomputed from the pairs
    back = AmpComparison.from_dict(d)
    assert back == c and back.speedup == pytest.approx(1.15)


def test_an_fp16_verdict_on_a_gpu_says_its_grad_scaler_synchronises_every_step():
    # Issue 54: the H200's 0.89x fp16 verdict did not say what fp16 pays that bf16 does not.
    from dataclasses import replace

    bf16 = _cuda_comparison(_ok(80.0), _ok(80.0))
    assert "GradScaler" not in bf16.verdict()
    fp16 = replace(bf16, precision_b="fp16")
    assert "GradScaler synchronises with the host every step" in fp16.verdict()
    assert "GradScaler synchronises" not in replace(fp16, device="cpu").verdict()  # no device to wait for
