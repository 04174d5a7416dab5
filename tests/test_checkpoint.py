"""Interrupt and resume ends bit-exactly where the uninterrupted run ends (on CPU)."""

import pytest
import torch

from perfsuite.training.checkpoint import CheckpointError, EarlyStopping, Progress, load_checkpoint, save_checkpoint
from perfsuite.training.setup import train_losses, training_setup

PARAMS = {"batch_size": 4}


def _kw(setup):
    p = setup.parts
    return dict(model=p.model, optimizer=p.optimizer, scheduler=p.scheduler)


def _noisy_losses(setup, start, stop):
    # Draws from the global RNG each step, so the resumed run is exact only if RNG state is restored.
    out = []
    for i in range(start, stop):
        torch.randn(3)
        out += train_losses(setup, i, i + 1)
    return out


@pytest.mark.parametrize("workload", ["resnet", "autoencoder"])
def test_resume_is_bit_exact(tmp_path, workload):
    full = training_setup(workload, PARAMS, "cpu", seed=0)
    full_losses = _noisy_losses(full, 0, 6)
    ref_next = torch.randn(4)  # the RNG stream after 6 steps

    first = training_setup(workload, PARAMS, "cpu", seed=0)
    part_losses = _noisy_losses(first, 0, 3)
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, progress=Progress(step=3, epoch=0, best_metric=part_losses[-1]), **_kw(first))
    torch.manual_seed(12345)  # disturb the RNG, as a new process would have

    resumed = training_setup(workload, PARAMS, "cpu", seed=99)  # different initial weights
    progress = load_checkpoint(path, **_kw(resumed))
    assert progress.step == 3 and progress.best_metric == part_losses[-1]
    rest = _noisy_losses(resumed, progress.step, 6)

    assert part_losses + rest == full_losses
    for (name, a), (_, b) in zip(full.parts.model.state_dict().items(), resumed.parts.model.state_dict().items()):
        assert torch.equal(a, b), name
    assert torch.equal(torch.randn(4), ref_next)
    if full.parts.scheduler is not None:
        assert full.parts.scheduler.get_last_lr() == resumed.parts.scheduler.get_last_lr()


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
