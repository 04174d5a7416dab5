"""`perfsuite.measure(...)`: one step measured now, from a script or a notebook.

    record = perfsuite.measure(step)                       # any callable: one step
    record = perfsuite.measure(perfsuite.Step(step, items=64, unit="samples"))
    record = perfsuite.measure(my_step, params={"batch_size": 64})   # a @perfsuite.workload function
    record = perfsuite.measure("resnet", params={"depth": 18})      # a workload by name
    print(record)                                          # median, interval, spread, throughput

It takes the same road as `perfsuite run`: the case is checked, the step is built outside the
timed region, warmed up, calibrated and timed in blocks between synchronisations
(perfsuite.run.execute.run_cases). What differs is only what a script expects: the record comes
back (nothing is written unless asked), a failure raises, and the step is measured in this process
(a lambda or a notebook's function cannot be sent to a worker process).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.core import registry
from perfsuite.core.case import Case
from perfsuite.core.config import RunConfig, resolve_device
from perfsuite.core.errors import ConfigError, PerfsuiteError, Unsupported
from perfsuite.core.record import Record
from perfsuite.core.text import slug
from perfsuite.core.workload import Workload
from perfsuite.measuring.fingerprint import fingerprint
from perfsuite.run.execute import check_cases, run_cases
from perfsuite.storage.peaks import DEFAULT_PEAK_FILE, peak_for
from perfsuite.user.declare import Step, built_step


class StepFailed(PerfsuiteError):
    """The step raised while it was built or measured; `failure` holds the reason and the user's
    traceback, as a run's failure entry does."""

    def __init__(self, failure: dict) -> None:
        label = f"{failure['workload']}[{','.join(f'{k}={v}' for k, v in (failure.get('params') or {}).items())}]"
        super().__init__(
            f"{label}: {failure['error']}" + (f"\n{failure['traceback']}" if failure.get("traceback") else "")
        )
        self.failure = failure


@dataclass(frozen=True)
class _GivenStep:
    """The builder of a step given directly: the same Step each build (a callable is one step of
    one call)."""

    name: str
    step: Step = field(compare=False)

    def __call__(self, resolved: Mapping[str, Any], device: str):
        return built_step(self.name, self.step, self.step.fn)


def _workload(target: Any) -> Workload:
    if isinstance(target, str):
        return registry.get(target)
    if isinstance(target, Workload):
        return target
    if callable(target) and not isinstance(target, Step):
        for name in registry.names():  # a function declared with @perfsuite.workload
            w = registry.get(name)
            if getattr(w.builder, "fn", None) is target:
                return w
    step = target if isinstance(target, Step) else Step(target, items=1, unit="calls") if callable(target) else None
    if step is None:
        raise ConfigError(
            f"perfsuite.measure: cannot measure a {type(target).__name__}; give a callable (one step), "
            "a perfsuite.Step, a @perfsuite.workload function or a workload's name"
        )
    fn_name = getattr(step.fn, "__name__", "")
    name = slug(fn_name) if fn_name and fn_name != "<lambda>" else "step"
    return Workload(name=name, description="measured with perfsuite.measure", params=(), builder=_GivenStep(name, step))


def measure(
    target: Any,
    *,
    params: Mapping[str, Any] | None = None,
    device: str = "auto",
    max_time: float = 2.0,
    processes: int = 1,
    peak_file=DEFAULT_PEAK_FILE,
    **config: Any,
) -> Record:
    """Measure one step now and return its Record (raw samples, median and interval, throughput,
    FLOP/s and the fraction of this machine's peak when `perfsuite peak` has measured it, memory,
    environment and warnings).

    `target`: a callable (one step), a `perfsuite.Step`, a function declared with
    `@perfsuite.workload` or a workload's name; `params` picks one case of a workload (its defaults
    otherwise). `max_time` is the budget in seconds; further keywords are RunConfig's (`min_time`,
    `target_rel_ci`, `threads`, `builds`, ...). Bad input raises ConfigError before anything runs;
    a step that raises gives StepFailed with its traceback; a case this device cannot run,
    Unsupported.
    """
    workload = _workload(target)
    if processes != 1 and isinstance(workload.builder, _GivenStep):
        raise ConfigError(
            "perfsuite.measure: processes > 1 needs a workload declared in a file "
            "(@perfsuite.workload): a step given directly cannot be sent to worker processes"
        )
    try:
        cfg = RunConfig(device=device, max_time=max_time, processes=processes, **config)
    except TypeError as exc:  # an unknown keyword: name it as the configuration's
        raise ConfigError(f"perfsuite.measure: {exc}") from None
    where = resolve_device(cfg.device)
    case = Case(workload, dict(params or {}))
    env = fingerprint(device=where)
    out = run_cases(
        check_cases([case], where), cfg, env=env, peak=peak_for(peak_file, env, where) if peak_file else None
    )
    if out.interrupted:
        raise out.interrupted
    if out.unsupported:
        raise Unsupported(f"{case.label}: {out.unsupported[0][1]}")
    if out.failures:
        raise StepFailed(out.failures[0])
    return out.records[0]


__all__ = ["StepFailed", "measure"]
