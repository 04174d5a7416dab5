"""The training workloads at the `ci` size on CPU: they build, step, and count the right FLOPs."""

import math

import numpy as np
import pytest
import torch

from perfsuite import registry
from perfsuite.data.cifar import read_cifar10, write_cifar10
from perfsuite.errors import ConfigError, Unsupported
from perfsuite.measure.nvtx import Annotator
from perfsuite.workloads.base import count_flops


@pytest.mark.parametrize(
    "name, params",
    [
        ("autoencoder", {"variant": "fc"}),
        ("autoencoder", {"variant": "conv", "nvtx": "on"}),
        ("autoencoder", {"precision": "bf16"}),
        ("resnet", {}),
        ("resnet", {"model": "resnet34", "channels_last": True, "precision": "bf16"}),
    ],
)
def test_every_training_workload_builds_and_steps(name, params):
    w = registry.get(name)
    built = w.build(params, "cpu")
    losses = [float(built.fn().detach()) for _ in range(3)]
    assert all(math.isfinite(v) for v in losses)
    assert built.work.items_per_step == w.resolve(params)["batch_size"]
    assert built.work.flops_per_step > 0 and built.work.item_unit == "images"


def test_resnet18_flops_match_the_seed_figure():
    # One training step, torchvision stem, batch 128: about 27.8 GFLOP.
    w = registry.get("resnet")
    params = w.resolve({"batch_size": 128})
    from perfsuite.data.cifar import load_batch
    from perfsuite.training.step import make_train_step
    from perfsuite.workloads.resnet import build_parts

    parts = build_parts(params, "cpu")
    step = make_train_step(parts, *load_batch("", 128, "cpu"))
    assert count_flops(step) == pytest.approx(27.8e9, rel=0.02)


def test_cifar_stem_costs_about_fifteen_times_more():
    from perfsuite.data.cifar import load_batch
    from perfsuite.training.step import make_train_step
    from perfsuite.workloads.resnet import build_parts

    w = registry.get("resnet")
    flops = {}
    for stem in ("torchvision", "cifar"):
        parts = build_parts(w.resolve({"stem": stem, "batch_size": 2}), "cpu")
        flops[stem] = count_flops(make_train_step(parts, *load_batch("", 2, "cpu")))
    assert flops["cifar"] / flops["torchvision"] == pytest.approx(426 / 27.8, rel=0.05)


def test_size_preset_and_explicit_override():
    w = registry.get("resnet")
    assert w.resolve({})["batch_size"] == 8
    assert w.resolve({"size": "cpu"})["batch_size"] == 64
    assert w.resolve({"size": "cpu", "batch_size": 3})["batch_size"] == 3


@pytest.mark.parametrize("name", ["resnet", "autoencoder"])
def test_fp16_on_cpu_is_unsupported_with_a_reason(name):
    with pytest.raises(Unsupported, match="parameter 'precision': fp16 training needs CUDA"):
        registry.get(name).check({"precision": "fp16"}, "cpu")


def test_bad_training_parameters_name_the_parameter(tmp_path):
    w = registry.get("resnet")
    with pytest.raises(ConfigError, match="parameter 'model'"):
        w.resolve({"model": "resnet50"})
    with pytest.raises(ConfigError, match="parameter 'batch_size': 0 is too small"):
        w.resolve({"batch_size": 0})
    with pytest.raises(ConfigError, match=f"parameter 'data': {tmp_path / 'nope'} does not exist"):
        w.check({"data": str(tmp_path / "nope")}, "cpu")
    (tmp_path / "junk").mkdir()
    with pytest.raises(ConfigError, match="not in CIFAR-10's format"):
        w.check({"data": str(tmp_path / "junk")}, "cpu")


def test_cifar_folder_round_trip_and_training_from_it(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(50, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=50)
    root = write_cifar10(tmp_path, images, labels)
    got_images, got_labels = read_cifar10(root)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
    built = registry.get("resnet").build({"data": str(root), "batch_size": 4}, "cpu")
    assert math.isfinite(float(built.fn().detach()))


def test_a_corrupt_cifar_batch_is_named(tmp_path):
    root = write_cifar10(tmp_path, np.zeros((10, 32, 32, 3), np.uint8), np.zeros(10, np.int64))
    bad = root / "cifar-10-batches-py" / "data_batch_1"
    bad.write_bytes(b"not a pickle")
    with pytest.raises(ConfigError, match="data_batch_1 is not a CIFAR-10 batch"):
        read_cifar10(root)


class RecordingNvtx:
    def __init__(self):
        self.events = []
        self.next = 0

    def start_range(self, message, color):
        self.next += 1
        self.events.append(("start", message, color))
        return self.next

    def end_range(self, handle):
        self.events.append(("end", handle))


def _tree(events):
    """Nesting as (depth, name) pairs, checking every range is closed in LIFO order."""
    stack, out, names = [], [], {}
    n = 0
    for e in events:
        if e[0] == "start":
            n += 1
            names[n] = e[1]
            out.append((len(stack), e[1]))
            stack.append(n)
        else:
            assert stack.pop() == e[1]
    assert not stack
    return out


def test_autoencoder_nvtx_hierarchy_and_colours():
    from perfsuite.data.cifar import load_batch
    from perfsuite.measure.nvtx import CATEGORY_COLORS
    from perfsuite.training.precision import Precision
    from perfsuite.workloads.autoencoder import build_model, make_step, validation_pass

    rec = RecordingNvtx()
    ann = Annotator(enabled=True, backend=rec)
    model = build_model("fc")
    opt = torch.optim.Adam(model.parameters())
    batch = load_batch("", 8, "cpu", normalize=False)
    make_step(model, opt, Precision("fp32", "cpu"), batch, ann)()
    assert _tree(rec.events) == [
        (0, "Training Step"), (1, "Data Unpack"), (1, "Forward Pass"), (2, "Encoder Forward"),
        (2, "Decoder Forward"), (1, "Loss Computation"), (1, "Backward Pass"), (1, "Optimizer Step"),
    ]
    colours = {e[1]: e[2] for e in rec.events if e[0] == "start"}
    assert colours["Training Step"] == CATEGORY_COLORS["training"]
    assert colours["Encoder Forward"] == CATEGORY_COLORS["forward"]
    assert colours["Loss Computation"] == CATEGORY_COLORS["loss"]
    assert colours["Data Unpack"] == CATEGORY_COLORS["data"]

    rec.events.clear()
    rec.next = 0
    labels = torch.randint(0, 10, (8,))
    out = validation_pass(model, batch[0], labels, ann)
    assert _tree(rec.events) == [(0, "Validation"), (1, "MAR@5 Computation"), (1, "Visualization")]
    assert 0.0 <= out["mar"] <= 1.0 and out["grid"].ndim == 3


def test_disabled_annotator_emits_nothing():
    rec = RecordingNvtx()
    ann = Annotator(enabled=False, backend=rec)
    with ann.range("Training Step", "training"):
        pass
    assert rec.events == []


def test_compiled_resnet_steps_and_keeps_the_eager_flop_count():
    # torch.compile on CPU takes ~30-40 s here: the one test that pays it.
    w = registry.get("resnet")
    eager = w.build({"batch_size": 2}, "cpu")
    compiled = w.build({"batch_size": 2, "compile": True}, "cpu")
    assert math.isfinite(float(compiled.fn().detach()))
    assert compiled.work.flops_per_step == eager.work.flops_per_step
