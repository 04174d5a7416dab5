"""Command-line interface: argument parsing and dispatch only.

Exit status, one meaning each: 0 success; 1 a confirmed slowdown (`compare`, `gate`) and nothing
else; 2 bad input or environment (the message names the file, field or parameter); 3 some cases
failed (their reasons are stored; `amp` whose precisions disagree); 4 an internal error (a bug:
the message names a log file with the traceback); 130 interrupted (every case finished before
Ctrl-C is on disk).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from perfsuite.errors import PerfsuiteError

DEFAULT_RESULTS_DIR = Path("results")
DEFAULT_PEAK_FILE = Path.home() / ".cache" / "perfsuite" / "peak.json"


def _positive_float(name: str):
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} expects a number of seconds, got {text!r}") from None
        if not v > 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be a positive number, got {text!r}")
        return v

    return parse


def _count(name: str):
    def parse(text: str) -> int:
        if not text.strip().isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{name} expects a whole number >= 1, got {text!r}")
        return int(text)

    return parse


def _cpu_list(text: str) -> tuple[int, ...]:
    from perfsuite.system import parse_cpus

    try:
        return parse_cpus(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--cpus: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="perfsuite", description="Benchmark deep-learning workloads.")
    p.add_argument("--peak-file", type=Path, default=DEFAULT_PEAK_FILE,
                   help=f"where machine peaks are stored (default {DEFAULT_PEAK_FILE})")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("list", help="workloads with their parameters, defaults and allowed values")
    sub.add_parser("env", help="print this machine's environment fingerprint (JSON)")
    sy = sub.add_parser("system", help="what could disturb measurements here: governor, turbo, load, steal, "
                                       "busy processes, threads, affinity")
    sy.add_argument("--window", type=_positive_float("--window"), default=1.0,
                    help="seconds to watch steal and other processes (default 1)")
    sy.add_argument("--json", action="store_true", help="readings and warnings as JSON")

    def measuring(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
        sp.add_argument("--max-time", type=_positive_float("--max-time"), default=None,
                        help="time budget per case in seconds, warm-up included (default 10)")
        sp.add_argument("--min-time", type=float, default=None,
                        help="measure at least this long even once converged (default 0)")
        sp.add_argument("--target-ci", type=_positive_float("--target-ci"), default=None,
                        help="stop when the median's 95%% CI is within this fraction (default 0.01)")
        sp.add_argument("--timing", choices=("event", "host"), default=None,
                        help="CUDA only: device time from events, or host-inclusive sync + wall clock")
        sp.add_argument("--no-nvtx", action="store_true", help="do not emit NVTX ranges")

    run = sub.add_parser("run", help="measure a workload (a -p value list sweeps), or a suite file")
    run.add_argument("workload", nargs="?")
    run.add_argument("--config", type=Path, help="a suite YAML file (see `perfsuite suites`)")
    run.add_argument("--suite", help="a shipped suite by name: ci, cpu, gpu")
    run.add_argument("--retry-failed", action="store_true", help="with a suite: measure failed cases again")
    run.add_argument("--no-checks", action="store_true",
                     help="with a suite: skip the correctness checks run before timing (`perfsuite check`)")
    run.add_argument("--trace", type=Path, nargs="?", const=Path("reports") / "traces", default=None, metavar="DIR",
                     help="after measuring, write a torch.profiler trace of one step and a top-operators table "
                          "(default DIR reports/traces)")
    run.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE[,VALUE...]")
    measuring(run)
    run.add_argument("--processes", type=_count("--processes"), default=None, metavar="N",
                     help="spread each case's budget over N fresh worker processes; the median and its CI "
                          "then come from the process medians (default 1: measure in this process)")
    run.add_argument("--cpus", type=_cpu_list, default=None, metavar="LIST",
                     help="pin the measuring process(es) to these CPUs, e.g. 0 or 0,1 or 0-3")
    run.add_argument("--threads", type=_count("--threads"), default=None, metavar="N",
                     help="torch threads while measuring (torch.set_num_threads); default: torch's own")
    run.add_argument("--heap", choices=("default", "steady"), default=None,
                     help="steady: glibc's malloc keeps freed memory, so page faults leave a CPU step's time "
                          "(process-wide; recorded in each record's conditions); default: malloc as it is")
    run.add_argument("--out", type=Path, help="results file to write (must not exist)")
    run.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR,
                     help="directory for results when --out is not given (default results/)")
    run.add_argument("--tensorboard", type=Path, default=None, metavar="DIR",
                     help="after the run, write its records as TensorBoard event files under DIR")

    sub.add_parser("suites", help="the suite files shipped with perfsuite")

    peak = sub.add_parser("peak", help="measure and store this device's matmul FLOP/s and bandwidth")
    measuring(peak)

    cmp = sub.add_parser("compare", help="compare two results files case by case")
    cmp.add_argument("base", type=Path)
    cmp.add_argument("new", type=Path)
    cmp.add_argument("--threshold", type=_positive_float("--threshold"), default=0.05,
                     help="slowdown that fails the comparison, as a fraction (default 0.05)")
    cmp.add_argument("--alpha", type=_positive_float("--alpha"), default=0.01,
                     help="significance level of the test (default 0.01)")
    cmp.add_argument("--allow-env-mismatch", action="store_true",
                     help="compare records measured in different environments")
    cmp.add_argument("--json", action="store_true", help="print the comparison as JSON")

    amp = sub.add_parser("amp", help="two precisions of a training workload, interleaved: speed-up, memory, loss")
    amp.add_argument("workload", choices=("resnet", "autoencoder"))
    amp.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    amp.add_argument("--device", default="auto")
    amp.add_argument("--precisions", default="fp32,bf16", help="A,B (default fp32,bf16)")
    amp.add_argument("--pairs", type=int, default=20, help="interleaved A/B block pairs (default 20)")
    amp.add_argument("--steps", type=int, default=30, help="training steps of the loss check (default 30)")
    amp.add_argument("--loss-tol", type=_positive_float("--loss-tol"), default=0.05,
                     help="allowed relative difference of the final losses (default 0.05)")
    amp.add_argument("--out", type=Path, help="write the comparison as JSON (must not exist)")

    gate = sub.add_parser("gate", help="interleave a workload at a base revision and now; fail on a confirmed slowdown")
    gate.add_argument("workload")
    gate.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE[,VALUE...]")
    gate.add_argument("--base-ref", default="HEAD", help="git revision of the baseline workload code (default HEAD)")
    gate.add_argument("--device", default="auto")
    # One name for the time a case may take, as on `run`: --max-time (--budget still accepted).
    gate.add_argument("--max-time", "--budget", dest="budget", metavar="SECONDS", type=_positive_float("--max-time"),
                      default=15.0,
                      help="seconds per case (default 15)")
    gate.add_argument("--threshold", type=float, default=0.01,
                      help="smallest slowdown that counts, as a fraction (default 0.01: two builds of the same "
                           "code can differ by about 1%% through memory placement alone)")
    gate.add_argument("--fdr", type=_positive_float("--fdr"), default=0.01,
                      help="false alarms per unchanged case, held across the sequential looks and, by "
                           "Benjamini-Hochberg, across cases (default 0.01)")
    gate.add_argument("--threads", type=_count("--threads"), default=None, metavar="N",
                      help="torch threads while gating (default torch's own; 1 on a CPU machine that "
                           "others load: it avoids multi-thread barrier stalls)")
    gate.add_argument("--builds", type=int, default=3, metavar="K",
                      help="builds of each side the pairs rotate through, averaging out placement (default 3)")
    gate.add_argument("--heap", choices=("steady", "default"), default="steady",
                      help="steady (default): glibc's malloc keeps freed memory, and the builds run until no "
                           "page faults before the budget (cuts the pair noise ~4x on CPU); default: leave "
                           "malloc as it is")
    gate.add_argument("--floors", type=Path, default=Path(".perfsuite") / "noise-floors.json",
                      help="noise floors per case, learned with --learn-floor")
    gate.add_argument("--learn-floor", type=int, default=0, metavar="RUNS",
                      help="instead of gating, learn each case's noise floor from RUNS runs of the current code")
    gate.add_argument("--slowdown", type=float, default=None,
                      help="self-check: gate current code against itself slowed by this fraction, --trials times")
    gate.add_argument("--trials", type=int, default=10)
    gate.add_argument("--json", type=Path, help="write the verdicts as JSON (must not exist)")

    pr = sub.add_parser("pair", help="two values of one parameter, interleaved: time ratio with CI, saved-memory ratio")
    pr.add_argument("workload")
    pr.add_argument("--vary", required=True, metavar="KEY=A,B", help="e.g. impl=custom,builtin")
    pr.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE[,VALUE...]")
    pr.add_argument("--device", default="auto")
    pr.add_argument("--max-time", "--budget", dest="budget", metavar="SECONDS", type=_positive_float("--max-time"),
                    default=5.0,
                    help="seconds per case (default 5)")
    pr.add_argument("--out", type=Path, help="JSON file to write (must not exist)")

    roof = sub.add_parser("roofline", help="roofline from an Nsight Compute CSV, or this CPU's from stored records")
    roof.add_argument("csv", type=Path, nargs="?", help="ncu --csv export (--page details or raw)")
    roof.add_argument("--peak-compute", type=_positive_float("--peak-compute"), help="TFLOP/s")
    roof.add_argument("--peak-bw", type=_positive_float("--peak-bw"), help="GB/s")
    roof.add_argument("--device", help="take the peaks from a table of known GPUs")
    roof.add_argument("--label", default=None, help="chart title")
    roof.add_argument("--by-range", action="store_true", help="one marker per NVTX range instead of per launch")
    roof.add_argument("--out", type=Path, help="chart PNG (default reports/roofline/NAME.png)")
    roof.add_argument("--summary", type=Path, help="summary CSV (default beside the chart)")
    roof.add_argument("--records", type=Path, nargs="+", help="results files or folders: this CPU's roofline")
    roof.add_argument("--record", type=Path, nargs="+",
                      help="perfsuite results of the same step: executed vs model FLOPs and MFU")

    ps = sub.add_parser("profile-step", help="mark one training step with NVTX for Nsight; print the nsys/ncu commands")
    ps.add_argument("workload", choices=("resnet", "autoencoder"))
    ps.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    ps.add_argument("--device", default="auto")
    ps.add_argument("--warmup-iters", type=int, default=5)
    ps.add_argument("--profile-iter", type=int, default=None, help="index of the marked step (default: right after warm-up)")

    tr = sub.add_parser("trace", help="torch.profiler window of a workload: Chrome trace, top operators, time split")
    tr.add_argument("workload")
    tr.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    tr.add_argument("--device", default="auto")
    tr.add_argument("--wait", type=int, default=1)
    tr.add_argument("--warmup", type=int, default=1)
    tr.add_argument("--active", type=int, default=2, help="profiled steps (keep it small: traces grow fast)")
    tr.add_argument("--out-dir", type=Path, default=Path("reports") / "traces")

    rep = sub.add_parser("report", help="markdown report with plots from results files")
    rep.add_argument("results", type=Path, nargs="+")
    rep.add_argument("--out-dir", type=Path, default=Path("reports") / "latest")
    rep.add_argument("--amp", type=Path, action="append", default=[], help="`perfsuite amp --out` JSON to include")
    rep.add_argument("--pair", type=Path, action="append", default=[], help="`perfsuite pair --out` JSON to include")
    rep.add_argument("--latency-bound", type=_positive_float("--latency-bound"), default=None, metavar="MS",
                     help="qwen: the optimal batch size must keep p90 latency within this many ms")

    chk = sub.add_parser("check", help="run the workloads' correctness checks (gradcheck, AMP loss, resume, "
                                       "early stopping); exit 3 on a failure")
    chk.add_argument("workloads", nargs="*", metavar="WORKLOAD", help="default: every workload")
    chk.add_argument("--device", default="cpu", help="cpu (default) | cuda | cuda:N | auto")

    exp = sub.add_parser("export", help="results as a tidy CSV/Parquet table, or TensorBoard event files")
    exp.add_argument("format", choices=("csv", "parquet", "tensorboard"))
    exp.add_argument("results", type=Path, nargs="+", help="results files or folders")
    exp.add_argument("--out", type=Path, help="csv/parquet: the file to write (must not exist)")
    exp.add_argument("--logdir", type=Path, help="tensorboard: the log directory (one run folder per case)")
    return p


def _run_config(args):
    from perfsuite.config import RunConfig

    given = {"max_time": args.max_time, "min_time": args.min_time, "target_rel_ci": args.target_ci,
             "timing": args.timing, "processes": getattr(args, "processes", None),
             "cpus": getattr(args, "cpus", None), "threads": getattr(args, "threads", None),
             "heap": getattr(args, "heap", None)}
    # Options left out take RunConfig's defaults (they default to None so a suite run can refuse them).
    return RunConfig(device=args.device, nvtx=not args.no_nvtx, **{k: v for k, v in given.items() if v is not None})


def cmd_list(args, console) -> int:
    from rich.table import Table

    from perfsuite import registry

    t = Table(title="perfsuite workloads")
    for col in ("workload", "parameter", "default", "allowed", "description"):
        t.add_column(col)
    for name in registry.names():
        w = registry.get(name)
        if not w.params:
            t.add_row(name, "-", "-", "-", w.description)
        for i, p in enumerate(w.params):
            t.add_row(name if i == 0 else "", p.name, str(p.default), p.allowed(),
                      w.description if i == 0 else p.help)
    console.print(t)
    return 0


def cmd_env(args, console) -> int:
    from perfsuite.env import fingerprint

    print(json.dumps(fingerprint(), indent=1))
    return 0


class ConsoleEvents:
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


def cmd_run(args, console) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from perfsuite import registry
    from perfsuite.config import resolve_device
    from perfsuite.env import fingerprint
    from perfsuite.execute import Case, check_cases, run_cases
    from perfsuite.params import expand_sweep, parse_assignments
    from perfsuite.peak import peak_for
    from perfsuite.report.console import print_bounds, print_warnings, records_table
    from perfsuite.storage import ResultsWriter, new_results_path

    if args.config or args.suite:
        return _run_suite(args, console)
    if args.no_checks or args.retry_failed:
        raise PerfsuiteError(f"{'--no-checks' if args.no_checks else '--retry-failed'} applies to a suite run "
                             "(--suite or --config)")
    if not args.workload:
        raise PerfsuiteError("name a workload (`perfsuite list`), or give --config FILE.yaml or --suite NAME")
    workload = registry.get(args.workload)
    cases = [Case(workload, c) for c in expand_sweep(parse_assignments(args.param, workload.params, workload.name))]
    cfg = _run_config(args)
    device = resolve_device(cfg.device)
    _check_pinning(cfg.cpus)
    # Bad parameters stop here, before anything is measured or written; so does a case asked for
    # by name that this device cannot run (a suite skips those instead).
    for i, reason in check_cases(cases, device).items():
        raise PerfsuiteError(f"{cases[i].label}: {reason}")
    env = fingerprint(device=device)
    peak = peak_for(args.peak_file, env, device)
    path = args.out or new_results_path(args.results_dir, workload.name)
    if args.tensorboard is not None:  # checked before measuring, like the results file
        from perfsuite.tb import prepare
        prepare(args.tensorboard)
    writer = ResultsWriter(path)  # the output is claimed before measuring: a clash fails now, not after
    console.print(f"{len(cases)} case(s) of {workload.name} on {device}, budget {cfg.max_time:g}s each "
                  f"-> {path}", highlight=False)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True, disable=len(cases) < 2) as progress:
        out = run_cases(cases, cfg, device, writer=writer, env=env, peak=peak, trace_dir=args.trace,
                        events=ConsoleEvents(console, len(cases), progress))
    if out.interrupted:
        if not writer.records and not writer.failures:
            path.unlink(missing_ok=True)  # our own empty claim: leave nothing to trip the next run
            console.print("interrupted before any case finished; nothing saved", highlight=False)
        else:
            console.print(f"interrupted: {len(writer.records)} of {len(cases)} case(s) saved to {path}",
                          highlight=False)
        return 130
    console.print(records_table(writer.records))
    print_warnings(console, writer.records)
    print_bounds(console, writer.records)
    _print_process_spread(console, writer.records)
    console.print(f"saved {len(writer.records)} record(s) to {path}", highlight=False)
    if args.tensorboard is not None:
        from perfsuite.tb import export_records
        console.print(f"TensorBoard: {export_records(writer.records, args.tensorboard)} record(s) in "
                      f"{args.tensorboard}", highlight=False)
    if writer.failures:
        console.print(Text(f"{len(writer.failures)} case(s) failed; their reasons are in {path}", style="red"))
        return 3
    return 0


def _print_process_spread(console, records) -> None:
    """With --processes: how much of each case's spread is between processes."""
    from perfsuite.workers import describe

    for rec in records:
        if line := describe(rec):
            console.print(Text(line))


def _check_pinning(cpus) -> None:
    """A CPU this process may not use is bad input, found before anything is measured or written."""
    if cpus:
        from perfsuite.system import pinned

        with pinned(cpus):
            pass


def _overrides(items: list[str]) -> dict[str, str]:
    """-p values for a suite, as typed: each entry's own workload parses them (perfsuite.suite)."""
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


# Options of `run` that a suite file decides for itself: given with --suite/--config they would
# be ignored, so they are refused instead.
SUITE_DECIDES = {"workload": "a workload", "max_time": "--max-time", "min_time": "--min-time",
                 "target_ci": "--target-ci", "timing": "--timing", "no_nvtx": "--no-nvtx", "trace": "--trace",
                 "processes": "--processes"}


def _run_suite(args, console) -> int:
    from datetime import datetime, timezone

    from perfsuite.suite import load_suite, shipped_suites_dir
    from perfsuite.suite_run import run_suite

    if args.config and args.suite:
        raise PerfsuiteError("give --config or --suite, not both")
    for dest, flag in SUITE_DECIDES.items():
        if getattr(args, dest) not in (None, False):
            raise PerfsuiteError(f"{flag} cannot be combined with --suite/--config: the suite file sets it "
                                 "(max_time and processes per suite or per entry); only -p, --device, --out, "
                                 "--retry-failed, --no-checks, --cpus, --threads and --heap apply")
    path = args.config or shipped_suites_dir() / f"{args.suite}.yaml"
    if args.suite and not path.exists():
        names = sorted(p.stem for p in shipped_suites_dir().glob("*.yaml"))
        raise PerfsuiteError(f"--suite {args.suite}: no such suite; shipped: {', '.join(names)}")
    suite = load_suite(path, _overrides(args.param), device=args.device if args.device != "auto" else None)
    if args.no_checks:
        from dataclasses import replace

        suite = replace(suite, checks=False)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or suite.output or args.results_dir / f"{suite.name}-{stamp}"
    console.print(Text(f"suite {suite.name} ({len(suite.entries)} entries) -> {out}"))
    try:
        if args.tensorboard is not None:
            from perfsuite.tb import export_tensorboard, prepare
            prepare(args.tensorboard)
        from perfsuite.system import pinned

        _check_pinning(args.cpus)
        if args.heap:  # process-wide: the pair and amp entries run on it too, not only the run entries
            from perfsuite.measure import heap
            heap.apply(args.heap)
        with pinned(args.cpus, args.threads):  # the pair and amp entries too, not only the records
            res = run_suite(suite, out, console, retry_failed=args.retry_failed, peak_file=args.peak_file,
                            settings={"cpus": args.cpus, "threads": args.threads,
                                      **({"heap": args.heap} if args.heap else {})})
    except KeyboardInterrupt:
        console.print(Text(f"interrupted: every finished case is in {out}; run the same command to resume"))
        return 130
    if args.tensorboard is not None:
        console.print(Text(f"TensorBoard: {export_tensorboard([out], args.tensorboard)[0]} record(s) in "
                           f"{args.tensorboard}"))
    console.print(Text(f"measured {res.measured}, skipped {res.skipped_done} already measured, "
                       f"{res.skipped_failed} failed before (--retry-failed to retry), "
                       f"{res.unsupported} unsupported here, {res.failed} failed now"
                       + (f" ({res.checks_failed} correctness check(s) failed: their workloads were not timed)"
                          if res.checks_failed else "")))
    return 3 if res.failed or res.checks_failed else 0


def cmd_suites(args, console) -> int:
    from rich.table import Table

    from perfsuite.suite import load_suite, shipped_suites_dir

    t = Table(title=f"suites in {shipped_suites_dir()}")
    for col in ("name", "entries", "workloads", "description"):
        t.add_column(col)
    for path in sorted(shipped_suites_dir().glob("*.yaml")):
        from perfsuite.suite import parse_yaml

        doc = parse_yaml(path)
        suite = load_suite(path)
        t.add_row(path.stem, str(len(suite.entries)), ", ".join(sorted({e.workload for e in suite.entries})),
                  str(doc.get("description", "")))
    console.print(t)
    return 0


def cmd_peak(args, console) -> int:
    from perfsuite.config import resolve_device
    from perfsuite.env import fingerprint
    from perfsuite.peak import load_peaks, measure_peak, roofs, save_peak
    from perfsuite.storage import writable_dir
    from perfsuite.units import fmt_rate

    cfg = _run_config(args)
    device = resolve_device(cfg.device)
    # The peak file is checked before measuring (a folder it cannot be written to, a corrupt
    # file it would have to merge with): a finished measurement is never thrown away.
    writable_dir(args.peak_file.parent, "--peak-file folder")
    if args.peak_file.exists() and not args.peak_file.is_file():
        raise PerfsuiteError(f"--peak-file {args.peak_file}: not a file")
    load_peaks(args.peak_file)
    env = fingerprint(device=device)
    console.print(f"measuring the peak of {device} (matmul {'/'.join(roofs(device))}, large copy)...",
                  highlight=False)
    peak = measure_peak(cfg, env, device)
    save_peak(args.peak_file, peak)
    for dtype, v in peak["flops_per_s"].items():
        console.print(f"  matmul {dtype}: {fmt_rate(v, 'FLOP/s')}", highlight=False)
    console.print(f"  copy bandwidth: {fmt_rate(peak['bytes_per_s'], 'B/s')}", highlight=False)
    console.print(f"stored in {args.peak_file}", highlight=False)
    return 0


def cmd_compare(args, console) -> int:
    from perfsuite.compare import compare_records
    from perfsuite.report.console import comparison_table
    from perfsuite.storage import load_records

    base, new = load_records(args.base), load_records(args.new)
    cmp = compare_records(base, new, threshold=args.threshold, alpha=args.alpha,
                          allow_env_mismatch=args.allow_env_mismatch)
    if not cmp.cases:
        raise PerfsuiteError(f"{args.base} and {args.new} have no case in common")
    if args.json:
        from perfsuite.storage import dumps

        # Strict JSON: a ratio of infinity or NaN is written as null, which every parser reads.
        print(dumps({"cases": [c.to_dict() for c in cmp.cases], "only_base": cmp.only_base,
                          "only_new": cmp.only_new, "regressed": cmp.regressed}, indent=1))
    else:
        console.print(comparison_table(cmp))
        for c in cmp.cases:
            if c.basis != "samples":
                console.print(Text(f"{c.label}: compared on {c.basis}"))
            for w in c.warnings:  # not refused, but the two sides were not measured alike
                console.print(Text("warning ", style="yellow") + Text(f"{c.label}: {w}"))
        for label in cmp.only_base:
            console.print(Text(f"only in base: {label}"))
        for label in cmp.only_new:
            console.print(Text(f"only in new: {label}"))
    if cmp.regressed:
        # On stderr, so that --json output stays one JSON document.
        err = Console(stderr=True)
        err.print(f"[bold red]slower[/] beyond {args.threshold:.0%} (significant at p < {args.alpha})")
        return 1
    return 0


def cmd_amp(args, console) -> int:
    from perfsuite import registry
    from perfsuite.config import resolve_device
    from perfsuite.measure.timing import clock_for
    from perfsuite.params import single_values
    from perfsuite.stats import median
    from perfsuite.storage import atomic_write_text, document
    from perfsuite.training.amp_compare import compare_precisions
    from perfsuite.units import fmt_bytes, fmt_seconds

    workload = registry.get(args.workload)
    given = single_values(args.param, workload)  # one case: a value list is an error, not silently cut
    if "precision" in given:
        raise PerfsuiteError("set the two precisions with --precisions A,B, not -p precision=")
    precisions = args.precisions.split(",")
    if len(precisions) != 2 or any(p not in ("fp32", "bf16", "fp16") for p in precisions):
        raise PerfsuiteError(f"--precisions expects two of fp32, bf16, fp16, got {args.precisions!r}")
    if args.pairs < 2 or args.steps < 5:
        raise PerfsuiteError("--pairs must be >= 2 and --steps >= 5")
    if args.out is not None and args.out.exists():
        raise PerfsuiteError(f"--out {args.out}: file exists; refusing to overwrite")
    device = resolve_device(args.device)
    for p in precisions:
        workload.check({**given, "precision": p}, device)
    console.print(f"{workload.name} {given or ''} on {device}: {precisions[0]} vs {precisions[1]}, "
                  f"{args.pairs} interleaved pairs, {args.steps}-step loss check", highlight=False)
    res = compare_precisions(workload.name, given, device, clock_for(device), precisions[0], precisions[1],
                             pairs=args.pairs, steps=args.steps, loss_tolerance=args.loss_tol)
    console.print(Text(f"  step time: {fmt_seconds(median(res.time_a_s))} ({res.precision_a}) vs "
                       f"{fmt_seconds(median(res.time_b_s))} ({res.precision_b})"))
    console.print(Text(f"  saved for backward: {fmt_bytes(res.saved_bytes_a)} vs {fmt_bytes(res.saved_bytes_b)} "
                       f"(ratio {res.memory_ratio:.2f})"))
    console.print(Text("  " + res.verdict(), style="green" if res.accuracy_ok else "bold red"))
    if line := res.bound_line():
        console.print(Text("  where the time went: " + line))
    if args.out is not None:
        atomic_write_text(args.out, document("amp", [res.to_dict()]))
    return 0 if res.accuracy_ok else 3  # a case that failed its check, not a slowdown


def cmd_report(args, console) -> int:
    from perfsuite.report.markdown import write_report
    from perfsuite.storage import load_document, load_many, writable_dir

    writable_dir(args.out_dir, "--out-dir")  # checked before reading anything

    for given in args.results:
        if given.is_dir():
            args.amp += sorted(given.rglob("*.amp.json"))
            args.pair += sorted(given.rglob("*.pair.json"))
    records, problems = load_many(args.results)
    for problem in problems:
        console.print(Text(f"skipped: {problem}", style="yellow"))
    if not records:
        raise PerfsuiteError("no records in " + ", ".join(map(str, args.results)))
    amp, pairs = [], []
    for kind, paths, into in (("amp", args.amp, amp), ("pair", args.pair, pairs)):
        for path in paths:
            try:
                into.extend(load_document(path, kind))
            except PerfsuiteError as exc:  # like a bad results file: named, the report goes on
                console.print(Text(f"skipped: {exc}", style="yellow"))
    page = write_report(records, args.out_dir, sources=args.results, amp=amp, pairs=pairs,
                        latency_bound_ms=args.latency_bound)
    console.print(f"report written to {page}", highlight=False)
    return 0





def _lazy(target: str):
    """A command whose body lives beside its subject, imported only when it runs."""
    def command(args, console) -> int:
        import importlib

        module, _, name = target.partition(":")
        return getattr(importlib.import_module(module), name)(args, console)

    return command


COMMANDS = {
    "list": cmd_list, "env": cmd_env, "run": cmd_run, "suites": cmd_suites, "peak": cmd_peak,
    "compare": cmd_compare, "amp": cmd_amp, "report": cmd_report,
    "gate": _lazy("perfsuite.gate:gate_command"),
    "pair": _lazy("perfsuite.pairing:pair_command"),
    "roofline": _lazy("perfsuite.roofline.command:roofline_command"),
    "profile-step": _lazy("perfsuite.profiling.commands:profile_step_command"),
    "trace": _lazy("perfsuite.profiling.commands:trace_command"),
    "export": _lazy("perfsuite.export:export_command"),
    "system": _lazy("perfsuite.system:system_command"),
    "check": _lazy("perfsuite.checks:check_command"),
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Wide enough for the results table when output is piped (rich assumes 80 columns then).
    console = Console(width=None if sys.stdout.isatty() else 200)
    err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)
    try:
        return COMMANDS[args.command](args, console)
    except PerfsuiteError as exc:
        err.print(Text("error: ", style="bold red") + Text(str(exc)))
        return 2
    except KeyboardInterrupt:
        err.print("interrupted", highlight=False)
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: no traceback on the console, one in a log file
        log = _crash_log(exc)
        err.print(Text("internal error: ", style="bold red") + Text(f"{type(exc).__name__}: {exc}"))
        err.print(Text(f"this is a perfsuite bug; the traceback is in {log}"))
        return EXIT_INTERNAL


EXIT_INTERNAL = 4


def _crash_log(exc: BaseException) -> str:
    """Write the traceback where the user can find it and attach it to a bug report."""
    import tempfile
    import traceback
    from datetime import datetime, timezone

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    for folder in (Path.home() / ".cache" / "perfsuite" / "logs", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"perfsuite-crash-{stamp}-{os.getpid()}.log"
            path.write_text(f"perfsuite {' '.join(sys.argv[1:])}\n{text}")
            return str(path)
        except OSError:
            continue
    return "(no writable log folder; traceback lost)"


if __name__ == "__main__":
    sys.exit(main())
