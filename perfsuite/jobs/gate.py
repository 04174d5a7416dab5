"""`gate`: each case of a workload at a base revision against the working tree, in rounds of fresh
side processes, Benjamini-Hochberg across the cases; and the gate's two other jobs: learning each
case's noise floor (`learn_floors`), and its self-check against an injected slowdown
(`self_check`). `perfsuite gate` and perfsuite.gate are these calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.compare import gate_sides
from perfsuite.compare import paired_gate as g
from perfsuite.compare.settings import GateSettings
from perfsuite.core.case import Case
from perfsuite.core.config import RunConfig
from perfsuite.core.discover import workload_named
from perfsuite.jobs.listener import WARNING, Listener
from perfsuite.measuring import heap
from perfsuite.measuring.system import pinned
from perfsuite.run.execute import Events, Outcome, check_cases, run_cases
from perfsuite.storage.files import document, load_document
from perfsuite.storage.folder import Reserved

DEFAULT_FLOORS = Path(".perfsuite") / "noise-floors.json"


@dataclass
class GateRun:
    """A gate's outcome (`records`: one GateVerdict per case gated, `failures`: cases whose side
    failed, `interrupted`), the settings it ran under, and a line saying how it was measured."""

    outcome: Outcome
    settings: GateSettings
    how: str


def _prepared(workload: str, device: str, settings: GateSettings | None, default_builds: int):
    from perfsuite.core.config import resolve_device

    w = workload_named(workload)
    device = resolve_device(device)
    return w, device, (settings or GateSettings(builds=default_builds)).on(device)


def how_measured(s: GateSettings, in_process: bool) -> str:
    return (
        f"{s.max_time:g}s per case, {s.builds} "
        + ("build(s)" if in_process else "process(es)")
        + " per side, "
        + (f"{s.threads} torch thread(s)" if s.threads else "torch's own threads")
        + (f", heap {heap.state()['heap']}" if in_process else f", heap {s.heap} in each side process")
    )


def gate(
    workload: str,
    base: str = "HEAD",
    *,
    cases: Sequence[Mapping[str, Any]] | None = None,
    device: str = "auto",
    settings: GateSettings | None = None,
    floors: Path = DEFAULT_FLOORS,
    workloads_from: str = "tree",
    events: Events | None = None,
    progress=None,
    commit: str | None = None,
) -> GateRun:
    """Gate each of `cases` (parameter dicts; default: the workload's defaults) at `base` against
    the working tree, or `commit` against its first parent; the learned noise floors in `floors`
    are used when the file exists."""
    w, device, s = _prepared(workload, device, settings, g.ROUND_BUILDS)
    learned = load_document(floors, "noise-floors") if floors.exists() else {}
    with pinned(None, s.threads):
        out = gate_sides.gate_sides(w, list(cases or [{}]), base, device, learned, s,
                                    workloads_from=workloads_from, events=events, progress=progress,
                                    commit=commit)  # fmt: skip
    return GateRun(out, s, how_measured(s, in_process=False))


def learn_floors(
    workload: str,
    runs: int,
    *,
    cases: Sequence[Mapping[str, Any]] | None = None,
    device: str = "auto",
    settings: GateSettings | None = None,
    floors: Path = DEFAULT_FLOORS,
    events: Events | None = None,
) -> tuple[Outcome, dict]:
    """Each case's noise floor from `runs` runs of the working tree against itself, added to
    `floors` (checked writable before measuring). Returns the outcome and every floor kept."""
    w, device, s = _prepared(workload, device, settings, g.BUILDS)
    kept = load_document(floors, "noise-floors") if floors.exists() else {}
    floors_out = Reserved(floors, "--floors", replace=True)
    heard = _Heard(events)
    with pinned(None, s.threads):
        floor = gate_sides.NoiseFloor(runs, s.builds, s.heap, s.threads)
        out = run_cases(check_cases([Case(w, c) for c in cases or [{}]], device, floor),
                        RunConfig(device=device, max_time=s.max_time / 3), events=heard)  # fmt: skip
    kept.update(heard.results)
    floors_out.write(document("noise-floors", kept))
    return out, kept


def self_check(
    workload: str,
    fraction: float,
    trials: int = 10,
    *,
    cases: Sequence[Mapping[str, Any]] | None = None,
    device: str = "auto",
    settings: GateSettings | None = None,
    events: Events | None = None,
    recorder=None,
    listener: Listener | None = None,
) -> GateRun:
    """The gate's power against the working tree slowed by `fraction` and its false alarms on the
    unchanged code, `trials` times each, both arms in this process (which holds the heap the
    settings ask for; the listener hears, before the trials, when it could not)."""
    from perfsuite.core.errors import ConfigError
    from perfsuite.measuring.timing import clock_for

    if not 0 < fraction < 1 or trials < 1:
        raise ConfigError("--slowdown must be in (0, 1) and --trials >= 1")
    w, device, s = _prepared(workload, device, settings, g.BUILDS)
    held = heap.apply(s.heap)
    if s.heap == "steady" and held["heap"] != "steady":
        (listener or Listener()).say(
            f"--heap steady: not held ({held['reason']}); page faults stay in the pairs", WARNING
        )
    clock = clock_for(device, "host")  # host-inclusive: both versions pay the same sync
    heard = _Heard(events, lambda res: res.update(threads=s.threads, heap=heap.state()))
    with pinned(None, s.threads):
        trial = g.SelfCheck(fraction, trials, s.threshold, s.builds, clock)
        out = run_cases(check_cases([Case(w, c) for c in cases or [{}]], device, trial),
                        RunConfig(device=device, max_time=s.max_time), events=heard, outputs=(recorder,))  # fmt: skip
    return GateRun(out, s, how_measured(s, in_process=True))


class _Heard(Events):
    """The caller's events, with each case's result kept by its label (and `amend`ed first)."""

    def __init__(self, events: Events | None, amend=None) -> None:
        self.events, self.amend = events, amend
        self.results: dict[str, Any] = {}

    def start(self, case) -> None:
        if self.events is not None:
            self.events.start(case)

    def done(self, case, result) -> None:
        if self.amend is not None:
            self.amend(result)
        self.results[case.label] = result
        if self.events is not None:
            self.events.done(case, result)

    def failed(self, case, failure) -> None:
        if self.events is not None:
            self.events.failed(case, failure)

    def skipped(self, case, reason) -> None:
        if self.events is not None:
            self.events.skipped(case, reason)

    def traced(self, case, trace, table) -> None:
        if self.events is not None:
            self.events.traced(case, trace, table)
