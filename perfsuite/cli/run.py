"""`perfsuite run`: a workload's sweep (a suite file: perfsuite.cli.run_suite), with progress on the console."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from perfsuite.cli import options, values
from perfsuite.cli.events import RunEvents, print_process_spread
from perfsuite.cli.run_suite import run_suite_command
from perfsuite.core import registry
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.params import expand_sweep, parse_assignments
from perfsuite.measuring.fingerprint import fingerprint
from perfsuite.profiling.trace import check_trace_files
from perfsuite.report.tables import print_bounds, print_instructions, print_warnings, records_table
from perfsuite.run.execute import interrupted_exit
from perfsuite.storage.files import default_results_dir, new_results_path, writable_dir
from perfsuite.storage.folder import folder_of
from perfsuite.storage.peaks import peak_for

NAME = "run"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    run = sub.add_parser(NAME, help="measure a workload (a -p value list sweeps), or a suite file")
    run.add_argument(
        "workload", nargs="*", help="one or more workloads (`perfsuite list`); each one's -p values or default sweep"
    )
    run.add_argument("--config", type=Path, help="a suite YAML file (see `perfsuite suites`)")
    run.add_argument("--suite", help="a shipped suite by name: ci, cpu, gpu")
    run.add_argument("--retry-failed", action="store_true", help="with a suite: measure failed cases again")
    run.add_argument(
        "--no-checks",
        action="store_true",
        help="with a suite: skip the correctness checks run before timing (`perfsuite check`)",
    )
    run.add_argument(
        "--plan",
        action="store_true",
        help="with a suite: print every step of `make bench` with it (peak, checks, cases, report), "
        "its budget and estimated overhead, and the total; nothing is measured",
    )
    run.add_argument(
        "--trace",
        type=Path,
        nargs="?",
        const=Path("reports") / "traces",
        default=None,
        metavar="DIR",
        help="after measuring, write a torch.profiler trace of one step and a top-operators table "
        "(default DIR reports/traces)",
    )
    options.params(run, sweep=True)
    options.measuring(run)
    run.add_argument(
        "--processes",
        type=values.count("--processes"),
        default=None,
        metavar="N",
        help="spread each case's budget over N fresh worker processes; the median and its CI "
        "then come from the process medians (default: one per 2 s of --max-time, 2 to 5; "
        "below 4 s, this process)",
    )
    options.builds(
        run,
        None,
        "N",
        "builds of the step rotated in each measuring process; the median and its CI come "
        "from their medians (default 3; 1: one build, the interval of its samples alone)",
    )
    run.add_argument(
        "--cpus",
        type=values.cpu_list,
        default=None,
        metavar="LIST",
        help="pin the measuring process(es) to these CPUs, e.g. 0 or 0,1 or 0-3",
    )
    options.threads(
        run,
        "torch threads while measuring (torch.set_num_threads); default 1 on the CPU "
        "(as torch.utils.benchmark), torch's own on CUDA",
    )
    options.heap(
        run,
        None,
        "steady: glibc's malloc keeps freed memory, so page faults leave a CPU step's time "
        "(process-wide; recorded in each record's conditions); default: malloc as it is",
    )
    run.add_argument("--out", type=Path, help="results file to write (must not exist)")
    run.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help="directory for results when --out is not given (default results/, or .perfsuite/results "
        "where git tracks files in results/: the repository's own)",
    )
    run.add_argument(
        "--shard",
        type=values.shard,
        default=None,
        metavar="K/N",
        help="with a suite: measure only the K-th of N shards (each case in exactly one, the same "
        "one every run); the store joins the shards of one commit into one batch",
    )
    run.add_argument(
        "--tensorboard",
        type=Path,
        default=None,
        metavar="DIR",
        help="after the run, write its records as TensorBoard event files under DIR",
    )


def results_dir(args, console) -> Path:
    """--results-dir when given; else results/, or .perfsuite/results where git tracks the
    repository's own results there (perfsuite.storage.files.default_results_dir), said on the console."""
    if args.results_dir is not None:
        return args.results_dir
    folder, why = default_results_dir()
    if why:
        console.print(Text(why))
    return folder


def command(args, console, recorder) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from perfsuite.core.config import resolve_device
    from perfsuite.run.execute import Case, check_cases, run_cases

    if args.config or args.suite:
        return run_suite_command(args, console, recorder, results_dir, _check_pinning)
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
    # Several workloads: each one's cases in turn, into one results file; every -p must be a
    # parameter of each (a value meant for one is refused by name, not silently ignored).
    workloads = [registry.get(name) for name in dict.fromkeys(args.workload)]
    cases = [
        Case(workload, c)
        for workload in workloads
        for c in expand_sweep(workload.default_sweep(parse_assignments(args.param, workload.params, workload.name)))
    ]
    label = "+".join(w.name for w in workloads)
    cfg = options.run_config(args)
    device = resolve_device(cfg.device)
    _check_pinning(cfg.cpus)
    # Bad parameters stop here, before anything is measured or written; so does a case asked for
    # by name that this device cannot run (a suite skips those instead).
    checked = check_cases(cases, device).runnable()
    env = fingerprint(device=device)
    peak = peak_for(args.peak_file, env, device)
    path = args.out or new_results_path(results_dir(args, console), label)
    if args.trace is not None:  # checked before measuring, like the results file: a trace is not lost
        writable_dir(args.trace, "--trace folder")
        for case in cases:
            check_trace_files(args.trace, case.label)
    if args.tensorboard is not None:  # checked before measuring, like the results file
        from perfsuite.storage.tensorboard import prepare

        prepare(args.tensorboard)
    # The output is claimed before measuring (a clash fails now, not after) and removed when the
    # command ends with nothing in it (the same command must work again).
    with folder_of(path, "results directory") as (folder, name):
        writer = folder.results_file(name)
        console.print(
            f"{len(cases)} case(s) of {', '.join(w.name for w in workloads)} on {device}, "
            f"budget {cfg.max_time:g}s each -> {path}",
            highlight=False,
        )
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            out = run_cases(
                checked,
                cfg,
                outputs=(writer, recorder),
                env=env,
                peak=peak,
                trace_dir=args.trace,
                machine_log=args.machine_log,
                events=RunEvents(console, len(cases), progress),
            )
    if out.interrupted:
        if not writer.results_held():
            console.print("interrupted before any case finished; nothing saved", highlight=False)
        else:
            console.print(
                f"interrupted: {len(writer.records)} of {len(cases)} case(s) saved to {path}", highlight=False
            )
        return interrupted_exit(out.interrupted)
    console.print(records_table(writer.records))
    print_warnings(console, writer.records)
    print_bounds(console, writer.records)
    print_instructions(console, writer.records)
    print_process_spread(console, writer.records)
    if writer.results_held():
        console.print(f"saved {len(writer.records)} record(s) to {path}", highlight=False)
    else:  # every case skipped: the claimed file was removed, as an interrupted run's is
        console.print("no case was measured; no results file written", highlight=False)
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


def _check_pinning(cpus) -> None:
    """A CPU this process may not use is bad input, found before anything is measured or written."""
    if cpus:
        from perfsuite.measuring.system import pinned

        with pinned(cpus):
            pass
