"""`perfsuite check`: each check passes on the real code and fails on a broken one."""

import math
import os
import re

import pytest
import torch

from perfsuite.cli import app as cli
from perfsuite.core.check_failed import CheckFailed
from perfsuite.suite import correctness as suite_checks
from perfsuite.training import checks
from perfsuite.training.setup import training_setup
from perfsuite.workloads.autoencoder import TRAINING_CHECKS as AE
from perfsuite.workloads.resnet import TRAINING_CHECKS as RESNET


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
    assert "stopped after epoch 5" in checks.early_stopping(AE, folder=tmp_path)
    with pytest.raises(CheckFailed, match="stopped after epoch None, expected 5"):
        checks.early_stopping(AE, metric=(5, 4, 3, 2, 1, 0.5, 0.2), folder=tmp_path)


def test_amp_check_fails_when_the_low_precision_run_diverges():
    def broken(params, device, seed):
        return training_setup("autoencoder", params, device, seed, lr_scale=300.0)

    with pytest.raises(CheckFailed, match=r"bf16 [\d.]+% from fp32 over 6 applied steps, allowed"):
        checks.amp_loss_agreement(AE, steps=6, setup_b=broken)


# Issue 55: deliberately broken AMP must fail the check, in real bf16 numerics on any CPU (torch
# computes bf16 where the hardware lacks it, only slower; the autoencoder keeps it to a second).


def test_amp_check_fails_when_the_loss_is_computed_in_bf16():
    def bf16_loss(params, device, seed):
        setup = training_setup("autoencoder", params, device, seed)
        # Written out by hand, not F.mse_loss (which autocast computes in float32 whatever its inputs).
        setup.parts.loss_fn = lambda out, x: ((out.bfloat16() - x.bfloat16()) ** 2).mean()
        return setup

    with pytest.raises(CheckFailed, match="the loss is computed in bfloat16, fp32's in float32"):
        checks.amp_loss_agreement(AE, setup_b=bf16_loss)


def test_amp_check_fails_when_a_cast_drops_gradients():
    """A layer that uses a bf16 copy of its weight made outside autograd (a cached cast) never
    trains that weight; the fp32 run trains it."""

    def dropped(params, device, seed):
        setup = training_setup("autoencoder", params, device, seed)
        conv = next(m for m in setup.parts.model.modules() if isinstance(m, torch.nn.Conv2d))

        def forward(x, conv=conv):
            w = conv.weight.detach().to(torch.bfloat16)
            return conv._conv_forward(x, w, None if conv.bias is None else conv.bias.detach().to(torch.bfloat16))

        conv.forward = forward
        return setup

    with pytest.raises(CheckFailed, match=r"2 parameter\(s\) get no gradient in bf16 that do in fp32: \S+weight"):
        checks.amp_loss_agreement(AE, setup_b=dropped)


def test_amp_check_measures_its_tolerance_from_perturbed_fp32_runs():
    """The allowed distance is what fp32 from weights perturbed by bf16's rounding shows, times
    the factor, never below the floor: a tighter floor on a model whose perturbed runs wander
    is still passed by a healthy bf16, and an impossible one fails it."""
    from perfsuite.training import agreement

    a = agreement.loss_agreement("autoencoder", AE.params, "cpu", "bf16", 6, floor=0.0)
    assert len(a.noise) == agreement.PERTURBED_RUNS and all(0 < d < 0.05 for d in a.noise)
    assert a.allowed == pytest.approx(agreement.ENVELOPE_FACTOR * max(a.noise))
    assert a.ok == (a.distance <= a.allowed) and not a.problems
    assert agreement.trajectory_distance([1.0, 2.0, 3.0], [1.0, 1.0, 1.0]) == pytest.approx(1.5)
    assert agreement.trajectory_distance([1.0, float("nan")], [1.0, 1.0]) == float("inf")


@pytest.mark.slow
def test_amp_check_passes_a_healthy_resnet_in_bf16():
    """The ResNet18 pair that failed on a CPU with AMX (issue 55: 5.5% apart against a fixed 5%).
    On a CPU that emulates bf16 it runs too, slower (17.6 s here with oneDNN held to AVX2, 5.8 s
    with AMX; an AVX2-only EPYC ran bf16 matmuls ~58x slower than fp32)."""
    assert "allowed" in checks.amp_loss_agreement(RESNET)


@pytest.mark.slow
def test_the_amp_check_passes_where_the_cpu_has_no_bf16_instructions():
    """oneDNN and ATen held to AVX2 (no AVX512-BF16, no AMX), as on a CPU without bf16 in
    hardware: torch still computes in bf16, by conversion, and the check passes on the same rule.
    (The settings are read when the libraries start: a process of its own.)"""
    import subprocess
    import sys

    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    out = subprocess.run(
        [sys.executable, "-m", "perfsuite", "check", "autoencoder"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"ok +autoencoder: AMP keeps the loss: bf16 [\d.]+% from fp32", out.stdout), out.stdout


@pytest.fixture
def fp16_on_cpu(monkeypatch):
    """fp16 training as on CUDA, emulated on CPU: autocast to float16 and a GradScaler("cpu")
    with the CUDA scaler's defaults (initial scale 65536). perfsuite refuses fp16 off CUDA; the
    emulation lifts only that refusal."""
    from perfsuite.training import precision

    monkeypatch.setattr(precision, "check_precision", lambda p, d: None)


@pytest.mark.slow
def test_amp_check_compares_fp16_at_equal_applied_steps(fp16_on_cpu):
    """On an H100 the ResNet's AMP check failed ("fp16 reaches 0.5721, fp32 0.7152 after 12
    steps: 20.0% apart") and the suite refused every ResNet entry: fp16's GradScaler skips its
    first steps (inf gradients at scale 65536), so after 12 steps fp16 had applied fewer updates.
    On CPU the same emulated run skipped 4 and ended 17.9% apart; compared at 12 applied steps
    each, the two agree."""
    # 6 applied steps, not the case's 12: emulated fp16 is slow on a CPU, and the agreement rule
    # trains five runs (the skips come first either way).
    detail = checks.amp_loss_agreement(RESNET, low="fp16", steps=6)
    skipped = re.search(r"GradScaler skipped (\d+)", detail)
    assert skipped and int(skipped.group(1)) >= 1, detail  # the emulation does reproduce the skips
    assert "over 6 applied steps" in detail


@pytest.mark.slow
def test_amp_check_fails_when_fp16_overflows_at_every_scale(fp16_on_cpu):
    """Skipped steps are forgiven only while the scale falls to 1: gradients that overflow even
    unscaled are divergence, and the check must end (not loop) and say so."""

    def overflowing(params, device, seed):
        setup = training_setup("autoencoder", params, device, seed)
        loss_fn = setup.parts.loss_fn
        setup.parts.loss_fn = lambda out, x: loss_fn(out, x) * float("inf")
        return setup

    with pytest.raises(CheckFailed, match=r"fp16: the GradScaler skipped 18 steps .* overflow even unscaled"):
        checks.amp_loss_agreement(AE, steps=3, setup_b=overflowing, low="fp16")


def test_amp_check_fails_fp16_without_a_grad_scaler(fp16_on_cpu):
    def unscaled(params, device, seed):
        setup = training_setup("autoencoder", params, device, seed)
        setup.parts.precision.scaler = None
        return setup

    with pytest.raises(CheckFailed, match="fp16 trains without a GradScaler"):
        checks.amp_loss_agreement(AE, setup_b=unscaled, low="fp16")


def test_resume_check_fails_when_the_rng_is_not_restored(tmp_path, monkeypatch):
    from perfsuite.training import state_file

    assert "identical" in checks.resume_bit_exact(AE, steps=2, folder=tmp_path)
    monkeypatch.setattr(state_file, "_set_rng_state", lambda state, *rest: None)
    with pytest.raises(CheckFailed, match="resumed loss|RNG stream"):
        checks.resume_bit_exact(AE, steps=2, folder=tmp_path)


def test_the_checks_are_what_each_workload_file_declares():
    from perfsuite.core import registry

    assert [n for n, _ in suite_checks.checks_for("resnet")] == [
        "AMP keeps the loss",
        "resume is bit-exact",
        "early stopping",
    ]
    assert suite_checks.checks_for("noop") == []
    for name in registry.names():
        assert suite_checks.checks_for(name) == list((registry.get(name).checks or {}).items())


def _summation_order_noise(g):
    """A weight gradient as a kernel that accumulates with atomics computes it: the same sum in
    another order, so the last bit of about half the elements differs from run to run (seeded
    from os.urandom: nothing the check seeds can make it repeat)."""
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
    flip = torch.rand(g.shape, generator=gen) < 0.5
    return torch.where(flip, torch.nextafter(g, torch.full_like(g, math.inf)), g)


def _with_first_conv_grad(monkeypatch, hook):
    """The autoencoder's training parts with `hook` on its first conv's weight gradient."""
    from perfsuite.workloads import autoencoder

    build = autoencoder.build_parts

    def build_parts(params, device):
        parts = build(params, device)
        parts.model["encoder"][0].weight.register_hook(hook)
        return parts

    monkeypatch.setattr(autoencoder, "build_parts", build_parts)


def test_resume_check_runs_on_deterministic_kernels_and_restores_the_settings(tmp_path, monkeypatch):
    """On an H100: "FAIL autoencoder: resume is bit-exact: weight encoder.0.weight differs after
    resume" with every loss equal. Emulated: the first conv's weight gradient is summed in a
    run-dependent order unless deterministic algorithms are on (as cuDNN's convolution backward
    is, by torch's documentation of use_deterministic_algorithms). The check must turn them on,
    and give back the caller's settings afterwards."""

    def conv_wgrad(g):
        return g if torch.are_deterministic_algorithms_enabled() else _summation_order_noise(g)

    _with_first_conv_grad(monkeypatch, conv_wgrad)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    torch.backends.cudnn.benchmark = True  # a user's setting; restored by the finally below
    try:
        detail = checks.resume_bit_exact(AE, folder=tmp_path)
        assert "identical (deterministic kernels)" in detail
        assert not torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.benchmark and not torch.backends.cudnn.deterministic
        assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    finally:
        torch.backends.cudnn.benchmark = False


def test_resume_check_without_a_deterministic_kernel_compares_within_a_tolerance(tmp_path, monkeypatch):
    """An op with no deterministic kernel (torch warns under warn_only: here a real one, put_)
    cannot be asked for bit-exactness: the check says which op and compares within its stated
    tolerance, which still catches an optimiser state that was not restored."""

    def no_deterministic_kernel(g):
        torch.zeros(1).put_(torch.tensor([0]), torch.tensor([1.0]))  # torch's alert: "put_ does not have ..."
        return _summation_order_noise(g)

    _with_first_conv_grad(monkeypatch, no_deterministic_kernel)
    detail = checks.resume_bit_exact(AE, folder=tmp_path)
    assert "losses and weights within rtol 1.3e-06, atol 1e-05 (put_: no deterministic kernel on cpu)" in detail

    monkeypatch.setattr(torch.optim.Adam, "load_state_dict", lambda self, state: None)
    with pytest.raises(CheckFailed, match=r"differs after resume \(beyond rtol|resumed loss .* \(beyond rtol"):
        checks.resume_bit_exact(AE, folder=tmp_path)
