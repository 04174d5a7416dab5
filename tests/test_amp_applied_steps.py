"""`perfsuite amp` compares fp16 with fp32 at equal *applied* optimiser steps, as the check does.

fp16 is emulated on CPU (autocast to float16, a GradScaler("cpu")): perfsuite refuses fp16 off
CUDA, and the emulation lifts only that refusal. A GradScaler starting at 2**32 overflows the
autoencoder's fp16 gradients for its first 6 steps and skips them; at equal *training* steps fp16
would then trail fp32 by those 6 updates (the loss still at its start while fp32's has halved).
"""

import pytest
import torch

from perfsuite.compare.amp import AmpComparison, compare_precisions
from perfsuite.core.config import RunConfig
from perfsuite.measuring.timing import PerfCounterClock
from perfsuite.training.agreement import loss_agreement
from perfsuite.training.applied import ScalerDiverged, max_skips
from perfsuite.training.setup import training_setup

PARAMS = {"variant": "fc", "batch_size": 4}


@pytest.fixture
def fp16_on_cpu(monkeypatch):
    from perfsuite.training import precision

    monkeypatch.setattr(precision, "check_precision", lambda p, d: None)


def _scaled_from(init_scale):
    """Run B's set-up with a GradScaler of this initial scale in place of the default one."""

    def build(params, device, seed):
        setup = training_setup("autoencoder", params, device, seed)
        setup.parts.precision.scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
        return setup

    return build


@pytest.mark.slow
def test_the_comparison_lines_fp16_up_with_fp32_at_equal_applied_steps(fp16_on_cpu):
    res = compare_precisions(
        "autoencoder",
        PARAMS,
        "cpu",
        PerfCounterClock(),
        "fp32",
        "fp16",
        pairs=2,
        steps=8,
        cfg=RunConfig(max_time=0.5),
        setup_b=_scaled_from(2.0**32),
    )
    assert res.skipped_a == 0 and res.skipped_b >= 3  # the emulation does skip fp16's first steps
    # Eight applied steps each, and step for step the same fall: fp16 is compared where fp32 is.
    assert len(res.losses_a) == len(res.losses_b) == res.steps == 8
    assert res.losses_b == pytest.approx(res.losses_a, rel=0.02)
    assert res.losses_a[-1] < 0.5 * res.losses_a[0]  # and the fall is steep: a lag would show
    assert res.accuracy_ok, res.verdict()
    assert f"after 8 applied steps (fp16 ran {res.skipped_b} more, skipped by its GradScaler)" in res.verdict()
    back = AmpComparison.from_dict(res.to_dict())
    assert (back.skipped_a, back.skipped_b) == (0, res.skipped_b)


def test_a_document_without_skip_counts_reads_as_none_skipped():
    d = dict(
        workload="autoencoder",
        params={},
        device="cpu",
        precision_a="fp32",
        precision_b="bf16",
        pair_ratios=[1.0, 1.1],
        time_a_s=[1.0, 1.1],
        time_b_s=[1.0, 1.0],
        saved_bytes_a=2,
        saved_bytes_b=1,
        cuda_peak_a=None,
        cuda_peak_b=None,
        final_loss_a=1.0,
        final_loss_b=1.01,
        loss_tolerance=0.05,
        steps=10,
    )
    c = AmpComparison.from_dict(d)
    assert (c.skipped_a, c.skipped_b) == (0, 0) and "after 10 applied steps, within 5%" in c.verdict()


def test_a_scaler_that_never_stops_skipping_ends_the_comparison_and_says_why(fp16_on_cpu):
    """Skips are forgiven only while the scale falls to 1 (4.0: 3 halvings, so 3 skips): gradients
    that overflow even unscaled are divergence, and the loss loop must end, not spin."""

    def overflowing(params, device, seed):
        setup = _scaled_from(4.0)(params, device, seed)
        loss_fn = setup.parts.loss_fn
        setup.parts.loss_fn = lambda out, x: loss_fn(out, x) * float("inf")
        return setup

    assert max_skips(torch.amp.GradScaler("cpu", init_scale=4.0)) == 3
    with pytest.raises(ScalerDiverged, match=r"fp16: the GradScaler skipped 4 steps .* overflow even unscaled"):
        loss_agreement("autoencoder", PARAMS, "cpu", "fp16", steps=3, setup_b=overflowing)
