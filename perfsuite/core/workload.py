"""The workload interface: a named, parametrised builder of one timed step.

Core types, beside the record: the runner and the registry import them from here, never from
the concrete workloads in perfsuite/workloads/.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.core.config import MAX_TIME_S, MAX_WORKERS, number_in
from perfsuite.core.errors import USER_CODE_ERRORS, ConfigError, PerfsuiteError, exception_text
from perfsuite.core.params import Param, expand_sweep, resolve
from perfsuite.core.record import Record, Work


@dataclass(frozen=True)
class BuiltStep:
    """What a workload hands the runner, built outside the timed region.

    `fn` runs one step with everything already on the device; `work` says what one step does.
    """

    fn: Callable[[], object]
    work: Work
    teardown: Callable[[], None] | None = None
    # Workload-specific measurements, read after the timed region (e.g. DataLoader start-up).
    extra: Callable[[], dict[str, Any]] | None = None
    # What variants rebuild the step from (perfsuite.variants): the model the step calls, its
    # inputs (a tuple of positionals, a dict of keywords, or one tensor), and the workload's own
    # evaluation of a model called as this one is (-> {"accuracy": ..., "predictions": [...]}).
    model: Any = None
    inputs: Any = None
    evaluate: Callable[[Any], dict[str, Any]] | None = None


Builder = Callable[[Mapping[str, Any], str], BuiltStep]
# What a workload may be called: it names files (results, logs), asv benchmarks and commands.
WORKLOAD_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
Checker = Callable[[Mapping[str, Any], str], None]
# A named correctness check: called with the device, returns a one-line detail (or None), raises
# when the step computes the wrong thing (`perfsuite check`, and before a suite measures).
Check = Callable[[str], "str | None"]
# A workload's own section of `perfsuite report`: (its records, the report's folder, options such
# as {"latency_bound_ms": ...}) -> Markdown lines, placed under the workload's table.
ReportSection = Callable[[list[Record], Any, Mapping[str, Any]], list[str]]

SIZES = ("ci", "cpu", "gpu")  # the named grids the front-ends pick from (asv: PERFSUITE_ASV_SIZE)
ASV_KEYS = {
    "processes": "worker processes per case (default 1)",
    "max_time": "seconds per case of the Track class's measured run (default 5)",
    "tracks": "extra tracks read from the record, by name (ASV_TRACKS)",
    "amp": "true: in the AMP benchmark (fp32 against bf16/fp16; a training workload)",
}
# The optional asv tracks a workload may name (each a method of perfsuite.frontends.asv.OptionalTracks).
ASV_TRACKS = ("inverse_scaling_efficiency", "comm_share", "seconds_per_bus_gb")
# Which kernels may carry an fp32 step's FLOPs (Workload.fp32_kernels).
FP32_KERNELS = ("matmul", "conv")
# What a suite's plan (`perfsuite run --suite S --plan`, perfsuite/suite/file.py) counts for the
# workload besides its budgets, in seconds: a number, or {"cpu": s, "cuda": s} per device kind.
PLAN_KEYS = {
    "build_s": "one case's build and cold first call (default 1)",
    "check_s": "its correctness checks, run before a suite measures (default 2 on CPU, 0.5 on CUDA)",
    "once_s": "once per suite, before its first case: a generated dataset, say (default 0)",
}
PLAN_KINDS = ("cpu", "cuda")
# The model a training workload offers the ddp workload (perfsuite/distributed/ddp_model.py).
DDP_KEYS = {
    "variant": "the parameter that picks the model (its values are the ddp workload's `variant`s)",
    "module": "(training set-up) -> the torch module DDP wraps (default: the set-up's model)",
    "eval_in_gradient_check": "true: the DDP gradient check runs the module in eval mode (BatchNorm "
    "normalises with each rank's own batch statistics in training mode)",
}


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
    sweep: Mapping[str, tuple[Any, ...]] | None = None
    # Where the workload was declared ("file:line"), to name both places when two share a name.
    source: str = ""

    # Which kernels carry an fp32 step's FLOPs on CUDA, so which TF32 flag sets the roof it is
    # judged against: "matmul" (cuBLAS, torch.backends.cuda.matmul.allow_tf32, off by default)
    # or "conv" (cuDNN, torch.backends.cudnn.allow_tf32, on by default); or (parameter name,
    # {its value: one of those}) where a parameter decides (a tuple, not a function: workloads
    # cross into worker processes pickled). None: undeclared (tf32 roof when either flag allows it).
    fp32_kernels: str | tuple[str, Mapping[Any, str]] | None = None

    # The most builds of the step the runner may hold at once and rotate (RunConfig.builds); 1 for
    # a step that owns something only one of may exist (ranks of a process group, a large model).
    max_builds: int | None = None

    # What the workload declares for the rest of perfsuite, so that adding one is adding its file:
    # named grids per size for the front-ends ({"ci": {param: [values]}, "gpu": ...}; a missing
    # size uses "ci", none at all the default sweep), its named correctness checks, its section of
    # the report, and its asv settings (ASV_KEYS).
    grids: Mapping[str, Mapping[str, tuple[Any, ...]]] | None = None
    checks: Mapping[str, Check] | None = None
    report: ReportSection | None = None
    asv: Mapping[str, Any] | None = None

    # A workload whose cases run in ranks of their own (perfsuite.distributed): execute.run_cases
    # calls launcher(workload, params, cfg, env=, peak=, measured=, trace_dir=) for the case's one
    # record instead of measuring in this process.
    launcher: Callable[..., Any] | None = None
    # Seconds a suite's plan counts for it besides the budgets (PLAN_KEYS).
    plan: Mapping[str, Any] | None = None
    # The model it offers the ddp workload (DDP_KEYS); a training workload only.
    ddp: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not WORKLOAD_NAME.fullmatch(self.name):
            raise ConfigError(
                f"workload name {self.name!r}: use letters, digits, '_', '-' and '.' (starting with a "
                "letter, digit or '_'; at most 100): the name becomes part of file names and commands"
            )
        by_name = {p.name: p for p in self.params}
        # The shape first: a declaration is validated whole when its file is loaded, never found
        # wrong while measuring (or as a traceback from the checks below).
        for what in ("presets", "grids", "checks", "asv", "plan", "ddp"):
            given = getattr(self, what)
            if given is not None and not isinstance(given, Mapping):
                raise ConfigError(
                    f"workload {self.name!r}: {what} must be a mapping (a dict), got {type(given).__name__}"
                )
        for what in ("presets", "grids"):
            for key, inner in (getattr(self, what) or {}).items():
                if not isinstance(inner, Mapping):
                    raise ConfigError(
                        f"workload {self.name!r}: {what}[{key!r}] must be a mapping of parameter -> "
                        f"value(s), got {type(inner).__name__}"
                    )
        self._check_keys("asv", self.asv, ASV_KEYS)
        self._check_keys("plan", self.plan, PLAN_KEYS)
        self._check_keys("ddp", self.ddp, DDP_KEYS)
        self._check_asv()
        self._check_fp32_kernels(by_name)
        if self.max_builds is not None:
            self._number("max_builds", self.max_builds, 1, MAX_WORKERS, whole=True)
        for key, value in (self.plan or {}).items():
            for kind, seconds in value.items() if isinstance(value, Mapping) else [("cpu", value)]:
                if kind not in PLAN_KINDS:
                    raise ConfigError(
                        f"workload {self.name!r}: plan[{key!r}] must be seconds >= 0, or "
                        f"{{{', '.join(f'{k!r}: s' for k in PLAN_KINDS)}}}, got {value!r}"
                    )
                self._number(f"plan[{key!r}]", seconds, 0, MAX_TIME_S)
        if self.ddp:
            named = self.ddp.get("variant")
            variant = by_name.get(named) if isinstance(named, str) else None  # (a list is unhashable)
            if variant is None or not variant.choices:
                raise ConfigError(
                    f"workload {self.name!r}: ddp['variant'] must name a parameter with choices, "
                    f"got {self.ddp.get('variant')!r}"
                )
            if self.trainer is None:
                raise ConfigError(f"workload {self.name!r}: ddp needs a trainer (the set-up DDP trains)")
            if self.ddp.get("module") is not None and not callable(self.ddp["module"]):
                raise ConfigError(f"workload {self.name!r}: ddp['module'] must be a function (set-up) -> module")
        if self.presets is not None:
            if "size" not in by_name:
                raise ConfigError(
                    f"workload {self.name!r}: presets are chosen by a parameter 'size', which it does not declare"
                )
            for size, preset in self.presets.items():
                try:
                    by_name["size"].validate(size)
                except ConfigError as exc:
                    raise ConfigError(f"workload {self.name!r}, presets: {exc}") from None
                for pname in preset:
                    if pname not in by_name:
                        raise ConfigError(
                            f"workload {self.name!r}: presets[{size!r}] names parameter {pname!r}, "
                            "which it does not declare"
                        )
        for size, grid in (self.grids or {}).items():
            if size not in SIZES:
                raise ConfigError(f"workload {self.name!r}: grids has no size {size!r}; sizes: {', '.join(SIZES)}")
            for pname, values in grid.items():
                if pname not in by_name:
                    raise ConfigError(
                        f"workload {self.name!r}: grids[{size!r}] names parameter {pname!r}, which it does not declare"
                    )
                if not isinstance(values, (list, tuple)) or not values:
                    raise ConfigError(f"workload {self.name!r}: grids[{size!r}][{pname!r}] must be a list of values")
                try:
                    for v in values:
                        by_name[pname].validate(v)
                except ConfigError as exc:
                    raise ConfigError(f"workload {self.name!r}, grids[{size!r}]: {exc}") from None

    def _number(self, what: str, value: Any, least: float, most: float, **kw: bool) -> None:
        try:
            number_in(what, value, least, most, **kw)
        except ConfigError as exc:
            raise ConfigError(f"workload {self.name!r}: {exc}") from None

    def _check_asv(self) -> None:
        asv = self.asv or {}
        if "processes" in asv:
            self._number("asv['processes']", asv["processes"], 1, MAX_WORKERS, whole=True)
        if "max_time" in asv:
            self._number("asv['max_time']", asv["max_time"], 0, MAX_TIME_S, above=True)
        if "amp" in asv and not isinstance(asv["amp"], bool):
            raise ConfigError(f"workload {self.name!r}: asv['amp'] must be true or false, got {asv['amp']!r}")
        tracks = asv.get("tracks", [])
        if not isinstance(tracks, (list, tuple)) or any(t not in ASV_TRACKS for t in tracks):
            raise ConfigError(
                f"workload {self.name!r}: asv['tracks'] must be a list of track names ({', '.join(ASV_TRACKS)}), "
                f"got {tracks!r}"
            )

    def _check_fp32_kernels(self, by_name: Mapping[str, Param]) -> None:
        kernels = self.fp32_kernels
        if kernels is None or (isinstance(kernels, str) and kernels in FP32_KERNELS):
            return
        if (
            isinstance(kernels, tuple)
            and len(kernels) == 2
            and isinstance(kernels[0], str)
            and kernels[0] in by_name
            and isinstance(kernels[1], Mapping)
            and all(k in FP32_KERNELS for k in kernels[1].values())
        ):
            return
        raise ConfigError(
            f"workload {self.name!r}: fp32_kernels must be one of {', '.join(map(repr, FP32_KERNELS))}, None, "
            f"or (a parameter's name, {{its value: one of those}}), got {repr(kernels)[:80]}"
        )

    def _check_keys(self, what: str, given: Mapping[str, Any] | None, known: Mapping[str, str]) -> None:
        unknown = sorted(set(given or {}) - set(known))
        if unknown:
            raise ConfigError(
                f"workload {self.name!r}: {what} has no key {unknown[0]!r}; known keys: "
                + ", ".join(f"{k} ({v})" for k, v in known.items())
            )

    @property
    def builtin(self) -> bool:
        """One of perfsuite's own: declared in a file of perfsuite/workloads/ (the same API and
        discovery as a user's, but not the user's code: the gate runs it beside the current core)."""
        if not self.source:
            return True
        return Path(self.source.rsplit(":", 1)[0]).resolve().parent == Path(__file__).resolve().parents[1] / "workloads"

    def grid(self, size: str = "ci") -> dict[str, list[Any]]:
        """The front-ends' parameter grid at `size`: the declared one ("ci" when that size has
        none), else the default sweep (one case of defaults when there is none)."""
        if size not in SIZES:
            raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
        if self.grids:
            chosen = self.grids.get(size, self.grids.get("ci", {}))
            return {k: list(v) for k, v in chosen.items()}
        return {k: list(v) for k, v in (self.sweep or {}).items()}

    def cases(self, size: str = "ci") -> list[dict[str, Any]]:
        """The grid's cases, last parameter varying fastest."""
        return expand_sweep(self.grid(size))

    def default_sweep(self, given: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
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

    def validate_case(self, params: Mapping[str, Any], device: str) -> None:
        """The workload's case validator (`validate=`): Unsupported or ConfigError as it raises them;
        anything else it raises (sys.exit included) is bad input from its code, a ConfigError."""
        if self.checker is not None:
            resolved = self.resolve(params)
            try:
                self.checker(resolved, device)
            except PerfsuiteError:
                raise
            except USER_CODE_ERRORS as exc:
                raise ConfigError(
                    f"workload {self.name!r}: its case validator failed: {exception_text(exc)}"[:1000]
                ) from None

    def build(self, params: Mapping[str, Any], device: str) -> BuiltStep:
        return self.builder(self.resolve(params), device)
