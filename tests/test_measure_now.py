"""perfsuite.measure(): one step measured from a script or a notebook, over the run road."""

from __future__ import annotations

import pytest
import torch

import perfsuite
from perfsuite.core.errors import ConfigError, PerfsuiteError
from perfsuite.run.now import StepFailed

BUDGET = dict(max_time=0.3, min_time=0.05, peak_file=None)


def test_a_callable_is_one_step_measured_in_this_process_with_its_samples_and_interval():
    x = torch.randn(64, 64)

    def matmul_step():
        return x @ x

    rec = perfsuite.measure(matmul_step, device="cpu", **BUDGET)
    assert isinstance(rec, perfsuite.Record)
    assert rec.workload == "matmul_step" and rec.device == "cpu"
    assert len(rec.samples_s) >= 3 and all(s > 0 for s in rec.samples_s)
    assert rec.stats.ci_low <= rec.stats.median <= rec.stats.ci_high
    # FLOPs were counted at build time (a 64x64 matmul: 2*64^3), so FLOP/s follow
    assert rec.work.flops_per_step == pytest.approx(2 * 64**3)
    assert rec.config["processes"] == 1


def test_a_step_carries_its_items_and_unit_into_the_throughput():
    step = perfsuite.Step(lambda: torch.ones(32).sum(), items=32, unit="samples")
    rec = perfsuite.measure(step, device="cpu", **BUDGET)
    assert rec.throughput_unit == "samples/s"
    assert rec.throughput == pytest.approx(32 / rec.stats.median, rel=1e-6)


def test_a_workload_by_name_takes_its_parameters_and_refuses_bad_ones_before_measuring():
    rec = perfsuite.measure("matmul", params={"n": 32}, device="cpu", **BUDGET)
    assert rec.workload == "matmul" and rec.params["n"] == 32
    with pytest.raises(ConfigError, match="n"):
        perfsuite.measure("matmul", params={"n": -3}, device="cpu", **BUDGET)
    with pytest.raises(ConfigError, match="unknown workload"):
        perfsuite.measure("no-such-workload", device="cpu", **BUDGET)


def test_a_step_that_raises_gives_step_failed_with_the_users_traceback():
    def broken_step():
        raise ValueError("shapes do not match")

    with pytest.raises(StepFailed) as caught:
        perfsuite.measure(broken_step, device="cpu", **BUDGET)
    assert "shapes do not match" in str(caught.value)
    assert "broken_step" in caught.value.failure["traceback"]


def test_bad_input_is_a_config_error_naming_what_was_wrong():
    with pytest.raises(ConfigError, match="cannot measure a int"):
        perfsuite.measure(5)
    with pytest.raises(ConfigError, match="no_such_option"):
        perfsuite.measure(lambda: None, device="cpu", no_such_option=1)
    with pytest.raises(ConfigError, match="worker processes"):
        perfsuite.measure(lambda: None, device="cpu", processes=2)
    with pytest.raises(ConfigError, match="max_time"):
        perfsuite.measure(lambda: None, device="cpu", max_time=float("nan"))


def test_a_device_this_machine_lacks_is_refused_not_measured_on_the_cpu():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the refusal is for machines without it")
    with pytest.raises(PerfsuiteError, match="CUDA|cuda"):
        perfsuite.measure(lambda: None, device="cuda", **BUDGET)


def test_the_record_prints_as_a_short_summary():
    rec = perfsuite.measure(lambda: None, device="cpu", **BUDGET)
    text = str(rec)
    assert rec.label() in text and "median" in text and "95% CI" in text
    assert "\x1b" not in text
