"""The workload interface: a named, parametrised builder of one timed step.

Core types, beside the record: the runner and the registry import them from here, never from
the concrete workloads in perfsuite/workloads/.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from perfsuite.core.params import Param, resolve
from perfsuite.core.record import Work


@dataclass(frozen=True)
class BuiltStep:
    """What a workload hands the runner, built outside the timed region.

    `fn` runs one step with everything already on the device; `work` says what one step does.
    """

    fn: Callable[[], object]
    work: Work
    teardown: Callable[[], None] | None = None
    # Workload-specific measurements, read after the timed region (e.g. DataLoader start-up).
    extra: Callable[[], dict] | None = None


Builder = Callable[[Mapping[str, Any], str], BuiltStep]
Checker = Callable[[Mapping[str, Any], str], None]


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    params: tuple[Param, ...]
    builder: Builder
    # Raises perfsuite.core.errors.Unsupported when a case cannot run on a device (checked before
    # any case of a sweep is measured; asv turns it into a skip).
    checker: Checker | None = None
    # Values a `size` preset gives to parameters left unset (default None).
    presets: Mapping[str, Mapping[str, Any]] | None = None
    # Training workloads: (resolved params, device) -> perfsuite.training.setup.TrainingSetup,
    # the parts, forward and batches its timed step is made of. The AMP comparison, profile-step,
    # trace and the correctness checks build from it, so they all run the step `run` times.
    trainer: Callable[[Mapping[str, Any], str], Any] | None = None
    # The default sweep: parameters whose declared default is a list of values (user workloads
    # declared with @perfsuite.workload); a case not given a value for one runs each of them.
    sweep: Mapping[str, tuple] | None = None
    # Where the workload was declared ("file:line"), to name both places when two share a name.
    source: str = ""
    # A user workload's own correctness check: (resolved params, device) -> None, raises on failure.
    user_check: Checker | None = None

    # Which kernels carry an fp32 step's FLOPs on CUDA, so which TF32 flag sets the roof it is
    # judged against: "matmul" (cuBLAS, torch.backends.cuda.matmul.allow_tf32, off by default)
    # or "conv" (cuDNN, torch.backends.cudnn.allow_tf32, on by default); or (parameter name,
    # {its value: one of those}) where a parameter decides (a tuple, not a function: workloads
    # cross into worker processes pickled). None: undeclared (tf32 roof when either flag allows it).
    fp32_kernels: str | tuple[str, Mapping[Any, str]] | None = None

    # The most builds of the step the runner may hold at once and rotate (RunConfig.builds); 1 for
    # a step that owns something only one of may exist (ranks of a process group, a large model).
    max_builds: int | None = None

    def default_sweep(self, given: Mapping[str, list]) -> dict[str, list]:
        """`given` value lists, with the default sweep filled in for parameters not given."""
        return {**{k: list(v) for k, v in (self.sweep or {}).items() if k not in given}, **given}

    def resolve(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults and `size` preset filled in, every value validated; errors name the parameter."""
        params = resolve(self.params, given, self.name)
        if self.presets is not None:
            preset = self.presets[params["size"]]
            for key, value in preset.items():
                if params.get(key) is None:
                    params[key] = value
        return params

    def check(self, params: Mapping[str, Any], device: str) -> None:
        if self.checker is not None:
            self.checker(self.resolve(params), device)

    def build(self, params: Mapping[str, Any], device: str) -> BuiltStep:
        return self.builder(self.resolve(params), device)
