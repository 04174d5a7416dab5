"""CIFAR-10 in torchvision's on-disk format (`cifar-10-batches-py/`), or generated to its shape.

The reader is our own rather than `torchvision.datasets.CIFAR10` because that class checks the
files' MD5 sums against the official release, so it cannot be tested on small data we make;
the format it reads is the same. The batches are Python pickles, as CIFAR-10 ships them, and a
pickle can name any function to call: they are read with an unpickler that builds only what a
batch holds (dicts, lists, strings, numbers, numpy arrays) and refuses anything else unrun.
"""

from __future__ import annotations

import codecs
import pickle
from pathlib import Path

import numpy as np

from perfsuite.core.errors import ConfigError
from perfsuite.storage import write

FOLDER = "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


# The only globals a CIFAR-10 batch refers to: numpy arrays as numpy pickles them (both module
# spellings: the official files were written by numpy 1's `numpy.core`, numpy 2 writes
# `numpy._core`; `_frombuffer` is protocol 5's form, `scalar` a numpy number in a list).
_NUMPY_GLOBALS = {
    (module, name)
    for core in ("numpy.core", "numpy._core")
    for module, name in (
        (f"{core}.multiarray", "_reconstruct"),
        (f"{core}.multiarray", "scalar"),
        (f"{core}.numeric", "_frombuffer"),
    )
} | {("numpy", "ndarray"), ("numpy", "dtype")}


def _latin1(text: str, encoding: str) -> bytes:
    # Python 3 pickles bytes at protocols 0-2 as `_codecs.encode(text, "latin1")`; any other
    # codec is not something a batch needs.
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refused _codecs.encode with codec {encoding!r}")
    return codecs.encode(text, "latin1")


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles a CIFAR-10 batch; any other global (os.system, builtins.eval...) is refused
    before it is called, so a crafted file cannot run code."""

    def find_class(self, module: str, name: str):
        if (module, name) in _NUMPY_GLOBALS:
            return super().find_class(module, name)
        if (module, name) == ("_codecs", "encode"):
            return _latin1
        raise pickle.UnpicklingError(
            f"refused global {module}.{name}: a CIFAR-10 batch holds only dicts, lists, strings, "
            f"numbers and numpy arrays"
        )


def _batch_dir(path: Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"parameter 'data': {path} does not exist")
    if (path / FOLDER).is_dir():
        return path / FOLDER
    if (path / TRAIN_FILES[0]).exists() or (path / TEST_FILE).exists():
        return path
    raise ConfigError(
        f"parameter 'data': {path} is not in CIFAR-10's format "
        f"(expected {FOLDER}/data_batch_1..5 and test_batch, as torchvision stores it)"
    )


def read_cifar10(path: str | Path, train: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Images as uint8 N x 32 x 32 x 3 and labels as int64 N, from a local CIFAR-10 folder."""
    folder = _batch_dir(Path(path))
    names = TRAIN_FILES if train else (TEST_FILE,)
    images, labels = [], []
    for name in names:
        f = folder / name
        if not f.exists():
            continue
        try:
            with open(f, "rb") as fh:
                entry = _BatchUnpickler(fh, encoding="latin1").load()
            data = np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
            lab = np.asarray(entry.get("labels", entry.get("fine_labels")), dtype=np.int64)
        except Exception as exc:  # noqa: BLE001 - any unpickling/shape problem means "not CIFAR-10"
            raise ConfigError(f"parameter 'data': {f} is not a CIFAR-10 batch ({exc})") from None
        if len(lab) != len(data):
            raise ConfigError(f"parameter 'data': {f} has {len(data)} images but {len(lab)} labels")
        images.append(data.transpose(0, 2, 3, 1))
        labels.append(lab)
    if not images:
        raise ConfigError(f"parameter 'data': no {'training' if train else 'test'} batches in {folder}")
    return np.concatenate(images), np.concatenate(labels)


def write_cifar10(path: str | Path, images: np.ndarray, labels: np.ndarray, batches: int = 5) -> Path:
    """Write images (N x 32 x 32 x 3 uint8) in CIFAR-10's format; returns the root folder."""
    folder = Path(path) / FOLDER
    write.make_dir(folder, "dataset folder")
    flat = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    for i, (chunk, lab) in enumerate(zip(np.array_split(flat, batches), np.array_split(labels, batches))):
        with write.atomic(folder / TRAIN_FILES[i]) as fh:
            pickle.dump({"data": chunk, "labels": [int(x) for x in lab]}, fh)
    with write.atomic(folder / TEST_FILE) as fh:
        pickle.dump(
            {"data": flat[: max(1, len(flat) // 5)], "labels": [int(x) for x in labels[: max(1, len(flat) // 5)]]}, fh
        )
    return Path(path)


def synthetic_cifar10(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random images and labels of CIFAR-10's shape (random pixels cost the same to train on)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, size=n)


def to_tensors(
    images: np.ndarray, labels: np.ndarray, device: str, normalize: bool = True, channels_last: bool = False
):
    """uint8 NHWC -> float NCHW on `device` (normalised with CIFAR-10's statistics, or in [0, 1]).

    The memory layout is what `channels_last` says: False gives contiguous NCHW, True NCHW
    with channels-last strides. Permuting the NHWC array to NCHW only changes the strides, so
    the permuted view *is* channels-last; without a copy, `channels_last=false` would hand
    NHWC data to the model, and a GPU sweep over `channels_last` would compare NHWC kernels
    with NHWC kernels plus conversions (the H100 fixture taken with false shows only `nhwc`
    convolutions and 52 `direct_copy` kernels). The copy is made on the uint8 batch, the
    smallest form, and every later op (float, normalisation, `.to`) keeps the layout.
    """
    import torch

    layout = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).contiguous(memory_format=layout)
    x = x.float().div_(255.0)
    if normalize:
        x = (x - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    # Free when the layout is already right; it guards against an op above changing it.
    x = x.to(device).contiguous(memory_format=layout)
    return x, torch.from_numpy(labels).long().to(device)


def load_batch(
    data: str, batch_size: int, device: str, seed: int = 0, normalize: bool = True, channels_last: bool = False
):
    """The first `batch_size` training images of `data` (a path), or generated ones if `data` is empty."""
    if data:
        images, labels = read_cifar10(data)
        if len(images) < batch_size:
            reps = -(-batch_size // len(images))
            images, labels = np.concatenate([images] * reps), np.concatenate([labels] * reps)
        images, labels = images[:batch_size], labels[:batch_size]
    else:
        images, labels = synthetic_cifar10(batch_size, seed)
    return to_tensors(images, labels, device, normalize, channels_last)
