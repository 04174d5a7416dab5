"""The image-folder dataset, the DataLoader workload and its sweep report, on tiny data."""

import json

import numpy as np
import pytest
from PIL import Image

from perfsuite.cli import app as cli
from perfsuite.core import registry
from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.data.imagefolder import ImageFolderDataset, generated_folder, scan, train_transform
from perfsuite.workloads import dataloader


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(dataloader, "CACHE_DIR", tmp_path / "cache")
    return tmp_path / "cache"


def _folder(root, n=12, side=16, ext=".png"):
    rng = np.random.default_rng(0)
    for i in range(n):
        d = root / f"c{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(d / f"{i}{ext}")
    return root


def test_png_and_jpeg_are_decoded_and_augmented(tmp_path):
    _folder(tmp_path / "ds", ext=".png")
    _folder(tmp_path / "ds" / "c0", n=0)
    jpg = tmp_path / "ds" / "c1" / "extra.jpg"
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(jpg)
    ds = ImageFolderDataset(tmp_path / "ds", transform=train_transform(16))
    assert len(ds) == 13 and ds.classes == ["c0", "c1", "c2"]
    x, y = ds[0]
    assert tuple(x.shape) == (3, 16, 16) and str(x.dtype) == "torch.float32" and y == 0


def test_bad_folders_name_the_path(tmp_path):
    with pytest.raises(ConfigError, match=f"{tmp_path / 'missing'} does not exist"):
        scan(tmp_path / "missing")
    (tmp_path / "empty" / "c0").mkdir(parents=True)
    with pytest.raises(ConfigError, match="holds no PNG or JPEG"):
        scan(tmp_path / "empty")
    root = _folder(tmp_path / "ds", n=3)
    bad = root / "c0" / "broken.png"
    bad.write_bytes(b"\x89PNG not really")
    ds = ImageFolderDataset(root)
    i = ds.files.index(bad)
    with pytest.raises(ConfigError, match="broken.png"):
        ds[i]


def test_generated_folder_is_made_once(tmp_path):
    a = generated_folder("cifar-like", tmp_path, count=20)
    stamp = (a / ".complete").stat().st_mtime_ns
    assert generated_folder("cifar-like", tmp_path, count=20) == a
    assert (a / ".complete").stat().st_mtime_ns == stamp
    assert len(scan(a)[0]) == 20


def test_bad_parameters_name_the_parameter(cache):
    w = registry.get("dataloader")
    with pytest.raises(ConfigError, match="parameter 'num_workers': -1 is too small"):
        w.resolve({"num_workers": -1})
    with pytest.raises(ConfigError, match="parameter 'batch_size': 0 is too small"):
        w.resolve({"batch_size": 0})
    with pytest.raises(ConfigError, match="parameter 'persistent_workers'"):
        w.validate_case({"persistent_workers": True}, "cpu")
    with pytest.raises(Unsupported, match="pin_memory"):
        w.validate_case({"pin_memory": True}, "cpu")
    with pytest.raises(ConfigError, match="does not exist"):
        w.validate_case({"dataset": "/nonexistent/images"}, "cpu")


@pytest.mark.parametrize("workers", [0, 2])
def test_an_epoch_loads_every_image(cache, workers):
    built = registry.get("dataloader").build({"images": 40, "batch_size": 16, "num_workers": workers}, "cpu")
    built.fn()
    extra = built.extra()
    assert extra["images"] == 40 and extra["first_batch_s"] > 0
    assert built.work.items_per_step == 40


def test_train_mode_reports_how_long_the_model_waits(cache):
    built = registry.get("dataloader").build({"images": 16, "batch_size": 8, "mode": "train"}, "cpu")
    built.fn()
    assert 0.0 < built.extra()["data_wait_fraction"] < 1.0


@pytest.mark.slow
def test_sweep_writes_report_with_knee_and_plot(cache, tmp_path, capsys):
    out = tmp_path / "dl.json"
    code = cli.main(
        [
            "run",
            "dataloader",
            "-p",
            "images=64",
            "-p",
            "num_workers=0,1",
            "-p",
            "batch_size=16,32",
            "--max-time",
            "1.5",
            "--out",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr()
    recs = json.loads(out.read_text())["records"]
    assert len(recs) == 4 and all(r["extra"]["first_batch_s"] > 0 for r in recs)
    assert cli.main(["report", str(out), "--out-dir", str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "summary.md").read_text()
    assert "knee (cheapest within 5% of the best)" in page and "recommendation:" in page
    assert (tmp_path / "rep" / "dataloader-workers.png").stat().st_size > 1000


def test_knee_is_the_cheapest_within_five_percent():
    from records import make_record

    from perfsuite.workloads.dataloader_report import knee

    def rec(workers, median):
        return make_record(
            median_s=median, sigma=0.0, n=11, workload="dataloader", params={"num_workers": workers, "batch_size": 64}
        )

    recs = [rec(0, 2.0), rec(1, 1.04), rec(2, 1.0), rec(4, 1.01)]
    best, k = knee(recs)
    assert best.params["num_workers"] == 2 and k.params["num_workers"] == 1


def _copies_to_other_devices(fn):
    """The `.to(device)` copies `fn` makes to a device other than the CPU, as (device, non_blocking)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Copies(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.ops.aten._to_copy.default and kwargs.get("device") not in (None, torch.device("cpu")):
                seen.append((str(kwargs["device"]), kwargs.get("non_blocking", False)))
            return func(*args, **kwargs)

    with Copies():
        fn()
    return seen


def test_off_the_cpu_loading_a_batch_includes_its_copy_to_the_device(cache):
    """`mode=load` on a GPU measured only decoding and (with pin_memory) pinning, never the copy
    that pinning exists to speed up. The `meta` device stands in for CUDA here: any device
    but the CPU needs the batch copied, and a copy to `meta` runs on a CPU-only machine."""
    w = registry.get("dataloader")
    built = w.build({"images": 8, "batch_size": 4}, "meta")
    # Every batch of the epoch, images and labels, copied asynchronously (as the train mode does).
    assert _copies_to_other_devices(built.fn) == [("meta", True)] * 4
    assert built.extra()["host_to_device_copy"] is True
    on_cpu = w.build({"images": 8, "batch_size": 4}, "cpu")
    assert _copies_to_other_devices(on_cpu.fn) == [] and on_cpu.extra()["host_to_device_copy"] is False
