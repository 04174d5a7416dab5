"""Interrupt and resume ends bit-exactly where the uninterrupted run ends (on CPU)."""

import importlib

import numpy as np
import pytest
import torch

from perfsuite.training.checks import resume_bit_exact
from perfsuite.training.setup import training_setup
from perfsuite.training.state_file import CheckpointError, EarlyStopping, Progress, load_checkpoint, save_checkpoint

PARAMS = {"batch_size": 4}


def _kw(setup):
    p = setup.parts
    return dict(model=p.model, optimizer=p.optimizer, scheduler=p.scheduler)


@pytest.mark.parametrize("workload", ["resnet", "autoencoder"])
@pytest.mark.slow
def test_resume_is_bit_exact(tmp_path, workload):
    # The same check `perfsuite check` runs: losses, weights, the RNG stream and the LR schedule
    # of an interrupted and resumed run equal the uninterrupted run's (CheckFailed otherwise).
    case = importlib.import_module(f"perfsuite.workloads.{workload}").TRAINING_CHECKS
    assert "identical" in resume_bit_exact(case, "cpu", steps=6 if workload == "autoencoder" else 4, folder=tmp_path)


def test_corrupt_or_truncated_checkpoint_restores_nothing(tmp_path):
    s = training_setup("resnet", PARAMS, "cpu", seed=0)
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, progress=Progress(step=1), **_kw(s))
    before = {k: v.clone() for k, v in s.parts.model.state_dict().items()}

    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="truncated.pt: not a readable checkpoint"):
        load_checkpoint(truncated, **_kw(s))
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x00" * 100)
    with pytest.raises(CheckpointError, match="garbage.pt"):
        load_checkpoint(garbage, **_kw(s))
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt", **_kw(s))

    # A checkpoint of a different model: the error names the file and nothing changes.
    other = training_setup("resnet", {**PARAMS, "model": "resnet34"}, "cpu", seed=1)
    other_path = tmp_path / "resnet34.pt"
    save_checkpoint(other_path, progress=Progress(step=1), **_kw(other))
    with pytest.raises(CheckpointError, match="resnet34.pt: does not fit"):
        load_checkpoint(other_path, **_kw(s))
    for k, v in s.parts.model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_early_stopping_and_best_tracking():
    es = EarlyStopping(patience=2, mode="min")
    assert es.update(1.0) and es.best == 1.0
    assert not es.update(1.2)
    assert es.update(0.5) and es.bad_evals == 0
    assert not es.update(0.6) and not es.should_stop
    assert not es.update(0.7) and es.should_stop
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping(patience=0)


def _walk(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _walk(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _walk(v)
    else:
        yield obj


def test_cuda_rng_state_survives_map_location_and_is_restored(tmp_path, monkeypatch):
    """On an H100 a checkpoint loaded with map_location='cuda:0' came back with its RNG states on the
    GPU, and `torch.cuda.set_rng_state_all` refused them (\"RNG state must be a torch.ByteTensor\").
    The CUDA generator is faked here with the real one's rule: CPU uint8 tensors only."""
    cuda_state = torch.arange(16, dtype=torch.uint8)
    restored = []

    def strict_set_all(states):
        for s in states:
            if not (isinstance(s, torch.Tensor) and s.device.type == "cpu" and s.dtype == torch.uint8):
                raise TypeError("RNG state must be a torch.ByteTensor")
        restored.append([s.clone() for s in states])

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [cuda_state.clone()])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", strict_set_all)

    s = training_setup("autoencoder", PARAMS, "cpu", seed=0)
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, progress=Progress(step=1), **_kw(s))
    # Every RNG state is stored as bytes: map_location moves tensors, so no device can capture them.
    raw = torch.load(path, weights_only=True, map_location="cpu")
    assert not any(isinstance(x, torch.Tensor) for x in _walk(raw["rng"]))

    load_checkpoint(path, map_location="cpu", **_kw(s))
    assert len(restored) == 1 and torch.equal(restored[0][0], cuda_state)


def test_version_1_rng_tensors_on_any_device_are_restored():
    """Version-1 files hold RNG states as tensors; they are brought back to CPU bytes before use."""
    from perfsuite.training import state_file as ck

    before = torch.get_rng_state()
    draws = torch.randn(3)
    torch.manual_seed(7)
    state = ck._rng_state()
    state["torch"] = before.to(torch.int64)  # not a ByteTensor: must be normalised, not refused
    keys = np.frombuffer(state["numpy"]["keys"], dtype=np.uint32)
    state["numpy"]["keys"] = torch.from_numpy(keys.astype(np.int64))
    ck._set_rng_state(state)
    assert torch.equal(torch.randn(3), draws)
