"""fp32 / bf16 autocast / fp16 autocast with a GradScaler, as one object per training step."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from perfsuite.core.errors import Unsupported

PRECISIONS = ("fp32", "bf16", "fp16")


def check_precision(precision: str, device: str) -> None:
    if precision == "fp16" and not device.startswith("cuda"):
        raise Unsupported(
            f"parameter 'precision': fp16 training needs CUDA (autocast + GradScaler); "
            f"device is {device}. Use precision=bf16 on CPU"
        )


@dataclass
class Precision:
    """Autocast context and loss scaling for one precision on one device."""

    name: str
    device: str
    # Whether the optimiser has taken a real step yet (a GradScaler skips steps whose gradients
    # overflowed, which at its initial scale are usually the first few).
    stepped: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        import torch

        check_precision(self.name, self.device)
        self.device_type = "cuda" if self.device.startswith("cuda") else "cpu"
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name)
        # fp16 gradients underflow without loss scaling; bf16 has fp32's exponent range and does not.
        # The scaler of this device's type: "cuda" on a CPU device would warn and disable itself
        # (fp16 on CPU is refused above, but the checks' tests emulate fp16 training on CPU).
        self.scaler = torch.amp.GradScaler(self.device_type) if self.name == "fp16" else None

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        import torch

        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def backward(self, loss) -> None:
        """Backward, through the loss scaler when there is one."""
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def step(self, optimizer) -> bool:
        """Optimiser step; with a scaler, unscaled and skipped on inf/NaN gradients, then rescaled.

        Returns whether the optimiser stepped, so that an LR scheduler is stepped only after it
        (stepping it first is what PyTorch warns about in every fp16 run). Until the first real
        step that is read from the scale (a skipped step halves it): a device sync, but only in
        the first steps of warm-up. Afterwards a rare skipped step still advances the schedule,
        as the usual AMP recipe does: checking every step would sync inside the timed region.
        """
        if self.scaler is None:
            optimizer.step()
            self.stepped = True
            return True
        if self.stepped:
            self.scaler.step(optimizer)
            self.scaler.update()
            return True
        before = self.scaler.get_scale()
        self.scaler.step(optimizer)
        self.scaler.update()
        self.stepped = self.scaler.get_scale() >= before
        return self.stepped

    def backward_and_step(self, loss, optimizer) -> bool:
        self.backward(loss)
        return self.step(optimizer)
