"""Declaring a workload in the user's own code: `@perfsuite.workload` and `perfsuite.Step`.

    @perfsuite.workload(params={"batch_size": [32, 128], "width": 256})
    def tiny_mlp(batch_size: int, width: int, device: str):
        ...build the model and the batch (outside the timed region)...
        return perfsuite.Step(step, items=batch_size, unit="samples")

A list is the parameter's default sweep (its first value the default of a single case); a
scalar is its default; `perfsuite.param(...)` adds choices and bounds. The decorated function
becomes a `Workload` in the registry. It is the one way a workload is declared: perfsuite's own
(perfsuite/workloads/*.py) use it too, with the keywords they need beyond a user's (size presets,
a case validator, a trainer, DDP model, plan estimates, a launcher), so every front-end (run,
check, pair, gate, suites, workers, asv, pytest) measures them all the same way.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.core.documents import MAX_NAME
from perfsuite.core.errors import ConfigError
from perfsuite.core.params import Param, resolve
from perfsuite.core.record import Work
from perfsuite.core.registry import register
from perfsuite.core.workload import BuiltStep, Workload

_TYPES = (bool, int, float, str)
# How a step's FLOPs were found (the record's work.flops_method): given by the user, a formula,
# torch's counter; "unknown": none to count (I/O, a collective), so the counter is not run.
FLOPS_METHODS = ("user", "analytic", "FlopCounterMode", "unknown")
# The precisions a step's FLOP/s can be judged against: the roofs `perfsuite peak` measures.
DTYPES = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class Step:
    """One step of the user's workload and what it does; built outside the timed region.

    `items` per step (samples, tokens...) in `unit`; `flops` and `bytes` per step when known
    (FLOPs are otherwise counted once at build time with torch's FlopCounterMode); `dtype` names
    the precision whose peak the FLOP/s are judged against; `teardown` runs after measuring.
    `flops_method` says how `flops` were found ("analytic" for a formula, "FlopCounterMode";
    default "user"), or, without `flops`, "unknown": a step with no FLOPs to count (I/O, a
    collective), so none are counted. `extra() -> dict`, called after the timed region, adds the
    workload's own measurements to the record's `extra` (a DataLoader's start-up, say).
    """

    fn: Callable[[], object]
    items: float
    unit: str = "items"
    flops: float | None = None
    bytes: float | None = None
    dtype: str = "fp32"
    teardown: Callable[[], None] | None = None
    extra: Callable[[], dict] | None = None
    flops_method: str | None = None
    # For variants (perfsuite.variants, `perfsuite variants`): the model `fn` calls and its inputs,
    # so that a variant can rebuild the step as model(inputs); `evaluate(model) -> metrics` scores
    # a model called as this one is on the workload's labelled data.
    model: Any = None
    inputs: Any = None
    evaluate: Callable[[Any], dict] | None = None

    def __post_init__(self) -> None:
        try:
            self._validate()
        except ConfigError as exc:
            raise ConfigError(f"{_caller()}{exc}") from None

    def _validate(self) -> None:
        if not callable(self.fn):
            raise ConfigError(f"Step: the step must be callable, got {type(self.fn).__name__}")
        for name in ("items", "flops", "bytes"):
            v = getattr(self, name)
            if v is None and name != "items":
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not _finite(v) or v <= 0:
                raise ConfigError(f"Step: {name} must be a positive number, got {v!r}")
            if v > MAX_PER_STEP:  # type: ignore[operator]  # typeshed's numbers.Real has no __gt__; a Real compares
                raise ConfigError(
                    f"Step: {name} = {str(v)[:30]} per step is beyond any step ({MAX_PER_STEP:g} at most): "
                    "its rate would overflow"
                )
        if not isinstance(self.unit, str) or not self.unit.strip() or len(self.unit) > MAX_NAME:
            shown = (
                repr(self.unit)
                if len(repr(self.unit)) <= 60
                else f"{self.unit[:40]!r}... ({len(self.unit)} characters)"
            )
            raise ConfigError(f"Step: unit must be a non-empty string of at most {MAX_NAME} characters, got {shown}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"Step: dtype must be one of {', '.join(DTYPES)}, got {str(self.dtype)[:40]!r}")
        if self.model is not None and not callable(self.model):
            raise ConfigError(f"Step: model must be callable (a torch module), got {type(self.model).__name__}")
        if (self.model is None) != (self.inputs is None):
            raise ConfigError("Step: model and inputs go together (variants call model(inputs)); give both or neither")
        if self.evaluate is not None and self.model is None:
            raise ConfigError("Step: evaluate scores a model: give model= and inputs= with it")
        for name in ("teardown", "extra", "evaluate"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise ConfigError(f"Step: {name} must be callable, got {type(getattr(self, name)).__name__}")
        if self.flops_method is not None and self.flops_method not in FLOPS_METHODS:
            raise ConfigError(
                f"Step: flops_method must be one of {', '.join(FLOPS_METHODS)}, got {self.flops_method!r}"
            )
        if self.flops is not None and self.flops_method == "unknown":
            raise ConfigError("Step: flops given with flops_method 'unknown'")
        if self.flops is None and self.flops_method not in (None, "unknown"):
            raise ConfigError(
                f"Step: flops_method {self.flops_method!r} without flops (give flops=, or "
                "flops_method='unknown' for a step with none to count)"
            )


# More items, FLOPs or bytes than this in one step is a mistake (1e308 overflows the rate to inf):
# the largest training steps are ~1e19 FLOPs.
MAX_PER_STEP = 1e24


def _finite(v: numbers.Real) -> bool:
    try:
        return math.isfinite(v)
    except OverflowError:  # an int beyond any float (10**400): finite, and refused as too large below
        return True


def _caller() -> str:
    """ "file:line: " of the user's code that built the Step (the first frame outside perfsuite)."""
    ours = str(Path(__file__).resolve().parents[1])
    frame = inspect.currentframe()
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(ours) and not name.startswith("<"):
            return f"{name}:{frame.f_lineno}: "
        frame = frame.f_back
    return ""


def param(
    default: Any,
    *,
    choices: tuple | list | None = None,
    min: float | None = None,
    max: float | None = None,
    help: str = "",
    type: type | None = None,
) -> ParamSpec:
    """A parameter with choices or bounds: `params={"n": perfsuite.param([256, 1024], min=1)}`.

    `type` (bool, int, float or str) is needed for a default of None: a value the workload's
    `size` preset fills in when the case leaves it unset (`presets=` on the decorator)."""
    if choices is not None and (isinstance(choices, (str, bytes)) or not isinstance(choices, (list, tuple))):
        raise ConfigError(f"perfsuite.param: choices must be a list or tuple of values, got {choices!r}")
    for name, bound in (("min", min), ("max", max)):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))):
            raise ConfigError(f"perfsuite.param: {name} must be a number, got {bound!r}")
    if not isinstance(help, str):
        raise ConfigError(f"perfsuite.param: help must be text, got {help!r}")
    return ParamSpec(default, tuple(choices) if choices is not None else None, min, max, help, type)


@dataclass(frozen=True)
class ParamSpec:
    default: Any
    choices: tuple | None = None
    min: float | None = None
    max: float | None = None
    help: str = ""
    type: type | None = None


def _param(workload: str, name: str, spec: Any) -> tuple[Param, tuple | None]:
    """The declared parameter and its default sweep (None for a single default)."""
    if not isinstance(spec, ParamSpec):
        spec = ParamSpec(spec)
    values = list(spec.default) if isinstance(spec.default, (list, tuple)) else [spec.default]
    if not values:
        raise ConfigError(f"workload {workload!r}, parameter {name!r}: an empty list has no default")
    if spec.type is not None and spec.type not in _TYPES:
        raise ConfigError(
            f"workload {workload!r}, parameter {name!r}: type {spec.type!r} is not bool, int, float or str"
        )
    if values == [None]:  # a value the size preset gives: its type is declared, not seen
        if spec.type is None:
            raise ConfigError(
                f"workload {workload!r}, parameter {name!r}: a default of None needs perfsuite.param(None, type=...)"
            )
        kind = spec.type
    else:
        kind = spec.type or type(values[0])
        if kind not in _TYPES or any(type(v) is not kind and not (kind is float and type(v) is int) for v in values):
            raise ConfigError(
                f"workload {workload!r}, parameter {name!r}: default {spec.default!r} is not "
                "a bool, int, float or str (or a list of one of them)"
            )
    try:
        p = Param(name, kind, values[0], choices=spec.choices, min=spec.min, max=spec.max, help=spec.help)
        for v in values[1:]:
            p.validate(v)
    except ConfigError as exc:
        raise ConfigError(f"workload {workload!r}: {exc}") from None
    return p, (tuple(values) if len(values) > 1 else None)


def built_step(workload: str, made: Any, fn: Callable) -> BuiltStep:
    """What `fn`, the builder of `workload`, returned (a perfsuite.Step) as the runner takes it;
    FLOPs counted here, at build time, when the Step does not give them."""
    if isinstance(made, BuiltStep):
        return made
    if not isinstance(made, Step):
        raise ConfigError(
            f"workload {workload!r}: {fn.__qualname__} must return perfsuite.Step(...), got {type(made).__name__}"
        )
    method: str | None
    flops, method = made.flops, made.flops_method or "user"
    if method == "unknown":  # declared to have none: nothing to count
        return BuiltStep(
            fn=made.fn,
            teardown=made.teardown,
            extra=made.extra,
            work=Work(items_per_step=made.items, item_unit=made.unit, bytes_per_step=made.bytes, dtype=made.dtype),
            model=made.model,
            inputs=made.inputs,
            evaluate=made.evaluate,
        )
    if flops is None:
        # Counted once, here at build time and outside any timed region, by running one step
        # under torch's FLOP counter (matmuls, convolutions, attention; elementwise ops count 0).
        from perfsuite.measuring.flops import count_flops

        try:
            flops, method = count_flops(made.fn), "FlopCounterMode"
        except Exception:  # noqa: BLE001 - an op the counter cannot follow: no FLOP/s, still a measurement
            flops, method = None, None
    return BuiltStep(
        fn=made.fn,
        teardown=made.teardown,
        extra=made.extra,
        work=Work(
            items_per_step=made.items,
            item_unit=made.unit,
            flops_per_step=flops or None,
            flops_method=method if flops else None,
            bytes_per_step=made.bytes,
            dtype=made.dtype,
        ),
        model=made.model,
        inputs=made.inputs,
        evaluate=made.evaluate,
    )


@dataclass(frozen=True)
class _Builder:
    """The registered builder of a declared function. (Objects, not closures: a workload crosses
    into worker processes pickled, which works wherever its module can be imported by name.)"""

    name: str
    fn: Callable

    def __call__(self, resolved: Mapping[str, Any], device: str) -> BuiltStep:
        return built_step(self.name, self.fn(**resolved, device=device), self.fn)


@dataclass(frozen=True)
class _CaseCall:
    """`validate=` and `trainer=`: called as the builder is, `fn(**params, device=device)`, where
    perfsuite calls a workload's hooks with (resolved params, device)."""

    fn: Callable

    def __call__(self, resolved: Mapping[str, Any], device: str) -> Any:
        return self.fn(**resolved, device=device)


@dataclass(frozen=True)
class _DefaultCaseCheck:
    """`checks=` given one function: called with the default case's parameters and the device."""

    name: str
    specs: tuple
    check: Callable

    def __call__(self, device: str) -> str:
        resolved = resolve(self.specs, {}, self.name)
        self.check(**resolved, device=device)
        return f"passed ({', '.join(f'{k}={v}' for k, v in resolved.items())})"


def workload(
    fn: Callable | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    name: str | None = None,
    description: str | None = None,
    checks: Callable[..., Any] | Mapping[str, Callable[[str], Any]] | None = None,
    grids: Mapping[str, Mapping[str, Any]] | None = None,
    report: Callable[..., list] | None = None,
    asv: Mapping[str, Any] | None = None,
    presets: Mapping[str, Mapping[str, Any]] | None = None,
    validate: Callable[..., None] | None = None,
    trainer: Callable[..., Any] | None = None,
    fp32_kernels: str | tuple | None = None,
    max_builds: int | None = None,
    plan: Mapping[str, Any] | None = None,
    ddp: Mapping[str, Any] | None = None,
    launcher: Callable[..., Any] | None = None,
    **unknown: Any,
):
    """Register the decorated builder `fn(**params, device) -> perfsuite.Step` as a workload.

    Its name is the function's (or `name=`), its description the docstring's first line (or
    `description=`). `checks`, the workload's correctness checks, run by `perfsuite check` and
    before a suite measures: a function called as `checks(**params, device=device)` at the default
    case, or several by name, {name: fn(device)}, each returning a one-line detail (or None); a
    check raises (an AssertionError, say) when the step computes the wrong thing.

    `grids`: named grids for the front-ends, `{"ci": {"batch_size": [32, 128]}, "gpu": {...}}`
    (asv picks one with PERFSUITE_ASV_SIZE; a missing size uses "ci"; default: the default
    sweep). `report(records, out_dir, options) -> [markdown lines]`: the workload's own section of
    `perfsuite report`. `asv`: {"processes": N, "max_time": S, "tracks": [...], "amp": bool}
    (perfsuite.core.workload.ASV_KEYS).

    What perfsuite's own workloads use besides (perfsuite/workloads/*.py), open to any workload:

    - `presets`: {size: {param: value}}, the values a `size` parameter's preset gives to
      parameters declared with a default of None (`perfsuite.param(None, type=int)`) and left unset;
    - `validate`: called as `validate(**params, device=device)` for every case before any is
      measured; raises perfsuite.core.errors.Unsupported when this device cannot run the case (a
      skip with its reason; asv skips it too), ConfigError for values that do not go together;
    - `trainer`: `trainer(**params, device=device) -> perfsuite.training.setup.TrainingSetup`, the
      parts the timed training step is made of (the AMP comparison, profile-step and the training
      checks build from it);
    - `ddp`: the model a training workload offers the ddp workload: {"variant": the parameter that
      picks it, "module": set-up -> the module DDP wraps, "eval_in_gradient_check": bool}
      (perfsuite.core.workload.DDP_KEYS);
    - `plan`: seconds a suite's `--plan` counts besides the budgets, {"build_s": ..., "check_s":
      ..., "once_s": ...}, each a number or {"cpu": s, "cuda": s} (PLAN_KEYS);
    - `fp32_kernels`: "matmul" or "conv" (or (param, {value: kind})): which TF32 flag sets the
      fp32 roof on CUDA; `max_builds`: the most builds of the step held at once (1: one only);
    - `launcher`: runs a case elsewhere and returns its record (perfsuite.distributed.ddp_workloads:
      the ranks of a torchrun launch).
    """

    if unknown:  # a typo, or a keyword of an older perfsuite: named, not a TypeError's traceback
        renamed = {"check": "checks= (one function of the default case, or several by name)"}
        said = [f"{k}= (now {renamed[k]})" if k in renamed else f"{k}=" for k in sorted(unknown)]
        raise ConfigError(f"@perfsuite.workload: unknown keyword {', '.join(said)}")

    def wrap(fn: Callable) -> Callable:
        wname = fn.__name__ if name is None else name  # name="" is refused (Workload), not the function's
        sig = inspect.signature(fn)
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        for what, given in (
            ("checks", None if callable(checks) else checks),
            ("grids", grids),
            ("asv", asv),
            ("params", params),
            ("presets", presets),
            ("plan", plan),
            ("ddp", ddp),
        ):
            if given is not None and not isinstance(given, Mapping):
                raise ConfigError(f"workload {wname!r}: {what} must be a mapping (a dict), got {type(given).__name__}")
        if description is not None and not isinstance(description, str):
            raise ConfigError(f"workload {wname!r}: description must be a string, got {type(description).__name__}")
        declared = dict(params or {})
        if "device" in declared:
            raise ConfigError(f"workload {wname!r}: 'device' is passed in by perfsuite, not a parameter")
        for pname in list(declared) + ["device"]:
            if pname not in sig.parameters and not accepts_any:
                raise ConfigError(f"workload {wname!r}: {fn.__qualname__} does not accept parameter {pname!r}")
        missing = [
            p.name
            for p in sig.parameters.values()
            if p.name not in declared
            and p.name != "device"
            and p.default is p.empty
            and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]
        if missing:
            raise ConfigError(
                f"workload {wname!r}: parameter {missing[0]!r} of {fn.__qualname__} has no "
                "declared value (add it to params=)"
            )
        specs, sweep = [], {}
        for pname, spec in declared.items():
            p, values = _param(wname, pname, spec)
            specs.append(p)
            if values:
                sweep[pname] = values

        named: dict[str, Callable[[str], Any]]
        if callable(checks):  # one check, of the default case
            named = {"its own check at the default case": _DefaultCaseCheck(wname, tuple(specs), checks)}
        else:
            named = dict(checks or {})
        for cname, cfn in named.items():
            if not callable(cfn):
                raise ConfigError(f"workload {wname!r}: check {cname!r} is not callable")
        for what, hook, shape in (
            ("report", report, "(records, out_dir, options) -> lines"),
            ("validate", validate, "(**params, device) -> None"),
            ("trainer", trainer, "(**params, device) -> TrainingSetup"),
            ("launcher", launcher, "(workload, params, cfg, **where) -> Record"),
        ):
            if hook is not None and not callable(hook):
                raise ConfigError(f"workload {wname!r}: {what} must be a function {shape}")
        source = inspect.getsourcefile(fn) or "?"
        line = inspect.getsourcelines(fn)[1] if source != "?" else 0
        doc = description or inspect.getdoc(fn) or ""
        register(
            Workload(
                name=wname,
                description=doc.strip().splitlines()[0] if doc else "",
                params=tuple(specs),
                builder=_Builder(wname, fn),
                sweep=sweep or None,
                source=f"{source}:{line}",
                checks=named or None,
                grids=grids,
                report=report,
                asv=dict(asv) if asv else None,
                presets=presets,
                checker=_CaseCall(validate) if validate is not None else None,
                trainer=_CaseCall(trainer) if trainer is not None else None,
                fp32_kernels=fp32_kernels,
                max_builds=max_builds,
                plan=dict(plan) if plan else None,
                ddp=dict(ddp) if ddp else None,
                launcher=launcher,
            )
        )
        return fn

    return wrap(fn) if fn is not None else wrap
