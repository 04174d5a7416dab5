"""Running a validated suite into an output directory, resumably.

Each entry writes `<out>/<name>.json` (kind run: a results file, rewritten after every case),
`<name>.pair.json` or `<name>.amp.json` (a versioned document, rewritten after every case, its
failed cases kept beside its results). Every kind goes through perfsuite.run.execute.run_cases. `run-config.json` holds the resolved configuration and
the suite file's hash. Started again on the same directory with the same configuration, only
missing cases are measured; failed cases are retried only with `retry_failed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.compare.amp import Amp
from perfsuite.compare.kinds import RESULTS
from perfsuite.compare.pair import Pair
from perfsuite.core import registry
from perfsuite.core.config import RunConfig, config_digest
from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.database.shards import in_shard
from perfsuite.measuring.fingerprint import fingerprint
from perfsuite.run import execute
from perfsuite.run.execute import RECORDS, Case, CheckedCases, Events
from perfsuite.storage.files import DocumentWriter, ResultsWriter, atomic_write_text, document
from perfsuite.storage.folder import ResultsFolder
from perfsuite.storage.peaks import peak_for
from perfsuite.suite.file import Suite, resolved_config


@dataclass
class SuiteOutcome:
    measured: int = 0
    skipped_done: int = 0
    skipped_failed: int = 0
    unsupported: int = 0
    failed: int = 0
    checks_failed: int = 0  # correctness checks that failed (their workloads were not timed)
    other_shards: int = 0  # cases another shard measures (run --shard K/N)


def entry_measure(e):
    """What one case of entry `e` measures: a record, a pair or a precision comparison."""
    if e.kind == "pair":
        return Pair(e.vary[0], e.vary[1][0], e.vary[1][1])
    if e.kind == "amp":
        return Amp(e.precisions[0], e.precisions[1], pairs=e.pairs, steps=e.steps)
    return RECORDS


# A suite sized to a plan (cpu.yaml: `emulated_bf16: skip`) cannot hold a bf16 case on a CPU
# that emulates bf16: it runs 10-50x slower than planned (a ResNet18 bf16 step took over a
# minute on an AVX2-only EPYC) and measures the emulation. Such a suite skips it, with this
# reason; a direct `perfsuite run` of the case still measures it.
EMULATED_BF16 = (
    "bf16 on a CPU without bf16 in hardware (no avx512_bf16/amx_bf16/bf16 flag in "
    "/proc/cpuinfo): torch emulates it, 10-50x slower than fp32; this suite skips it "
    "(emulated_bf16: skip), `perfsuite run` of the case measures it anyway"
)


def check_cases(suite: Suite, device: str) -> dict[str, CheckedCases]:
    """Every case of every entry checked before any runs, by entry name: bad parameters are errors
    naming the entry; cases the device cannot run (and, with `emulated_bf16: skip`, bf16 cases on a
    CPU that only emulates bf16) are kept with their reason (skipped, not failed)."""
    from perfsuite.measuring.fingerprint import cpu_native_bf16

    def emulated(case: Case, params: Mapping[str, Any]) -> None:
        if "bf16" in map(str, case.workload.resolve(params).values()):
            raise Unsupported(EMULATED_BF16)

    skip_bf16 = suite.skip_emulated_bf16 and device == "cpu" and cpu_native_bf16() is False
    checked = {}
    for i, e in enumerate(suite.entries):
        w = registry.get(e.workload)
        try:
            checked[e.name] = execute.check_cases(
                [Case(w, p) for p in e.cases()], device, entry_measure(e), emulated if skip_bf16 else None
            )
        except ConfigError as exc:
            raise ConfigError(f"suites[{i}].params: {exc}") from None
    return checked


class SuiteEvents:
    """What a front-end hears about a suite beyond its cases; the default hears nothing."""

    def checks_started(self, workloads: list[str]) -> None: ...

    def check_done(self, result) -> None: ...

    def refused(self, entry: str, why: str, todo: int, finished: int) -> None: ...

    def entry_started(self, entry: str, kind: str, todo: int) -> None: ...

    def case_events(self, entry: str):
        """The perfsuite.run.execute.Events of one entry's cases."""
        return Events()


def run_checks_first(suite: Suite, device: str, events: SuiteEvents, out: Path) -> tuple[dict[str, str], int]:
    """The correctness checks of the suite's workloads, before anything is timed: a number from a
    wrong step is worse than none. Written to `out/checks.json`; returns {workload: why it is
    not timed} for every workload with a failed check, and how many checks failed."""
    from perfsuite.suite.correctness import checks_for, run_checks

    names = sorted({e.workload for e in suite.entries if checks_for(e.workload)})
    if not suite.checks or not names:
        return {}, 0
    events.checks_started(names)
    results = run_checks(names, device, report=events.check_done)
    atomic_write_text(
        out / "checks.json",
        document(
            "checks",
            [
                {
                    "workload": r.workload,
                    "name": r.name,
                    "ok": r.ok,
                    "detail": r.detail,
                    "seconds": r.seconds,
                    "device": device,
                }
                for r in results
            ],
        ),
    )
    refused: dict[str, str] = {}
    for r in results:
        if not r.ok:
            refused.setdefault(r.workload, f"correctness check failed, not timed: {r.name}: {r.detail}")
    return refused, sum(not r.ok for r in results)


def run_suite(
    suite: Suite,
    out: Path,
    events: SuiteEvents | None = None,
    retry_failed: bool = False,
    peak_file: Path | None = None,
    settings: dict | None = None,
    machine_log: Path | None = None,
    store=None,
    shard: tuple[int, int] | None = None,
) -> SuiteOutcome:
    """Every entry of `suite` into `out`, each kind through perfsuite.run.execute.run_cases.
    `settings`: RunConfig fields the command line sets for every entry (cpus, threads, heap).
    `store`: the results store's recorder; `shard` (K, N): only the cases of the K-th of N shards
    (perfsuite.database.shards), the folder then holding that shard alone."""

    from perfsuite.core.config import resolve_device

    device = resolve_device(suite.device)
    checked = check_cases(suite, device)
    config = resolved_config(suite, device)
    if shard is not None:  # a folder holds one shard: resuming it as another is refused
        config = {**config, "shard": f"{shard[0]}/{shard[1]}"}
    if peak_file:  # a bad peak file is bad input: refused before the output folder exists
        from perfsuite.storage.peaks import load_peaks

        load_peaks(Path(peak_file))
    with ResultsFolder(out, lock=True, config=config) as folder:
        return _run_entries(
            suite,
            folder,
            events or SuiteEvents(),
            device,
            checked,
            config,
            retry_failed,
            peak_file,
            {k: v for k, v in (settings or {}).items() if v is not None},
            machine_log,
            store,
            shard,
        )


def _run_entries(
    suite,
    folder: ResultsFolder,
    events,
    device,
    checked: dict[str, CheckedCases],
    config,
    retry_failed,
    peak_file,
    settings,
    machine_log=None,
    store=None,
    shard=None,
) -> SuiteOutcome:
    """One loop for every kind of entry: the entry's writer (a results file for `run`, a versioned
    document for `pair` and `amp`) says which cases are done or failed before, the rest are
    measured by run_cases, and a case that fails is that case's recorded failure (exit 3)."""
    env = fingerprint(device=device)
    peak = peak_for(peak_file, env, device) if peak_file else None
    outcome = SuiteOutcome()
    refused, outcome.checks_failed = run_checks_first(suite, device, events, folder.path)
    run_info = {"suite": suite.name, "suite_sha256": suite.sha256, "config_digest": config_digest(config)}

    for e in suite.entries:
        w, entry_checked = registry.get(e.workload), checked[e.name]
        writer: ResultsWriter | DocumentWriter
        if e.kind == "run":
            writer = folder.results_file(f"{e.name}.json", resume=True)
            done = {r.case_key() for r in writer.records}
        else:
            writer = folder.document(
                f"{e.name}.{e.kind}.json", e.kind, run_info, resume=True, model=RESULTS.get(e.kind)
            )
            done = {Case(w, c).key(device) for c in writer.done_cases()}
        todo: list[int] = []
        for i, case in enumerate(entry_checked.cases):
            key = case.key(device)
            if shard is not None and not in_shard(e.name, case.params, *shard):
                outcome.other_shards += 1
            elif i in entry_checked.unsupported:
                outcome.unsupported += 1
                events.case_events(e.name).skipped(case, entry_checked.unsupported[i])
            elif key in done:
                outcome.skipped_done += 1
            elif writer.has_failure(key) and not retry_failed:
                outcome.skipped_failed += 1
            else:
                todo.append(i)
        if e.workload in refused:  # before any earlier failure is dropped: nothing is measured again
            outcome.failed += len(todo)
            events.refused(e.name, refused[e.workload], len(todo), len(done))
            continue
        for case in entry_checked.select(todo).cases:  # retried now: the earlier failure gives way
            if writer.has_failure(case.key(device)):  # to what this run finds
                writer.drop_failure(case.key(device))
        events.entry_started(e.name, e.kind, len(todo))
        cfg = RunConfig(device=device, max_time=e.max_time, processes=e.processes, **settings)
        res = execute.run_cases(
            entry_checked.select(todo),
            cfg,
            outputs=(writer, store),
            env=env,
            peak=peak,
            record_config=run_info,
            events=events.case_events(e.name),
            machine_log=machine_log,
        )
        outcome.measured += len(res.records)
        outcome.failed += len(res.failures)
        outcome.unsupported += len(res.unsupported)
        if res.interrupted:
            raise res.interrupted
    return outcome
