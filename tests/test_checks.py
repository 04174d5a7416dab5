"""`perfsuite check`: each check passes on the real code and fails on a broken one."""

import pytest
import torch

from perfsuite.run import checks

from perfsuite import cli
from perfsuite.run.checks import CheckFailed
from perfsuite.training.setup import training_setup


class _WrongSwish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(x)  # forgets the x * s * (1 - s) term


def test_cli_runs_the_checks_and_exits_by_outcome(capsys, monkeypatch):
    assert cli.main(["check", "activation", "matmul", "mar", "noop"]) == 0
    out = capsys.readouterr().out
    assert out.count("\nok  ") + out.startswith("ok  ") == 8 + 2 + 1
    assert "gradcheck mish save=input+sigmoid" in out and "noop: no correctness checks" in out
    assert "checks on cpu: 11 ok, 0 failed" in out
    assert cli.main(["check", "nosuch"]) == 2

    from perfsuite.ops import activations

    monkeypatch.setitem(activations._FUNCTIONS, ("swish", "input"), _WrongSwish)
    assert cli.main(["check", "activation"]) == 3
    out = capsys.readouterr().out
    assert "FAIL  activation: gradcheck swish save=input:" in out
    assert "FAIL  activation: swish save=input = builtin: gradients differ from F.silu" in out
    assert "checks on cpu: 6 ok, 2 failed" in out


def test_early_stopping_check(tmp_path):
    assert "stopped after epoch 5" in checks.early_stopping("autoencoder", folder=tmp_path)
    with pytest.raises(CheckFailed, match="stopped after epoch None, expected 5"):
        checks.early_stopping("autoencoder", metric=(5, 4, 3, 2, 1, 0.5, 0.2), folder=tmp_path)


def test_amp_check_fails_when_the_low_precision_run_diverges():
    def broken(params, device, seed):
        return training_setup("autoencoder", params, device, seed, lr_scale=300.0)

    with pytest.raises(CheckFailed, match="bf16 reaches .* apart"):
        checks.amp_loss_agreement("autoencoder", steps=6, setup_b=broken)


def test_resume_check_fails_when_the_rng_is_not_restored(tmp_path, monkeypatch):
    from perfsuite.training import checkpoint

    assert "identical" in checks.resume_bit_exact("autoencoder", steps=2, folder=tmp_path)
    monkeypatch.setattr(checkpoint, "_set_rng_state", lambda state: None)
    with pytest.raises(CheckFailed, match="resumed loss|RNG stream"):
        checks.resume_bit_exact("autoencoder", steps=2, folder=tmp_path)


def test_every_workload_with_checks_exists():
    from perfsuite.core import registry

    assert set(checks._checks()) <= set(registry.names())
