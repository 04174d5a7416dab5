"""One case to measure, and what measuring it means.

A `Case` is a workload and the parameters the user gave; a `Measure` says what one case's
measurement is (a calibrated record, an interleaved pair, a precision comparison, a gate's two
arms). They sit here, below `measuring/`, `compare/` and `run/`, because all three name them:
perfsuite.run.execute.check_cases checks cases for a Measure, and run_cases is the one loop that
measures them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from perfsuite.core.config import RunConfig
from perfsuite.core.record import case_key
from perfsuite.core.workload import Workload


@dataclass(frozen=True)
class Case:
    """One case to measure: a workload and the parameters the user gave (defaults filled later)."""

    workload: Workload
    params: Mapping[str, Any]

    @property
    def resolved(self) -> dict[str, Any]:
        return self.workload.resolve(self.params)

    def key(self, device: str) -> tuple[Any, ...]:
        return case_key(self.workload.name, self.resolved, device)

    @property
    def label(self) -> str:
        return f"{self.workload.name}[{','.join(f'{k}={v}' for k, v in self.resolved.items())}]"


class Measure:
    """What measuring one case means. `variants` are the parameter sets the case will build (each
    is checked before anything runs: a pair builds two, an amp comparison two precisions);
    `measure` returns the case's result (a Record, a PairResult, ...), raising on failure."""

    kind = "run"

    def variants(self, case: Case) -> Sequence[Mapping[str, Any]]:
        return [case.params]

    def measure(self, case: Case, cfg: RunConfig, ctx: Context) -> Any:
        raise NotImplementedError


@dataclass
class Context:
    """What a measurement may use besides its case: the environment fingerprint, the stored peak,
    the clock, a hook run after measuring (a trace), the records this run has measured so far,
    and the machine-speed log a plain run notes its reference in (perfsuite.storage.machine_drift)."""

    env: dict[str, Any] | None = None
    peak: dict[str, Any] | None = None
    clock: Any = None
    after: Callable[[object], None] | None = None
    trace_dir: Path | None = None
    measured: tuple[Any, ...] = ()
    machine_log: Path | None = None
    # With --instructions: the run's Counter (perfsuite.measuring.instructions), shared by its
    # cases, so Callgrind's start (about 45 s) is paid once a run, not once a case
    counter: Any = None


class Output(Protocol):
    """Where a road's results go as each case ends (perfsuite.run.execute.run_cases' `outputs`): a
    results file (perfsuite.storage.files.ResultsWriter, DocumentWriter) or the results store
    (perfsuite.database.recorder.Recorder). `kind` is the measurement's (Measure.kind)."""

    def add(self, result: Any, case: Case, kind: str) -> None: ...

    def add_failure(self, failure: dict[str, Any], case: Case) -> None: ...
