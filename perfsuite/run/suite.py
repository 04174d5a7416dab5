"""Running a validated suite into an output directory, resumably.

Each entry writes `<out>/<name>.json` (kind run: a results file, rewritten after every case),
`<name>.pair.json` or `<name>.amp.json`. `run-config.json` holds the resolved configuration and
the suite file's hash. Started again on the same directory with the same configuration, only
missing cases are measured; failed cases are retried only with `retry_failed`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text

from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.core.record import case_key
from perfsuite.run.suite_file import Suite, config_digest, resolved_config


@dataclass
class SuiteOutcome:
    measured: int = 0
    skipped_done: int = 0
    skipped_failed: int = 0
    unsupported: int = 0
    failed: int = 0
    checks_failed: int = 0  # correctness checks that failed (their workloads were not timed)


def prepare_output(out: Path, config: dict) -> None:
    """Create `out`, refuse an unwritable one, and refuse to mix two configurations in one."""
    from perfsuite.core import documents
    from perfsuite.core.errors import RecordError
    from perfsuite.storage.files import atomic_write_text, versioned, writable_dir
    from perfsuite.storage.read import read_json

    writable_dir(out, "output directory")

    cfg_path = out / "run-config.json"
    digest = config_digest(config)
    if os.path.lexists(cfg_path):
        try:
            old = read_json(cfg_path)
            documents.version_of(old, "run-config", str(cfg_path))  # version 0 (no key) or 1
            documents.validate("run-config", old, str(cfg_path))
        except RecordError as exc:
            raise ConfigError(f"{exc}; use another output directory") from None
        if old.get("digest") != digest:
            raise ConfigError(f"output directory {out} holds a run of a different configuration "
                              f"(suite {old.get('suite')!r}, sha256 {str(old.get('sha256'))[:12]}); "
                              "resume with the same file and parameters, or choose another --out")
        return
    # The version keys stay outside the digest: a folder written before they existed resumes.
    atomic_write_text(cfg_path, versioned("run-config", {**config, "digest": digest}))


def check_cases(suite: Suite, device: str) -> dict[tuple, str]:
    """Every case checked before any runs: missing paths are errors naming the entry; cases the
    device cannot run are returned with their reason (they will be skipped, not failed)."""
    from perfsuite.core import registry

    unsupported = {}
    for i, e in enumerate(suite.entries):
        w = registry.get(e.workload)
        variants = [{e.vary[0]: v} for v in e.vary[1]] if e.vary else [{}]
        precisions = [{"precision": p} for p in e.precisions] if e.kind == "amp" else [{}]
        for case in e.cases():
            for extra in variants + precisions:
                full = {**case, **extra}
                try:
                    w.check(full, device)
                except Unsupported as exc:
                    unsupported[case_key(w.name, w.resolve(case), device) + (e.name,)] = str(exc)
                except ConfigError as exc:
                    raise ConfigError(f"suites[{i}].params: {exc}") from None
    return unsupported


def lock_output(out: Path):
    """Hold `out` for this run: a second run into the same folder would measure every case again
    and race on its files, so it fails at once. The lock is an flock on `out/.lock`, which the
    kernel releases whenever this process ends, however it ends: no stale locks."""
    import fcntl

    from perfsuite.storage.write import open_lock

    fd = open_lock(out / ".lock")  # a planted symlink is refused, never followed
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(f"output directory {out} is in use by another perfsuite run; "
                          "wait for it or choose another --out") from None
    return fd


def run_checks_first(suite: Suite, device: str, console: Console, out: Path) -> tuple[dict[str, str], int]:
    """The correctness checks of the suite's workloads, before anything is timed: a number from a
    wrong step is worse than none. Written to `out/checks.json`; returns {workload: why it is
    not timed} for every workload with a failed check, and how many checks failed."""
    from perfsuite.run.checks import checks_for, run_checks
    from perfsuite.storage.files import atomic_write_text, document

    names = sorted({e.workload for e in suite.entries if checks_for(e.workload)})
    if not suite.checks or not names:
        return {}, 0
    console.print(Text(f"correctness checks before timing ({', '.join(names)}; `checks: false` in the suite "
                       "or --no-checks skips them)"), highlight=False)

    def show(res) -> None:
        console.print(Text(res.line(), style="" if res.ok else "bold red"), highlight=False)

    results = run_checks(names, device, report=show)
    atomic_write_text(out / "checks.json", document("checks", [
        {"workload": r.workload, "name": r.name, "ok": r.ok, "detail": r.detail, "seconds": r.seconds,
         "device": device} for r in results]))
    refused: dict[str, str] = {}
    for r in results:
        if not r.ok:
            refused.setdefault(r.workload, f"correctness check failed, not timed: {r.name}: {r.detail}")
    return refused, sum(not r.ok for r in results)


def run_suite(suite: Suite, out: Path, console: Console, retry_failed: bool = False,
              peak_file: Path | None = None, events=None, settings: dict | None = None) -> SuiteOutcome:
    """`settings`: RunConfig fields the command line sets for every run entry (cpus, threads)."""
    import os

    from perfsuite.core.config import resolve_device

    device = resolve_device(suite.device)
    unsupported = check_cases(suite, device)
    config = resolved_config(suite, device)
    if peak_file:  # a bad peak file is bad input: refused before the output folder exists
        from perfsuite.run.peak import load_peaks

        load_peaks(Path(peak_file))
    prepare_output(out, config)
    lock = lock_output(out)
    try:
        return _run_entries(suite, out, console, device, unsupported, config, retry_failed, peak_file, events,
                            {k: v for k, v in (settings or {}).items() if v is not None})
    finally:
        os.close(lock)


def _run_entries(suite, out, console, device, unsupported, config, retry_failed, peak_file, events,
                 settings) -> SuiteOutcome:
    from perfsuite.core import registry
    from perfsuite.core.config import RunConfig
    from perfsuite.measure.env import fingerprint
    from perfsuite.run.execute import Case, run_cases
    from perfsuite.measure.timing import clock_for
    from perfsuite.compare.pair import pair
    from perfsuite.run.peak import peak_for
    from perfsuite.storage.files import ResultsWriter, atomic_write_text, document
    from perfsuite.compare.amp import compare_precisions

    env = fingerprint(device=device)
    peak = peak_for(peak_file, env, device) if peak_file else None
    outcome = SuiteOutcome()
    refused, outcome.checks_failed = run_checks_first(suite, device, console, out)
    run_info = {"suite": suite.name, "suite_sha256": suite.sha256, "config_digest": config_digest(config)}

    for e in suite.entries:
        w = registry.get(e.workload)
        cases = e.cases()
        if e.kind == "run":
            writer = ResultsWriter.resume(out / f"{e.name}.json")
            done = {r.case_key() for r in writer.records}
            todo = []
            for case in cases:
                key = case_key(w.name, w.resolve(case), device)
                if key + (e.name,) in unsupported:
                    outcome.unsupported += 1
                    console.print(Text(f"skip {e.name} {case}: {unsupported[key + (e.name,)]}", style="yellow"))
                elif key in done:
                    outcome.skipped_done += 1
                elif writer.has_failure(key) and not retry_failed:
                    outcome.skipped_failed += 1
                else:
                    if writer.has_failure(key):
                        writer.drop_failure(key)
                    todo.append(Case(w, case))
            if e.workload in refused:
                _refuse(console, e, refused[e.workload], len(todo), len(done), outcome)
                continue
            cfg = RunConfig(device=device, max_time=e.max_time, processes=e.processes, **settings)
            res = run_cases(todo, cfg, device, writer=writer, env=env,
                            peak=peak, record_config=run_info, events=events or _EntryEvents(console, e.name))
            outcome.measured += len(res.records)
            outcome.failed += len(res.failures)
            outcome.unsupported += len(res.unsupported)
            if res.interrupted:
                raise KeyboardInterrupt
            continue
        path = out / f"{e.name}.{e.kind}.json"
        results = _resume_entry(path, e.kind)
        done = {json.dumps(r.get("case"), sort_keys=True) for r in results}
        clock = clock_for(device, "host")
        if e.workload in refused:
            skip = sum(case_key(w.name, w.resolve(c), device) + (e.name,) in unsupported for c in cases)
            finished = sum(json.dumps(dict(c), sort_keys=True) in done for c in cases)
            outcome.unsupported += skip
            outcome.skipped_done += finished
            _refuse(console, e, refused[e.workload], len(cases) - skip - finished, finished, outcome)
            continue
        for case in cases:
            if case_key(w.name, w.resolve(case), device) + (e.name,) in unsupported:
                outcome.unsupported += 1
                continue
            if json.dumps(dict(case), sort_keys=True) in done:
                outcome.skipped_done += 1
                continue
            console.print(Text(f"{e.name}: {e.kind} {w.name} {case}"), highlight=False)
            if e.kind == "pair":
                r = pair(w, case, e.vary[0], e.vary[1][0], e.vary[1][1], device, clock, e.max_time)
            else:
                r = compare_precisions(w.name, case, device, clock_for(device), e.precisions[0], e.precisions[1],
                                       pairs=e.pairs, steps=e.steps)
            results.append({**r.to_dict(), "case": dict(case), **run_info})
            outcome.measured += 1
            # Saved after every case: Ctrl-C in the middle of an entry keeps its finished cases.
            atomic_write_text(path, document(e.kind, results))
    return outcome


def _refuse(console: Console, e, why: str, todo: int, finished: int, outcome: SuiteOutcome) -> None:
    """An entry whose workload failed a correctness check: its cases are not timed."""
    outcome.failed += todo
    console.print(Text(f"skip {e.name} ({todo} case(s)): {why}", style="bold red"), highlight=False)
    if finished:
        console.print(Text(f"warning {e.name}: {finished} case(s) in this folder were measured before its "
                           "check failed; they stay, but the step they timed may be wrong", style="yellow"),
                      highlight=False)


def _resume_entry(path: Path, kind: str) -> list[dict]:
    """The finished cases of a pair/amp entry from an earlier, interrupted run of the same suite."""
    from perfsuite.core.errors import RecordError
    from perfsuite.storage.files import load_document

    if not path.exists():
        return []
    try:
        return list(load_document(path, kind))
    except RecordError as exc:
        raise ConfigError(f"{exc}; remove it to measure its entry again") from None


class _EntryEvents:
    def __init__(self, console: Console, entry: str) -> None:
        self.console, self.entry = console, entry

    def start(self, case) -> None:
        self.console.print(Text(f"{self.entry}: {case.label}"), highlight=False)

    def done(self, case, record) -> None:
        from perfsuite.measure.workers import describe

        if line := describe(record):  # a case measured in worker processes: its between-process spread
            self.console.print(Text(f"{self.entry}: {line}"), highlight=False)

    def failed(self, case, failure) -> None:
        self.console.print(Text(f"failed {self.entry} {case.label}: {failure['error']}", style="red"))

    def skipped(self, case, reason) -> None:
        self.console.print(Text(f"skip {self.entry} {case.label}: {reason}", style="yellow"))

    def traced(self, case, trace, table) -> None:
        pass
