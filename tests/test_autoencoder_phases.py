"""The autoencoder's phases (train, validate, epoch) and data placement (resident, host), with
the seed's NVTX ranges and colours, on CPU."""

import math

import pytest
import torch
from nvtx_recording import RecordingNvtx

from perfsuite.core import registry
from perfsuite.measuring.nvtx import CATEGORY_COLORS, Annotator
from perfsuite.workloads import autoencoder

SMALL = {"batch_size": 8, "val_size": 40, "batches": 2}


@pytest.fixture
def recording(monkeypatch):
    rec = RecordingNvtx()
    monkeypatch.setattr(autoencoder, "Annotator", lambda enabled: Annotator(enabled=enabled, backend=rec))
    return rec


def test_host_data_is_copied_inside_the_step_under_data_transfer(recording):
    built = registry.get("autoencoder").build({**SMALL, "data": "host", "nvtx": "on"}, "cpu")
    recording.events.clear()
    loss = built.fn()
    assert math.isfinite(float(loss.detach()))
    assert recording.tree() == [
        (0, "Training Step"),
        (1, "Data Transfer"),
        (1, "Data Unpack"),
        (1, "Memory Ops"),
        (1, "Forward Pass"),
        (2, "Encoder Forward"),
        (2, "Decoder Forward"),
        (1, "Loss Computation"),
        (1, "Backward Pass"),
        (1, "Optimizer Step"),
    ]
    colours = {e[1]: e[2] for e in recording.events if e[0] == "start"}
    assert colours["Data Transfer"] == CATEGORY_COLORS["data"] and colours["Memory Ops"] == CATEGORY_COLORS["memory"]
    assert built.work.items_per_step == 8 and built.work.bytes_per_step > 0


def test_host_batch_copies_what_is_on_the_host():
    images, labels = torch.rand(4, 3, 32, 32), torch.arange(4)
    hb = autoencoder.HostBatch(images, labels, "cpu")
    hb.host.fill_(0.25)  # the step reads the host batch anew every time
    x, y = hb.copy()
    assert torch.equal(x, torch.full_like(images, 0.25)) and torch.equal(y, labels)
    assert x.data_ptr() != hb.host.data_ptr()


def test_validate_phase_gives_mar_and_writes_the_grid(recording, tmp_path):
    w = registry.get("autoencoder")
    built = w.build({**SMALL, "phase": "validate", "data": "host", "nvtx": "on", "vis_dir": str(tmp_path)}, "cpu")
    recording.events.clear()
    mar = built.fn()
    assert recording.tree() == [(0, "Validation"), (1, "Data Transfer"), (1, "MAR@5 Computation"), (1, "Visualization")]
    colours = {e[1]: e[2] for e in recording.events if e[0] == "start"}
    assert colours["Validation"] == CATEGORY_COLORS["validation"]
    assert colours["MAR@5 Computation"] == CATEGORY_COLORS["metrics"]
    assert colours["Visualization"] == CATEGORY_COLORS["visualization"]
    assert 0.0 <= mar <= 1.0 and built.work.items_per_step == 40 and built.work.flops_per_step > 0
    png = tmp_path / "reconstructions-fc.png"
    from PIL import Image

    with Image.open(png) as img:  # 16 originals over their 16 reconstructions
        assert img.size == (16 * 32 + 17 * 2, 2 * 32 + 3 * 2)
    extra = built.extra()
    assert extra["mar_at_5"] == mar and extra["reconstructions"] == str(png)


def test_epoch_is_training_steps_then_validation(recording):
    built = registry.get("autoencoder").build({**SMALL, "phase": "epoch", "variant": "conv", "nvtx": "on"}, "cpu")
    recording.events.clear()
    built.fn()
    roots = [name for depth, name in recording.tree() if depth == 0]
    assert roots == ["Training Step", "Training Step", "Validation"]
    assert built.work.items_per_step == 2 * 8 + 40
    built.teardown()  # the temporary folder of the grid


def test_defaults_are_the_old_training_step():
    w = registry.get("autoencoder")
    p = w.resolve({})
    assert (p["phase"], p["data"], p["val_size"], p["batches"]) == ("train", "resident", 256, 2)
