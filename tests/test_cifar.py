"""CIFAR-10 batches are pickles: the reader builds what a batch holds and runs nothing else."""

import os
import pickle
import shlex
import struct

import numpy as np
import pytest

from perfsuite.core.errors import ConfigError
from perfsuite.data.cifar import FOLDER, TRAIN_FILES, read_cifar10, write_cifar10


class _Calls:
    """Unpickled, calls `fn(*args)`: what a crafted batch does."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def _images(n=10, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, size=n)


def _batch(tmp_path, payload: bytes):
    folder = tmp_path / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TRAIN_FILES[0]).write_bytes(payload)
    return folder / TRAIN_FILES[0]


@pytest.mark.parametrize("how", ["open", "system"])
def test_a_crafted_batch_is_refused_without_running_its_code(tmp_path, how):
    marker = tmp_path / "marker"
    fn, args = (open, (str(marker), "w")) if how == "open" else (os.system, (f"touch {shlex.quote(str(marker))}",))
    call = _Calls(fn, *args)
    images, _ = _images()
    batch = _batch(tmp_path, pickle.dumps({"data": images.reshape(10, -1), "labels": call}))
    with pytest.raises(ConfigError, match="refused global") as info:
        read_cifar10(tmp_path)
    assert str(batch) in str(info.value)
    assert f"{fn.__module__}.{fn.__name__}" in str(info.value)  # io.open, posix.system
    assert not marker.exists()


def test_the_writers_batches_load(tmp_path):
    images, labels = _images(20)
    got_images, got_labels = read_cifar10(write_cifar10(tmp_path, images, labels))
    assert np.array_equal(got_images, images) and np.array_equal(got_labels, labels)


class _Py2Pickler(pickle._Pickler):
    """Pickles bytes as Python 2's `str` (BINSTRING), as the official CIFAR-10 files hold them."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_bytes(self, obj):
        self.write(
            pickle.SHORT_BINSTRING + bytes([len(obj)])
            if len(obj) < 256
            else pickle.BINSTRING + struct.pack("<i", len(obj))
        )
        self.write(obj)
        self.memoize(obj)

    dispatch[bytes] = save_bytes


def _official_style(entry):
    import io

    buf = io.BytesIO()
    _Py2Pickler(buf, protocol=2).dump(entry)
    # Written by numpy 1, whose array module was `numpy.core`.
    return buf.getvalue().replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")


@pytest.mark.parametrize("protocol", ["official", *range(pickle.HIGHEST_PROTOCOL + 1)])
def test_batches_as_cifar10_ships_them_and_as_numpy_pickles_them_load(tmp_path, protocol):
    images, labels = _images()
    flat = images.transpose(0, 3, 1, 2).reshape(10, -1)
    if protocol == "official":  # Python 2 strs for keys and names, labels a list of ints
        payload = _official_style(
            {
                b"batch_label": b"training batch 1 of 5",
                b"labels": [int(x) for x in labels],
                b"data": flat,
                b"filenames": [b"a_%d.png" % i for i in range(10)],
            }
        )
        assert b"cnumpy.core.multiarray\n_reconstruct" in payload
    else:  # numpy arrays and numpy integers, at every protocol (0-2 pickle bytes via _codecs.encode)
        payload = pickle.dumps(
            {
                "batch_label": b"training batch 1 of 5",
                "labels": [np.int64(x) for x in labels],
                "data": flat,
                "filenames": [b"a.png"],
            },
            protocol=protocol,
        )
    _batch(tmp_path, payload)
    got_images, got_labels = read_cifar10(tmp_path)
    assert np.array_equal(got_images, images) and np.array_equal(got_labels, labels)


def test_a_codec_other_than_latin1_is_refused(tmp_path):
    # `_codecs.encode` is admitted for protocol 0-2 bytes only, with the codec those use.
    payload = (
        b"\x80\x02}q\x00(X\x04\x00\x00\x00dataq\x01c_codecs\nencode\nq\x02X\x01\x00\x00\x00xX\x04\x00\x00\x00"
        b"zlibq\x03\x86q\x04Rq\x05u."
    )
    _batch(tmp_path, payload)
    with pytest.raises(ConfigError, match="refused _codecs.encode with codec 'zlib'"):
        read_cifar10(tmp_path)
