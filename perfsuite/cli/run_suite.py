"""`perfsuite run --suite NAME` / `--config FILE`: a suite's entries into one resumable folder."""

from __future__ import annotations

from rich.text import Text

from perfsuite.cli.events import SuiteConsoleEvents
from perfsuite.compare.kinds import RESULTS
from perfsuite.core.errors import PerfsuiteError
from perfsuite.run.execute import interrupted_exit
from perfsuite.suite.file import SAFE_NAME, load_suite, shipped_suites_dir
from perfsuite.suite.run import run_suite


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


def run_suite_command(args, console, recorder, results_dir, check_pinning) -> int:
    """The suite road of `run`: `results_dir` and `check_pinning` are run's own (perfsuite.cli.run)."""
    from datetime import datetime, timezone

    if args.config and args.suite:
        raise PerfsuiteError("give --config or --suite, not both")
    for dest, flag in SUITE_DECIDES.items():
        if getattr(args, dest) not in (None, False, []):  # [] : run named no workload
            raise PerfsuiteError(
                f"{flag} cannot be combined with --suite/--config: the suite file sets it "
                "(max_time and processes per suite or per entry); only -p, --device, --out, "
                "--retry-failed, --no-checks, --cpus, --threads, --heap, --instructions and "
                "--no-signature apply"
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
    if args.shard and recorder is not None:
        from perfsuite.database.shards import batch_of

        recorder.set_batch(batch_of(suite, args.param, recorder.run["commit"], args.shard), *args.shard)
    console.print(Text(f"suite {suite.name} ({len(suite.entries)} entries) -> {out}"))
    try:
        if args.tensorboard is not None:
            from perfsuite.storage.tensorboard import export_tensorboard, prepare

            prepare(args.tensorboard)
        from perfsuite.measuring.system import pinned

        check_pinning(args.cpus)
        if args.heap:  # process-wide: the pair and amp entries run on it too, not only the run entries
            from perfsuite.measuring import heap

            heap.apply(args.heap)
        with pinned(args.cpus, args.threads):  # the pair and amp entries too, not only the records
            res = run_suite(
                suite,
                out,
                SuiteConsoleEvents(console),
                retry_failed=args.retry_failed,
                peak_file=args.peak_file,
                machine_log=args.machine_log,
                store=recorder,
                shard=args.shard,
                settings={
                    "cpus": args.cpus,
                    "threads": args.threads,
                    "instructions": args.instructions or None,
                    "signature": False if args.no_signature else None,
                    **({"heap": args.heap} if args.heap else {}),
                },
            )
    except KeyboardInterrupt as exc:
        console.print(Text(f"interrupted: every finished case is in {out}; run the same command to resume"))
        return interrupted_exit(exc)
    if args.tensorboard is not None:
        console.print(
            Text(
                f"TensorBoard: {export_tensorboard([out], args.tensorboard, RESULTS['amp'])[0]} record(s) in {args.tensorboard}"
            )
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
