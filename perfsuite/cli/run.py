"""`perfsuite run`: a workload's sweep or a suite, with progress on the console."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from perfsuite.cli.parser import DEFAULT_RESULTS_DIR
from perfsuite.core import registry
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.params import expand_sweep, parse_assignments
from perfsuite.core.record import Record
from perfsuite.measuring.env import fingerprint
from perfsuite.measuring.workers import describe
from perfsuite.profiling.trace import check_trace_files
from perfsuite.report.console import print_bounds, print_warnings, records_table
from perfsuite.run.execute import Events, interrupted_exit
from perfsuite.storage.files import ResultsWriter, new_results_path, writable_dir
from perfsuite.storage.peaks import peak_for
from perfsuite.suite.file import SAFE_NAME, load_suite, shipped_suites_dir
from perfsuite.suite.run import SuiteEvents, run_suite


def _run_config(args):
    given = {
        "max_time": args.max_time,
        "min_time": args.min_time,
        "target_rel_ci": args.target_ci,
        "timing": args.timing,
        "processes": getattr(args, "processes", None),
        "builds": getattr(args, "builds", None),
        "cpus": getattr(args, "cpus", None),
        "threads": getattr(args, "threads", None),
        "heap": getattr(args, "heap", None),
    }
    # Options left out take RunConfig's defaults (they default to None so a suite run can refuse them).
    return RunConfig(device=args.device, nvtx=not args.no_nvtx, **{k: v for k, v in given.items() if v is not None})


class ConsoleEvents(Events):
    """Prints what happens to each case of a run; a progress bar for sweeps."""

    def __init__(self, console, total: int, progress=None) -> None:
        self.console, self.total, self.progress = console, total, progress
        self.task = progress.add_task("", total=total) if progress is not None else None

    def _advance(self) -> None:
        if self.progress is not None:
            self.progress.advance(self.task)

    def start(self, case) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=case.label)
        else:
            self.console.print(Text(case.label))

    def done(self, case, record) -> None:
        self._advance()

    def failed(self, case, failure) -> None:
        self.console.print(Text(f"failed: {case.label}: {failure['error']}", style="red"))
        self._advance()

    def skipped(self, case, reason) -> None:
        self.console.print(Text(f"skipped: {case.label}: {reason}", style="yellow"))
        self._advance()

    def traced(self, case, trace, table) -> None:
        self.console.print(Text(f"trace: {trace}  top operators: {table}"))


class ConsoleSuiteEvents(SuiteEvents):
    """Prints a suite's progress: its correctness checks, each entry's cases, what was refused."""

    def __init__(self, console) -> None:
        self.console = console

    def checks_started(self, workloads: list[str]) -> None:
        self.console.print(
            Text(
                f"correctness checks before timing ({', '.join(workloads)}; `checks: false` in the "
                "suite or --no-checks skips them)"
            ),
            highlight=False,
        )

    def check_done(self, result) -> None:
        self.console.print(Text(result.line(), style="" if result.ok else "bold red"), highlight=False)

    def refused(self, entry: str, why: str, todo: int, finished: int) -> None:
        self.console.print(Text(f"skip {entry} ({todo} case(s)): {why}", style="bold red"), highlight=False)
        if finished:
            self.console.print(
                Text(
                    f"warning {entry}: {finished} case(s) in this folder were measured before its "
                    "check failed; they stay, but the step they timed may be wrong",
                    style="yellow",
                ),
                highlight=False,
            )

    def entry_started(self, entry: str, kind: str, todo: int) -> None:
        pass

    def case_events(self, entry: str):
        return _EntryEvents(self.console, entry)


class _EntryEvents(Events):
    """One suite entry's cases, each line prefixed with the entry's name."""

    def __init__(self, console, entry: str) -> None:
        self.console, self.entry = console, entry

    def start(self, case) -> None:
        self.console.print(Text(f"{self.entry}: {case.label}"), highlight=False)

    def done(self, case, result) -> None:
        if isinstance(result, Record):
            line = describe(result)  # a case measured in worker processes: its between-process spread
        else:
            line = _comparison_line(result)
        if line:
            self.console.print(Text(f"{self.entry}: {line}"), highlight=False)

    def failed(self, case, failure) -> None:
        self.console.print(Text(f"failed {self.entry} {case.label}: {failure['error']}", style="red"))

    def skipped(self, case, reason) -> None:
        self.console.print(Text(f"skip {self.entry} {case.label}: {reason}", style="yellow"))

    def traced(self, case, trace, table) -> None:
        pass


def _comparison_line(result) -> str | None:
    """One line for a pair or a precision comparison."""
    if hasattr(result, "time_ratio"):
        ci = result.time_ratio_ci
        ci_txt = "" if ci is None else f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})"
        saved = (
            ""
            if result.saved_ratio is None
            else f"; saved for backward {result.a}/{result.b} = {result.saved_ratio:.2f}"
        )
        return f"time {result.a}/{result.b} = {result.time_ratio:.3f}{ci_txt} over {len(result.ratios)} pairs{saved}"
    if hasattr(result, "verdict"):
        return result.verdict()
    return None


# Where results go when the repository keeps its own results in results/ (issue 50).
PRIVATE_RESULTS_DIR = Path(".perfsuite") / "results"
_PLACEHOLDERS = (".gitkeep", ".gitignore", "README.md")


def results_dir(args, console) -> Path:
    """--results-dir when given; else results/, unless git tracks files there other than a
    placeholder: that is the repository's own results folder (issue 50: `run` wrote its JSON among
    a user's tracked results), so perfsuite's go to .perfsuite/results, and the console says so."""
    if args.results_dir is not None:
        return args.results_dir
    import subprocess

    try:
        res = subprocess.run(
            ["git", "ls-files", "-z", "--", str(DEFAULT_RESULTS_DIR)], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return DEFAULT_RESULTS_DIR
    tracked = [f for f in res.stdout.split("\0") if f and Path(f).name not in _PLACEHOLDERS]
    if res.returncode != 0 or not tracked:
        return DEFAULT_RESULTS_DIR
    console.print(
        Text(
            f"{DEFAULT_RESULTS_DIR}/ holds {len(tracked)} file(s) tracked by git, this repository's own: "
            f"perfsuite's results go to {PRIVATE_RESULTS_DIR} (--results-dir to choose)"
        )
    )
    return PRIVATE_RESULTS_DIR


def cmd_run(args, console) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from perfsuite.core.config import resolve_device
    from perfsuite.run.execute import Case, run_cases, runnable

    if args.config or args.suite:
        return _run_suite(args, console)
    if args.no_checks or args.retry_failed or args.plan or args.shard:
        flag = (
            "--no-checks"
            if args.no_checks
            else "--retry-failed"
            if args.retry_failed
            else "--plan"
            if args.plan
            else "--shard"
        )
        raise PerfsuiteError(f"{flag} applies to a suite run (--suite or --config)")
    if not args.workload:
        raise PerfsuiteError("name a workload (`perfsuite list`), or give --config FILE.yaml or --suite NAME")
    workload = registry.get(args.workload)
    cases = [
        Case(workload, c)
        for c in expand_sweep(workload.default_sweep(parse_assignments(args.param, workload.params, workload.name)))
    ]
    cfg = _run_config(args)
    device = resolve_device(cfg.device)
    _check_pinning(cfg.cpus)
    # Bad parameters stop here, before anything is measured or written; so does a case asked for
    # by name that this device cannot run (a suite skips those instead).
    runnable(cases, device)
    env = fingerprint(device=device)
    peak = peak_for(args.peak_file, env, device)
    path = args.out or new_results_path(results_dir(args, console), workload.name)
    if args.trace is not None:  # checked before measuring, like the results file: a trace is not lost
        writable_dir(args.trace, "--trace folder")
        for case in cases:
            check_trace_files(args.trace, case.label)
    if args.tensorboard is not None:  # checked before measuring, like the results file
        from perfsuite.storage.tensorboard import prepare

        prepare(args.tensorboard)
    writer = ResultsWriter(path)  # the output is claimed before measuring: a clash fails now, not after
    console.print(
        f"{len(cases)} case(s) of {workload.name} on {device}, budget {cfg.max_time:g}s each -> {path}", highlight=False
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        try:
            out = run_cases(
                cases,
                cfg,
                device,
                outputs=(writer, args.recorder),
                env=env,
                peak=peak,
                trace_dir=args.trace,
                machine_log=args.machine_log,
                events=ConsoleEvents(console, len(cases), progress),
            )
        except BaseException:
            if not writer.records and not writer.failures:
                path.unlink(missing_ok=True)  # our own empty claim: the same command must work again
            raise
    if out.interrupted:
        if not writer.records and not writer.failures:
            path.unlink(missing_ok=True)  # our own empty claim: leave nothing to trip the next run
            console.print("interrupted before any case finished; nothing saved", highlight=False)
        else:
            console.print(
                f"interrupted: {len(writer.records)} of {len(cases)} case(s) saved to {path}", highlight=False
            )
        return interrupted_exit(out.interrupted)
    console.print(records_table(writer.records))
    print_warnings(console, writer.records)
    print_bounds(console, writer.records)
    _print_process_spread(console, writer.records)
    console.print(f"saved {len(writer.records)} record(s) to {path}", highlight=False)
    if args.tensorboard is not None:
        from perfsuite.storage.tensorboard import export_records

        console.print(
            f"TensorBoard: {export_records(writer.records, args.tensorboard)} record(s) in {args.tensorboard}",
            highlight=False,
        )
    if writer.failures:
        console.print(Text(f"{len(writer.failures)} case(s) failed; their reasons are in {path}", style="red"))
        return 3
    return 0


def _print_process_spread(console, records) -> None:
    """With --processes: how much of each case's spread is between processes."""
    for rec in records:
        if line := describe(rec):
            console.print(Text(line))
        if drift := rec.conditions.get("machine_drift"):
            console.print(
                Text(
                    f"{rec.label()}: the interval includes ±{drift['half_width']:.1%}, how far this "
                    f"machine's speed moved over its last {drift['runs']} runs of this case "
                    f"({drift['hours']:.1f} h; machine-speed log)"
                )
            )


def _check_pinning(cpus) -> None:
    """A CPU this process may not use is bad input, found before anything is measured or written."""
    if cpus:
        from perfsuite.measuring.system import pinned

        with pinned(cpus):
            pass


def _overrides(items: list[str]) -> dict[str, str]:
    """-p values for a suite, as typed: each entry's own workload parses them (perfsuite.suite.file)."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise PerfsuiteError(f"-p expects key=value, got {item!r}")
        if key in out:
            raise PerfsuiteError(f"-p {key} is given twice; give one list instead (-p {key}=A,B)")
        out[key] = raw
    return out


SUITE_DECIDES = {
    "workload": "a workload",
    "max_time": "--max-time",
    "min_time": "--min-time",
    "target_ci": "--target-ci",
    "timing": "--timing",
    "no_nvtx": "--no-nvtx",
    "trace": "--trace",
    "processes": "--processes",
    "builds": "--builds",
}


def _run_suite(args, console) -> int:
    from datetime import datetime, timezone

    if args.config and args.suite:
        raise PerfsuiteError("give --config or --suite, not both")
    for dest, flag in SUITE_DECIDES.items():
        if getattr(args, dest) not in (None, False):
            raise PerfsuiteError(
                f"{flag} cannot be combined with --suite/--config: the suite file sets it "
                "(max_time and processes per suite or per entry); only -p, --device, --out, "
                "--retry-failed, --no-checks, --cpus, --threads and --heap apply"
            )

    # A suite *name* names a shipped suite; `--suite ../../x` must not run a file from anywhere.
    if args.suite is not None and not SAFE_NAME.fullmatch(args.suite):
        raise PerfsuiteError(
            f"--suite {args.suite!r}: a suite name is a plain name (`perfsuite suites` lists "
            "them); give a suite file's path with --config"
        )
    path = args.config or shipped_suites_dir() / f"{args.suite}.yaml"
    if args.suite and not path.is_file():
        names = sorted(p.stem for p in shipped_suites_dir().glob("*.yaml"))
        raise PerfsuiteError(f"--suite {args.suite}: no such suite; shipped: {', '.join(names)}")
    suite = load_suite(path, _overrides(args.param), device=args.device if args.device != "auto" else None)
    if args.no_checks:
        from dataclasses import replace

        suite = replace(suite, checks=False)
    if args.plan:  # before any output folder, lock or device: a plan runs on any machine
        from perfsuite.suite.file import format_plan, plan_suite

        console.print(Text(format_plan(suite, *plan_suite(suite))), highlight=False)
        return 0
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or suite.output or results_dir(args, console) / f"{suite.name}-{stamp}"
    if args.shard and args.recorder is not None:
        from perfsuite.store.shards import batch_of

        args.recorder.set_batch(batch_of(suite, args.param, args.recorder.run["commit"], args.shard), *args.shard)
    console.print(Text(f"suite {suite.name} ({len(suite.entries)} entries) -> {out}"))
    try:
        if args.tensorboard is not None:
            from perfsuite.storage.tensorboard import export_tensorboard, prepare

            prepare(args.tensorboard)
        from perfsuite.measuring.system import pinned

        _check_pinning(args.cpus)
        if args.heap:  # process-wide: the pair and amp entries run on it too, not only the run entries
            from perfsuite.measuring import heap

            heap.apply(args.heap)
        with pinned(args.cpus, args.threads):  # the pair and amp entries too, not only the records
            res = run_suite(
                suite,
                out,
                ConsoleSuiteEvents(console),
                retry_failed=args.retry_failed,
                peak_file=args.peak_file,
                machine_log=args.machine_log,
                store=args.recorder,
                shard=args.shard,
                settings={"cpus": args.cpus, "threads": args.threads, **({"heap": args.heap} if args.heap else {})},
            )
    except KeyboardInterrupt as exc:
        console.print(Text(f"interrupted: every finished case is in {out}; run the same command to resume"))
        return interrupted_exit(exc)
    if args.tensorboard is not None:
        console.print(
            Text(f"TensorBoard: {export_tensorboard([out], args.tensorboard)[0]} record(s) in {args.tensorboard}")
        )
    console.print(
        Text(
            f"measured {res.measured}, skipped {res.skipped_done} already measured, "
            f"{res.skipped_failed} failed before (--retry-failed to retry), "
            f"{res.unsupported} unsupported here, {res.failed} failed now"
            + (f", {res.other_shards} in other shards" if res.other_shards else "")
            + (
                f" ({res.checks_failed} correctness check(s) failed: their workloads were not timed)"
                if res.checks_failed
                else ""
            )
        )
    )
    return 3 if res.failed or res.checks_failed else 0
