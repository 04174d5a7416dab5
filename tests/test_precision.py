"""Loss scaling and the LR schedule: the schedule advances only after a real optimiser step."""

import torch

from perfsuite.training.setup import training_setup
from perfsuite.training.step import make_train_step


def test_scaler_skipped_steps_do_not_step_the_scheduler():
    """On an H100 every fp16 ResNet run warned "Detected call of `lr_scheduler.step()` before
    `optimizer.step()`": GradScaler skips the first steps (their gradients overflow at its initial
    scale) but the scheduler was stepped anyway. Reproduced on CPU with a CPU GradScaler whose
    initial scale overflows the loss; warnings are errors in this test suite."""
    setup = training_setup("resnet", {"batch_size": 4}, "cpu", seed=0)
    prec = setup.parts.precision
    prec.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127)
    step = make_train_step(setup.parts, *setup.batch(0), forward=setup.forward)
    scales = [prec.scaler.get_scale()]
    for _ in range(6):
        step()
        scales.append(prec.scaler.get_scale())
    skipped = sum(b < a for a, b in zip(scales, scales[1:]))
    assert skipped >= 1, f"the initial scale should overflow at least once: {scales}"
    assert prec.stepped
    # One scheduler step per real optimiser step, none for the skipped ones.
    assert setup.parts.scheduler.last_epoch == 6 - skipped


def test_without_a_scaler_every_step_steps_the_scheduler():
    setup = training_setup("resnet", {"batch_size": 4}, "cpu", seed=0)
    step = make_train_step(setup.parts, *setup.batch(0), forward=setup.forward)
    for _ in range(3):
        step()
    assert setup.parts.scheduler.last_epoch == 3
