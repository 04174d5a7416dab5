import pytest

from perfsuite.config import RunConfig
from perfsuite.measure.timing import PerfCounterClock
from perfsuite.training.amp_compare import compare_precisions
from perfsuite.training.setup import training_setup

FAST = RunConfig(max_time=1.0)
PARAMS = {"variant": "fc", "batch_size": 16}


def test_bf16_keeps_the_loss_and_reports_speed_and_memory():
    res = compare_precisions("autoencoder", PARAMS, "cpu", PerfCounterClock(), "fp32", "bf16",
                             pairs=6, steps=10, cfg=FAST)
    assert res.accuracy_ok, res.verdict()
    assert res.verdict().startswith("speed-up ")
    assert len(res.pair_ratios) == 6 and res.speedup > 0
    # bf16 autocast saves half-width activations for backward.
    assert 0 < res.memory_ratio < 1.0


def test_a_deliberately_broken_run_is_flagged():
    def broken(params, device, seed):
        return training_setup("autoencoder", params, device, seed, lr_scale=300.0)

    res = compare_precisions("autoencoder", PARAMS, "cpu", PerfCounterClock(), "fp32", "bf16",
                             pairs=2, steps=10, cfg=FAST, setup_b=broken)
    assert not res.accuracy_ok
    assert "diverges" in res.verdict()


def test_same_seed_means_same_initial_weights():
    import torch

    a = training_setup("resnet", {"batch_size": 2}, "cpu", seed=3)
    b = training_setup("resnet", {"batch_size": 2, "precision": "bf16"}, "cpu", seed=3)
    for (k, va), (_, vb) in zip(a.parts.model.state_dict().items(), b.parts.model.state_dict().items()):
        assert torch.equal(va, vb), k


def test_fp16_on_cpu_is_refused():
    from perfsuite.errors import Unsupported

    with pytest.raises(Unsupported, match="fp16"):
        compare_precisions("resnet", {}, "cpu", PerfCounterClock(), "fp32", "fp16", pairs=2, steps=5, cfg=FAST)
