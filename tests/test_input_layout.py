"""The memory layout of every workload's image inputs (issue 23, item 2).

`channels_last=false` must reach the model as contiguous NCHW and `channels_last=true` as NCHW
with channels-last strides. A permuted NHWC array is channels-last already, so without an
explicit copy both settings fed the model the same NHWC data (the H100 fixture taken with
false shows only `nhwc` convolutions). The images are caught where they enter the model: the
input of every outermost module call that is a 4-D, 3-channel float tensor.
"""

import contextlib

import numpy as np
import pytest
import torch

from perfsuite.core import registry
from perfsuite.data.cifar import (
    load_batch,
    synthetic_cifar10,
    to_tensors,
    write_cifar10,
)

# Workloads whose inputs are not images, and why; every other workload has a case below.
NO_IMAGE_INPUT = {
    "activation": "a 1-D tensor",
    "allreduce": "a 1-D buffer",
    "mar": "2-D codes",
    "matmul": "2-D matrices",
    "noop": "no input",
    "qwen": "token ids",
    # Each rank trains on `training_setup(...).batch(rank)`: the trainer batches checked below.
    "ddp": "the autoencoder's or resnet's trainer batches (test_trainer_batches_have_the_asked_layout)",
}


def layout(t: torch.Tensor) -> str:
    if t.is_contiguous():
        return "contiguous"
    if t.is_contiguous(memory_format=torch.channels_last):
        return "channels_last"
    return f"other strides {t.stride()}"


def expected(channels_last: bool) -> str:
    return "channels_last" if channels_last else "contiguous"


@contextlib.contextmanager
def model_inputs():
    """Records the image inputs of outermost module calls (nested calls see activations)."""
    seen: list[torch.Tensor] = []
    depth = [0]

    def pre(module, args):
        if depth[0] == 0:
            seen.extend(
                a
                for a in args
                if isinstance(a, torch.Tensor) and a.dim() == 4 and a.shape[1] == 3 and a.is_floating_point()
            )
        depth[0] += 1

    def post(module, args, out):
        depth[0] -= 1

    handles = [
        torch.nn.modules.module.register_module_forward_pre_hook(pre),
        torch.nn.modules.module.register_module_forward_hook(post, always_call=True),
    ]
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_to_tensors_gives_the_asked_layout(channels_last, normalize):
    images, labels = synthetic_cifar10(4)
    x, _ = to_tensors(images, labels, "cpu", normalize=normalize, channels_last=channels_last)
    assert x.shape == (4, 3, 32, 32) and layout(x) == expected(channels_last)
    # The same pixels either way: only the strides differ.
    other, _ = to_tensors(images, labels, "cpu", normalize=normalize, channels_last=not channels_last)
    assert torch.equal(x, other)
    want = images[1, 5, 7, 2] / 255.0
    if normalize:
        want = (want - 0.4465) / 0.2616
    assert float(x[1, 2, 5, 7]) == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("channels_last", [False, True])
def test_a_cifar_folder_batch_has_the_asked_layout(tmp_path, channels_last):
    write_cifar10(tmp_path, *synthetic_cifar10(10))
    x, _ = load_batch(str(tmp_path), 4, "cpu", channels_last=channels_last)
    assert layout(x) == expected(channels_last)


@pytest.mark.parametrize(
    "name, params",
    [
        ("resnet", {}),
        ("resnet", {"channels_last": True}),
        ("resnet", {"data": "FOLDER"}),
        ("resnet", {"data": "FOLDER", "channels_last": True}),
        ("autoencoder", {"variant": "fc"}),
        ("autoencoder", {"variant": "conv"}),
        ("autoencoder", {"variant": "conv", "data": "host"}),
        ("autoencoder", {"variant": "conv", "phase": "validate", "val_size": 16}),
        ("checkpoint", {}),
    ],
)
def test_every_workloads_model_sees_the_asked_layout(tmp_path, name, params):
    if params.get("data") == "FOLDER":
        params = {**params, "data": str(write_cifar10(tmp_path, *synthetic_cifar10(10)))}
    w = registry.get(name)
    want = expected(w.resolve(params).get("channels_last", False))
    with model_inputs() as seen:
        built = w.build(params, "cpu")
        built.fn()
    if built.teardown is not None:
        built.teardown()
    assert seen, "no image input reached a model"
    assert {layout(t) for t in seen} == {want}


def test_the_dataloaders_batches_reach_resnet_as_contiguous_nchw(tmp_path, monkeypatch):
    from perfsuite.workloads import dataloader

    monkeypatch.setattr(dataloader, "CACHE_DIR", tmp_path / "cache")
    with model_inputs() as seen:
        built = registry.get("dataloader").build({"mode": "train", "images": 8, "batch_size": 4}, "cpu")
        built.fn()
    assert len(seen) == 2 and {layout(t) for t in seen} == {"contiguous"}


@pytest.mark.parametrize(
    "name, params",
    [
        ("resnet", {}),
        ("resnet", {"channels_last": True}),
        ("autoencoder", {"variant": "conv"}),
    ],
)
def test_trainer_batches_have_the_asked_layout(name, params):
    """What the AMP comparison, the checks and ddp train on."""
    from perfsuite.training.setup import training_setup

    setup = training_setup(name, {**params, "batch_size": 4}, "cpu")
    x, _ = setup.batch(0)
    assert layout(x) == expected(params.get("channels_last", False))


def test_every_workload_is_covered_or_says_why_not():
    covered = {"resnet", "autoencoder", "checkpoint", "dataloader"}
    missing = set(registry.names()) - covered - set(NO_IMAGE_INPUT)
    assert not missing, f"workloads whose input layout no test checks: {sorted(missing)}"


def test_the_guard_catches_nhwc_data():
    # The check above would have passed for NHWC data only if `layout` could not tell them apart.
    nhwc = torch.from_numpy(np.zeros((2, 32, 32, 3), dtype=np.float32)).permute(0, 3, 1, 2)
    assert layout(nhwc) == "channels_last" and layout(nhwc.contiguous()) == "contiguous"
