"""The correctness checks every training workload declares through
`training_checks(TrainingCase(...))`:

- AMP keeps the loss (fp32 and bf16 on CPU, fp16 on CUDA, from the same initial weights on the
  same batch to the same number of applied optimiser steps, fp16's GradScaler skipping its first
  ones: the low precision's loss trajectory within what its rounding alone explains, measured
  on fp32 runs from perturbed weights; perfsuite.training.agreement);
- interrupt + resume ends bit-exactly where the uninterrupted run ends (losses, weights, the RNG
  stream, the LR schedule);
- early stopping on a scripted validation metric stops at the right epoch and the best
  checkpoint holds the best epoch's weights.

Each check returns a one-line detail, or raises CheckFailed with what went wrong. The tests call
the same functions (tests/test_checks.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from perfsuite.core.check_failed import CheckFailed, need
from perfsuite.training.agreement import DEFAULT_FLOOR, loss_agreement
from perfsuite.training.applied import ScalerDiverged
from perfsuite.training.setup import train_losses, training_setup
from perfsuite.training.state_file import EarlyStopping, Progress, load_checkpoint, save_checkpoint


@dataclass(frozen=True)
class TrainingCase:
    """What a training workload's checks build: a small case of it (`params`), the optimiser
    steps the AMP check applies and the steps the resume check runs. The workload file declares
    it (e.g. perfsuite/workloads/resnet.py) and passes `training_checks(case)` as its checks."""

    workload: str
    params: Mapping[str, Any]
    amp_steps: int
    resume_steps: int


def training_checks(case: TrainingCase) -> dict[str, Callable[[str], str]]:
    """The three named checks of a training workload: AMP, resume, early stopping. (Partials, not
    lambdas: a workload crosses into worker processes pickled.)"""
    return {
        "AMP keeps the loss": partial(amp_loss_agreement, case),
        "resume is bit-exact": partial(resume_bit_exact, case),
        "early stopping": partial(early_stopping, case),
    }


def amp_loss_agreement(
    case: TrainingCase,
    device: str = "cpu",
    steps: int | None = None,
    floor: float = DEFAULT_FLOOR,
    setup_b: Callable | None = None,
    low: str | None = None,
) -> str:
    """fp32 and the low precision (`low`: fp16 on CUDA, bf16 elsewhere) train from the same
    initial weights on the same batch to the same number of *applied* optimiser steps; the low
    precision's loss trajectory must stay within what its rounding alone explains, and its run
    must have none of the AMP defects read directly (perfsuite.training.agreement)."""
    steps = steps or case.amp_steps
    low = low or ("fp16" if device.startswith("cuda") else "bf16")
    try:
        # seed 1: the initial weights `perfsuite amp` compares from (compare.amp.compare_precisions).
        agreement = loss_agreement(case.workload, case.params, device, low, steps, setup_b=setup_b, floor=floor)
    except ScalerDiverged as exc:
        raise CheckFailed(str(exc)) from None
    need(agreement.ok, agreement.describe())
    la = agreement.reference.losses
    need(la[-1] < la[0], f"fp32 did not learn: loss {la[0]:.4g} -> {la[-1]:.4g}")
    return agreement.describe()


def _noisy_losses(setup, start: int, stop: int) -> list[float]:
    """Steps that also draw from the global RNG: the resumed run matches only if the RNG state
    is restored as well."""
    import torch

    out = []
    for i in range(start, stop):
        torch.randn(3)
        out += train_losses(setup, i, i + 1)
    return out


def _state(setup) -> dict:
    p = setup.parts
    return dict(model=p.model, optimizer=p.optimizer, scheduler=p.scheduler)


# torch's alert for an op without a deterministic kernel when warn_only is set (ATen's
# Context::alertNotDeterministic): "<op> does not have a deterministic implementation, but ...".
_NOT_DETERMINISTIC = re.compile(r"^(\S+) does not have a deterministic implementation")
# cuBLAS's documented settings for reproducible results; torch refuses cuBLAS calls under
# deterministic mode without one of them (CUDA >= 10.2).
CUBLAS_DETERMINISTIC = ":4096:8"


def _nondeterministic_ops(caught) -> list[str]:
    """The ops named by torch's not-deterministic alerts among the recorded warnings, in order."""
    names = [m.group(1) for w in caught if (m := _NOT_DETERMINISTIC.match(str(w.message)))]
    return list(dict.fromkeys(names))


@contextlib.contextmanager
def deterministic_kernels():
    """Deterministic kernels for the duration of a check, everything restored afterwards.

    On an H100 the autoencoder's resume check failed with "weight encoder.0.weight differs after
    resume" while all six losses matched bit for bit: the state came back (a lost optimiser
    state or LR moves the losses), but some kernel summed in another order. Reading the step:
    Adam's foreach update is elementwise and restored exactly (its `step` comes back on the GPU
    through map_location, but is read with .item(), the same number); MSE and the linears are
    deterministic on one stream; what is not is cuDNN's convolution backward, which by default
    may pick weight-gradient algorithms that accumulate with atomics (the first conv, 3 input
    channels and a 16x16 output, reduces 2,048 products per weight), so two identical runs
    differ in the last bits, and Adam's division by sqrt(v) carries that into the weights
    (encoder.0.weight is simply the first tensor compared). ResNet's run passed, but nothing
    guaranteed its algorithms either. This is the cause by reading; a GPU run must confirm it.

    `torch.use_deterministic_algorithms(True)` makes convolutions and transposed convolutions
    on CUDA use deterministic algorithms (torch's documentation lists them); cudnn.benchmark
    off keeps the choice from depending on timing. `warn_only`: an op with no deterministic
    kernel warns instead of raising (ResNet's cross-entropy runs nll_loss, on torch's list of
    ops that would raise on CUDA); the context yields a function naming the ops that warned so
    far, and the check then compares within a stated tolerance instead of bit for bit.

    CUBLAS_WORKSPACE_CONFIG is set when unset, because torch refuses cuBLAS calls under
    deterministic mode without it. cuBLAS reads it when its workspace is first made, so in a
    process that already used cuBLAS it only satisfies torch's test; that is enough here: the
    check runs on one stream, where cuBLAS is reproducible by NVIDIA's documentation (the
    setting is about work spread over streams)."""
    import torch

    cudnn = torch.backends.cudnn
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        cudnn.benchmark,
        cudnn.deterministic,
        os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    )
    try:
        if saved[4] is None:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_DETERMINISTIC
        torch.use_deterministic_algorithms(True, warn_only=True)
        cudnn.benchmark, cudnn.deterministic = False, True
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield lambda: _nondeterministic_ops(caught)
        for w in caught:
            if not _NOT_DETERMINISTIC.match(str(w.message)):  # not ours to swallow
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        cudnn.benchmark, cudnn.deterministic = saved[2], saved[3]
        if saved[4] is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


# Where an op without a deterministic kernel ran, the resumed run is compared within these
# (torch.testing's float32 defaults: an ulp-level difference in a summation order passes, a lost
# optimiser state or learning rate moves the weights by far more after one step).
RESUME_RTOL, RESUME_ATOL = 1.3e-6, 1e-5


def resume_bit_exact(
    case: TrainingCase, device: str = "cpu", steps: int | None = None, folder: Path | None = None
) -> str:
    """Run `steps` steps; separately run half, save, disturb every RNG, build with other weights,
    load and run the rest: the losses, the weights, the RNG stream and the LR must be identical.
    Both runs use deterministic kernels (`deterministic_kernels`): bit-exactness is a property of
    the saved state only when the kernels are."""
    with deterministic_kernels() as nondeterministic:
        return _resume(case, device, steps, folder, nondeterministic)


def _resume(
    case: TrainingCase, device: str, steps: int | None, folder: Path | None, nondeterministic: Callable[[], list[str]]
) -> str:
    import torch

    workload, params = case.workload, case.params
    steps = steps or case.resume_steps
    half = steps // 2
    full = training_setup(workload, params, device, seed=0)
    full_losses = _noisy_losses(full, 0, steps)
    ref_next = torch.randn(4)
    first = training_setup(workload, params, device, seed=0)
    part = _noisy_losses(first, 0, half)
    with tempfile.TemporaryDirectory(prefix="perfsuite-check-", dir=folder) as tmp:
        path = Path(tmp) / "ckpt.pt"
        save_checkpoint(path, progress=Progress(step=half, epoch=0, best_metric=part[-1]), **_state(first))
        torch.manual_seed(12345)  # disturb the RNG, as a new process would have
        resumed = training_setup(workload, params, device, seed=99)  # other initial weights
        progress = load_checkpoint(path, map_location=device, **_state(resumed))
    need(
        progress.step == half and progress.best_metric == part[-1],
        f"progress came back as step {progress.step}, best {progress.best_metric}",
    )
    rest = _noisy_losses(resumed, progress.step, steps)
    # With an op that has no deterministic kernel, exact equality cannot be asked of the kernels.
    ops = nondeterministic()
    exact = not ops
    within = "" if exact else f" (beyond rtol {RESUME_RTOL:g}, atol {RESUME_ATOL:g})"

    def same(a, b) -> bool:
        if exact:
            return torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
        return torch.allclose(torch.as_tensor(a), torch.as_tensor(b), rtol=RESUME_RTOL, atol=RESUME_ATOL)

    resumed_losses = part + rest
    for i, (a, b) in enumerate(zip(resumed_losses, full_losses)):
        need(same(a, b), f"step {i}: resumed loss {a!r} != uninterrupted {b!r}" + within)
    for (name, a), (_, b) in zip(full.parts.model.state_dict().items(), resumed.parts.model.state_dict().items()):
        need(same(a, b), f"weight {name} differs after resume" + within)
    need(torch.equal(torch.randn(4), ref_next), "the RNG stream differs after resume")
    if full.parts.scheduler is not None:
        resumed_lr = resumed.parts.scheduler.get_last_lr() if resumed.parts.scheduler is not None else None
        need(full.parts.scheduler.get_last_lr() == resumed_lr, "the LR differs")
    if exact:
        return f"{steps} steps, interrupted after {half}: losses, weights, RNG and LR identical (deterministic kernels)"
    return (
        f"{steps} steps, interrupted after {half}: RNG and LR identical, losses and weights within rtol "
        f"{RESUME_RTOL:g}, atol {RESUME_ATOL:g} ({', '.join(ops)}: no deterministic kernel on {device})"
    )


# The validation metric of seven epochs, lower is better: epoch 2 is worse once (patience left),
# epoch 3 is the best; with patience 2, epochs 4 and 5 do not improve, so training stops after
# epoch 5 and never sees epoch 6's better value.
SCRIPTED_METRIC = (1.0, 0.8, 0.9, 0.7, 0.75, 0.76, 0.6)
PATIENCE = 2
EXPECT_BEST, EXPECT_STOP = 3, 5


def early_stopping(case: TrainingCase, device: str = "cpu", metric=SCRIPTED_METRIC, folder: Path | None = None) -> str:
    """One training step per epoch, the scripted metric as validation; the best epoch is saved.
    Training must stop after EXPECT_STOP, and the saved checkpoint must hold EXPECT_BEST's weights."""
    import torch

    setup = training_setup(case.workload, case.params, device, seed=0)
    es = EarlyStopping(patience=PATIENCE, mode="min")
    best_weights, stopped = None, None
    with tempfile.TemporaryDirectory(prefix="perfsuite-check-", dir=folder) as tmp:
        path = Path(tmp) / "best.pt"
        for epoch, value in enumerate(metric):
            train_losses(setup, epoch, epoch + 1)
            if es.update(value):
                save_checkpoint(
                    path, progress=Progress(step=epoch + 1, epoch=epoch, best_metric=value), **_state(setup)
                )
                best_weights = {k: v.clone() for k, v in setup.parts.model.state_dict().items()}
            if es.should_stop:
                stopped = epoch
                break
        need(
            stopped == EXPECT_STOP,
            f"stopped after epoch {stopped}, expected {EXPECT_STOP} (patience {PATIENCE}, metric {list(metric)})",
        )
        restored = training_setup(case.workload, case.params, device, seed=7)
        progress = load_checkpoint(path, map_location=device, **_state(restored))
    need(
        progress.epoch == EXPECT_BEST and es.best == metric[EXPECT_BEST],
        f"best checkpoint is epoch {progress.epoch} (metric {progress.best_metric}), expected {EXPECT_BEST}",
    )
    assert best_weights is not None  # the first epoch is always the best so far
    for k, v in restored.parts.model.state_dict().items():
        need(torch.equal(v, best_weights[k]), f"the best checkpoint's {k} is not the best epoch's")
    return f"stopped after epoch {stopped} (patience {PATIENCE}); best epoch {EXPECT_BEST} restored from its checkpoint"
