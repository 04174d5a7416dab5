"""The one place that runs cases: check -> build -> measure -> record -> failure capture -> write.

Every measured result comes through `run_cases`: `perfsuite run` (a workload's sweep or a suite's
entries of every kind), `pair`, `amp`, `peak`, the gate's arms, the asv classes and the
pytest-benchmark front-end. What differs between them is only *what* one case measures — a
`Measure`: `Records` (the default: one calibrated record), `compare.pair.Pair`,
`compare.amp.Amp`, `compare.gate_sides.GateArms` — so a case is judged the same way whichever road it
took:
- every case is checked before any is measured: a bad parameter is bad input (ConfigError,
  nothing measured), a case this device cannot run is skipped with its reason;
- a case that fails while building or measuring (out of memory, a crash in the step, a
  checkpoint that does not load) is recorded as a failure with its reason, and the rest go on:
  one case never ends a run (bad input found only while measuring — a ConfigError, such as a
  gate side that imports an installed copy of the project — ends it, with exit 2: every case
  would meet it; what is finished is already written);
- each finished case is written before the next starts, so Ctrl-C loses nothing finished.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfsuite.core.case import Case, Context, Measure, Output
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import (
    USER_CODE_ERRORS,
    ConfigError,
    PerfsuiteError,
    StorageError,
    Unsupported,
    exception_text,
)
from perfsuite.core.record import Record
from perfsuite.measuring import runner
from perfsuite.profiling.trace import trace_step

__all__ = [
    "RECORDS",
    "Case",
    "Context",
    "Events",
    "Measure",
    "Outcome",
    "Output",
    "Records",
    "CheckedCases",
    "check_cases",
    "failure_entry",
    "run_cases",
]


class Records(Measure):
    """The plain road: one calibrated record per case, in this process, in worker processes
    (`cfg.workers` > 1: by default one per 2 s of budget) or in ranks under torchrun (a distributed
    workload's `launcher`)."""

    def measure(self, case: Case, cfg: RunConfig, ctx: Context) -> Record:
        record = self._measure(case, cfg, ctx)
        if cfg.instructions:  # after measuring, in a counting child: never inside the timing
            record = replace(record, instructions=_instructions(case, cfg, ctx.counter))
        if ctx.machine_log is not None:  # the drift between this machine's runs, into the interval
            from perfsuite.storage.machine_drift import note_run

            record = note_run(record, ctx.machine_log)
        return record

    def _measure(self, case: Case, cfg: RunConfig, ctx: Context) -> Record:
        launcher = getattr(case.workload, "launcher", None)
        if launcher is not None:  # distributed: ranks under torchrun, one record (perfsuite.distributed)
            return launcher(
                case.workload,
                dict(case.params),
                cfg,
                env=ctx.env,
                peak=ctx.peak,
                measured=ctx.measured,
                trace_dir=ctx.trace_dir,
            )
        if cfg.workers > 1:  # the budget spread over fresh worker processes, merged into one record
            from perfsuite.measuring.workers import run_in_workers

            return run_in_workers(case.workload, dict(case.params), cfg, env=ctx.env, peak=ctx.peak, clock=ctx.clock)

        return runner.time_case(
            case.workload, dict(case.params), cfg, env=ctx.env, peak=ctx.peak, after=ctx.after, clock=ctx.clock
        )


RECORDS = Records()


def _instructions(case: Case, cfg: RunConfig, counter: Any = None) -> dict[str, Any]:
    """The record's instruction count: the case rebuilt by name in a counting child (on the hardware
    counter, or under Callgrind: perfsuite.measuring.instructions)."""
    from perfsuite.core import registry
    from perfsuite.core.discover import loaded_paths
    from perfsuite.core.errors import PerfsuiteError
    from perfsuite.measuring import instructions

    try:
        found = registry.get(case.workload.name) is case.workload
    except PerfsuiteError:
        found = False
    if not found:
        return {
            "status": "unavailable",
            "method": instructions.method(),
            "reason": "a step given directly (not a declared workload) cannot be rebuilt in the counting child",
        }
    return instructions.count(case.workload.name, dict(case.params), cfg.device, load=loaded_paths(), counter=counter)


class Events:
    """What a front-end hears about a run; the default hears nothing. `done` receives the case's
    result: a Record on the plain road, the measurement's own result type otherwise."""

    def start(self, case: Case) -> None: ...

    def done(self, case: Case, record: Any) -> None: ...

    def failed(self, case: Case, failure: dict) -> None: ...

    def skipped(self, case: Case, reason: str) -> None: ...

    def traced(self, case: Case, trace: Path, table: Path) -> None: ...


@dataclass
class Outcome:
    records: list[Any] = field(default_factory=list)  # Records, or the measurement's own results
    failures: list[dict] = field(default_factory=list)
    unsupported: list[tuple[Case, str]] = field(default_factory=list)
    # Ctrl-C (KeyboardInterrupt), or SIGTERM/SIGHUP as perfsuite.cli.stop raises them; None: not.
    interrupted: KeyboardInterrupt | None = None

    def only(self, unsupported: Callable[[str], Exception], failed: Callable[[str], Exception]) -> Any:
        """The result of a run of one case, for callers that need it or nothing (peak, why): Ctrl-C
        goes on up; a skip or a failure becomes the caller's error, made from its reason."""
        if self.interrupted:
            raise self.interrupted
        if self.unsupported:
            raise unsupported(self.unsupported[0][1])
        if self.failures:
            raise failed(self.failures[0]["error"])
        return self.records[0]


@dataclass(frozen=True)
class CheckedCases:
    """Cases checked for one device and one way of measuring: what `run_cases` measures. Made only
    by `check_cases`, the one check of what is about to be measured, so a command that checks early
    (before claiming its output file) hands the same checks to the loop instead of repeating them."""

    cases: tuple[Case, ...]
    device: str
    measure: Measure
    unsupported: Mapping[int, str]  # index into cases -> why this device cannot run it

    def runnable(self) -> CheckedCases:
        """For a command that measures exactly what it was asked to: a case this device cannot run
        is an error (Unsupported, naming the case) before anything is claimed or measured."""
        for i, reason in self.unsupported.items():
            raise Unsupported(f"{self.cases[i].label}: {reason}")
        return self

    def select(self, indices: Sequence[int]) -> CheckedCases:
        """The cases at `indices` (a suite's cases not yet done), with their checks."""
        return CheckedCases(
            tuple(self.cases[i] for i in indices),
            self.device,
            self.measure,
            {j: self.unsupported[i] for j, i in enumerate(indices) if i in self.unsupported},
        )


def check_cases(
    cases: Sequence[Case],
    device: str,
    measure: Measure = RECORDS,
    also: Callable[[Case, Mapping[str, Any]], None] | None = None,
) -> CheckedCases:
    """Every case validated before any runs: the one check of what is about to be measured. Bad
    parameters raise ConfigError (naming the parameter); cases the device cannot run are kept with
    their reason (skipped when measured). `also(case, params)`: a caller's own rule (a suite's
    emulated bf16), raising Unsupported like the workload's own check."""
    unsupported = {}
    for i, case in enumerate(cases):
        try:
            for params in measure.variants(case):
                case.workload.validate_case(params, device)
                if also is not None:
                    also(case, params)
        except Unsupported as exc:
            unsupported[i] = str(exc)
    return CheckedCases(tuple(cases), device, measure, unsupported)


def failure_entry(case: Case, device: str, exc: BaseException) -> dict:
    """What is kept of a case that failed: which case, what kind of failure, the message and
    where it was raised (the last frame of the traceback)."""
    from datetime import datetime, timezone

    text = exception_text(exc).strip()
    oom = type(exc).__name__ == "OutOfMemoryError" or "out of memory" in text.lower()
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else None
    return {
        "workload": case.workload.name,
        "params": case.resolved,
        "device": device,
        "kind": "oom" if oom else "error",
        "error": text.splitlines()[0][:500] if text else type(exc).__name__,
        "where": where,
        # The traceback from the first frame outside perfsuite on: for a user workload that is
        # their own code, which they need to see to fix it (perfsuite's frames above it are noise).
        "traceback": "".join(traceback.format_list(_from_user_code(frames)))[-4000:] or None,
        "created": datetime.now(timezone.utc).isoformat(),
    }


def _from_user_code(frames: list) -> list:
    ours = str(Path(__file__).resolve().parents[1])  # the perfsuite package
    for i, f in enumerate(frames):
        if not str(Path(f.filename).resolve()).startswith(ours) and "importlib" not in f.filename:
            return frames[i:]
    return frames[-3:]


def _release_device_memory(device: str) -> None:
    """After a failed case (an OOM above all) the next case starts from an empty cache."""
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def run_cases(
    checked: CheckedCases,
    cfg: RunConfig,
    *,
    outputs: Sequence[Output | None] = (),
    env: dict | None = None,
    peak: dict | None = None,
    events: Events | None = None,
    trace_dir: Path | None = None,
    record_config: Mapping[str, Any] | None = None,
    clock=None,
    machine_log: Path | None = None,
) -> Outcome:
    """Measure the checked cases one after another on their device (already resolved), each as
    their `measure` says (`check_cases` made them: bad input has raised; what the device cannot run
    is skipped here).

        for each case:
            result = measure.measure(case)          # or its failure, with the user's traceback
            each output .add(result) / .add_failure(failure), before the next case starts
        return the Outcome (records, failures, skipped, interrupted)

    `outputs` (None entries ignored) are where results go as each case ends: a results file
    (perfsuite.storage.files.ResultsWriter, DocumentWriter) and the results store
    (perfsuite.database.recorder.Recorder). `record_config` is merged into each record's `config` (a
    suite's name and digest). Ctrl-C stops the run and returns with `interrupted` set: everything
    finished is kept. `machine_log`: the machine-speed log (perfsuite.storage.machine_drift) that
    plain records note their reference in and learn the drift between runs from.
    """
    cases, device, measure, unsupported = checked.cases, checked.device, checked.measure, checked.unsupported
    sinks = [o for o in outputs if o is not None]
    kind = getattr(measure, "kind", "results")
    events = events or Events()
    cfg = replace(cfg, device=device)
    if trace_dir is not None and cfg.processes is None:
        cfg = replace(cfg, processes=1)  # a trace needs the step in this process: no automatic workers
    if cfg.workers > 1 and trace_dir is not None:
        raise ConfigError("--trace needs the step in this process; it cannot be combined with --processes > 1")
    out = Outcome()
    counter = _counter(cfg)
    try:
        for i, case in enumerate(cases):
            if i in unsupported:
                out.unsupported.append((case, unsupported[i]))
                events.skipped(case, unsupported[i])
                continue
            events.start(case)
            ctx = Context(
                env=env,
                peak=peak,
                clock=clock,
                trace_dir=trace_dir,
                measured=tuple(out.records),
                machine_log=machine_log,
                after=_tracer(case, trace_dir, device, events) if trace_dir is not None else None,
                counter=counter,
            )
            try:
                result = measure.measure(case, cfg, ctx)
            except Unsupported as exc:  # found out only while building (e.g. a missing package)
                out.unsupported.append((case, str(exc)))
                events.skipped(case, str(exc))
                continue
            except ConfigError:  # bad input (the environment, a path): every case would meet it; what
                raise  # is finished is already with the writer
            except USER_CODE_ERRORS as exc:  # any failure of one case (sys.exit in its step too) is
                # that case's, not the run's
                failure = failure_entry(case, device, exc)
                del exc  # the traceback holds the step's tensors: let them go before the next case
                _release_device_memory(device)
                out.failures.append(failure)
                _deliver(sinks, functools.partial(_give_failure, failure, case))
                events.failed(case, failure)
                continue
            if record_config and isinstance(result, Record):
                result = replace(result, config={**result.config, **record_config})
            out.records.append(result)
            _deliver(sinks, functools.partial(_give, result, case, kind))
            events.done(case, result)
    except KeyboardInterrupt as exc:
        out.interrupted = exc
    finally:
        if counter is not None:  # its server stopped and the count folder freed, however the run ended
            counter.close(at_once=out.interrupted is not None or sys.exc_info()[0] is not None)
    return out


def _counter(cfg: RunConfig) -> Any:
    """The run's instruction Counter where its cases are counted (it starts nothing until the first
    count), else None."""
    if not cfg.instructions:
        return None
    from perfsuite.measuring import instructions

    return instructions.Counter()


def _deliver(sinks: Sequence[Output], give: Callable[[Output], None]) -> None:
    """Every output gets the result, also when one of them cannot take it: a results file whose
    disk filled during the run lost the record the store would have kept (issue 51, item 3).
    The first output's error stops the run after the others have it, naming where it is kept."""
    failed: list[tuple[Output, PerfsuiteError]] = []
    for o in sinks:
        try:
            give(o)
        except PerfsuiteError as exc:  # a file that cannot be written, a store that cannot be used
            failed.append((o, exc))
    if failed:
        kept = [w for o in sinks if all(o is not f for f, _ in failed) and (w := _where(o)) is not None]
        first = failed[0][1]
        if not kept:
            raise first
        raise StorageError(f"{first}; what was measured is kept in {' and '.join(kept)}") from first


def _give(result: Any, case: Case, kind: str, output: Output) -> None:
    output.add(result, case, kind)


def _give_failure(failure: dict[str, Any], case: Case, output: Output) -> None:
    output.add_failure(failure, case)


def _where(output: Output) -> str | None:
    """Where `output` kept the last result; None where it kept it nowhere (a store whose spool
    failed too says so in its own notes)."""
    if hasattr(output, "kept_in"):  # the results store's recorder: the store, its spool, or neither
        kept: str | None = output.kept_in
        return kept
    path = getattr(output, "path", None)
    return str(path) if path is not None else type(output).__name__


def interrupted_exit(exc: BaseException | None) -> int:
    """The exit status of a command that was interrupted: 130 for Ctrl-C, 128 + the signal's number
    when SIGTERM or SIGHUP stopped it (perfsuite.cli.stop.Stopped carries it)."""
    return int(getattr(exc, "exit_code", 130))


def _tracer(case: Case, trace_dir: Path, device: str, events: Events) -> Callable[[object], None]:
    """After measuring, a torch.profiler trace of the same built step (`run --trace`)."""

    def after(built) -> None:
        events.traced(case, *trace_step(built.fn, trace_dir, case.label, device))

    return after
