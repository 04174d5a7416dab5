"""Command-line interface: argument parsing and dispatch only.

Exit status: 0 success, 1 `compare` found a significant slowdown, 2 bad input or environment,
130 interrupted (every case finished before Ctrl-C is on disk).
"""

from __future__ import annotations

import argparse
import json
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="perfsuite", description="Benchmark deep-learning workloads.")
    p.add_argument("--peak-file", type=Path, default=DEFAULT_PEAK_FILE,
                   help=f"where machine peaks are stored (default {DEFAULT_PEAK_FILE})")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("list", help="workloads with their parameters, defaults and allowed values")
    sub.add_parser("env", help="print this machine's environment fingerprint (JSON)")

    def measuring(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
        sp.add_argument("--max-time", type=_positive_float("--max-time"), default=10.0,
                        help="time budget per case in seconds, warm-up included (default 10)")
        sp.add_argument("--min-time", type=float, default=0.0,
                        help="measure at least this long even once converged (default 0)")
        sp.add_argument("--target-ci", type=_positive_float("--target-ci"), default=0.01,
                        help="stop when the median's 95%% CI is within this fraction (default 0.01)")
        sp.add_argument("--timing", choices=("event", "host"), default="event",
                        help="CUDA only: device time from events, or host-inclusive sync + wall clock")
        sp.add_argument("--no-nvtx", action="store_true", help="do not emit NVTX ranges")

    run = sub.add_parser("run", help="measure a workload (a -p value list sweeps), or a suite file")
    run.add_argument("workload", nargs="?")
    run.add_argument("--config", type=Path, help="a suite YAML file (see `perfsuite suites`)")
    run.add_argument("--suite", help="a shipped suite by name: ci, cpu, gpu")
    run.add_argument("--retry-failed", action="store_true", help="with a suite: measure failed cases again")
    run.add_argument("--trace", type=Path, nargs="?", const=Path("reports") / "traces", default=None, metavar="DIR",
                     help="after measuring, write a torch.profiler trace of one step and a top-operators table "
                          "(default DIR reports/traces)")
    run.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE[,VALUE...]")
    measuring(run)
    run.add_argument("--out", type=Path, help="results file to write (must not exist)")
    run.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR,
                     help="directory for results when --out is not given (default results/)")

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
    gate.add_argument("--budget", type=_positive_float("--budget"), default=15.0, help="seconds per case (default 15)")
    gate.add_argument("--threshold", type=float, default=0.01,
                      help="smallest slowdown that counts, as a fraction (default 0.01: two builds of the same "
                           "code can differ by about 1%% through memory placement alone)")
    gate.add_argument("--fdr", type=_positive_float("--fdr"), default=0.05, help="Benjamini-Hochberg q (default 0.05)")
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
    pr.add_argument("--budget", type=_positive_float("--budget"), default=5.0, help="seconds per case (default 5)")
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
    return p


def _run_config(args):
    from perfsuite.config import RunConfig

    return RunConfig(device=args.device, max_time=args.max_time, min_time=args.min_time,
                     target_rel_ci=args.target_ci, timing=args.timing, nvtx=not args.no_nvtx)


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


def cmd_run(args, console) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from perfsuite import registry
    from perfsuite.config import resolve_device
    from perfsuite.env import fingerprint
    from perfsuite.params import expand_sweep, parse_assignments
    from perfsuite.peak import peak_for
    from perfsuite.report.console import print_warnings, records_table
    from perfsuite import runner
    from perfsuite.storage import ResultsWriter, failure_entry, new_results_path

    if args.config or args.suite:
        return _run_suite(args, console)
    if not args.workload:
        raise PerfsuiteError("name a workload (`perfsuite list`), or give --config FILE.yaml or --suite NAME")
    workload = registry.get(args.workload)
    sweep = parse_assignments(args.param, workload.params, workload.name)
    cases = expand_sweep(sweep)
    cfg = _run_config(args)
    device = resolve_device(cfg.device)
    for case in cases:
        workload.check(case, device)  # every case is validated before any is measured
    env = fingerprint()
    peak = peak_for(args.peak_file, env, device)
    path = args.out or new_results_path(args.results_dir, workload.name)
    writer = ResultsWriter(path)
    console.print(f"{len(cases)} case(s) of {workload.name} on {device}, budget {cfg.max_time:g}s each "
                  f"-> {path}", highlight=False)
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=console, transient=True,
                      disable=len(cases) < 2) as progress:
            task = progress.add_task(workload.name, total=len(cases))
            for case in cases:
                progress.update(task, description=f"{workload.name} {case}")
                try:
                    after = None
                    if args.trace is not None:
                        from perfsuite.profiling.trace import trace_step

                        label = f"{workload.name}[{','.join(f'{k}={v}' for k, v in case.items())}]"

                        def after(built, label=label):
                            trace, table = trace_step(built.fn, args.trace, label, device)
                            console.print(Text(f"trace: {trace}  top operators: {table}"))
                    writer.add(runner.run_case(workload, case, cfg, env=env, peak=peak, after=after))
                except (KeyboardInterrupt, PerfsuiteError):
                    raise
                except Exception as exc:  # an OOM or a crash in one case: record it, go on
                    failure = failure_entry(workload.name, workload.resolve(case), device, exc)
                    writer.add_failure(failure)
                    console.print(Text(f"failed: {workload.name} {case}: {failure['error']}", style="red"))
                progress.advance(task)
    except KeyboardInterrupt:
        console.print(f"interrupted: {len(writer.records)} of {len(cases)} case(s) saved to {path}",
                      highlight=False)
        return 130
    console.print(records_table(writer.records))
    print_warnings(console, writer.records)
    console.print(f"saved {len(writer.records)} record(s) to {path}", highlight=False)
    if writer.failures:
        console.print(Text(f"{len(writer.failures)} case(s) failed; their reasons are in {path}", style="red"))
        return 3
    return 0


def _overrides(items: list[str]) -> dict[str, list]:
    """-p values for a suite: parsed against every workload that has the parameter."""
    from perfsuite import registry
    from perfsuite.params import parse_assignments

    out: dict[str, list] = {}
    for item in items:
        key = item.partition("=")[0].strip()
        owners = [registry.get(n) for n in registry.names() if any(p.name == key for p in registry.get(n).params)]
        if not owners:
            raise PerfsuiteError(f"-p {item}: no workload has a parameter {key!r}")
        out.update(parse_assignments([item], owners[0].params, owners[0].name))
    return out


def _run_suite(args, console) -> int:
    from datetime import datetime, timezone

    from perfsuite.suite import load_suite, shipped_suites_dir
    from perfsuite.suite_run import run_suite

    if args.config and args.suite:
        raise PerfsuiteError("give --config or --suite, not both")
    path = args.config or shipped_suites_dir() / f"{args.suite}.yaml"
    if args.suite and not path.exists():
        names = sorted(p.stem for p in shipped_suites_dir().glob("*.yaml"))
        raise PerfsuiteError(f"--suite {args.suite}: no such suite; shipped: {', '.join(names)}")
    suite = load_suite(path, _overrides(args.param), device=args.device if args.device != "auto" else None)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or suite.output or args.results_dir / f"{suite.name}-{stamp}"
    console.print(Text(f"suite {suite.name} ({len(suite.entries)} entries) -> {out}"))
    try:
        res = run_suite(suite, out, console, retry_failed=args.retry_failed, peak_file=args.peak_file)
    except KeyboardInterrupt:
        console.print(Text(f"interrupted: every finished case is in {out}; run the same command to resume"))
        return 130
    console.print(Text(f"measured {res.measured}, skipped {res.skipped_done} already measured, "
                       f"{res.skipped_failed} failed before (--retry-failed to retry), "
                       f"{res.unsupported} unsupported here, {res.failed} failed now"))
    return 3 if res.failed else 0


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
    from perfsuite.peak import measure_peak, save_peak
    from perfsuite.units import fmt_rate

    cfg = _run_config(args)
    device = resolve_device(cfg.device)
    env = fingerprint()
    console.print(f"measuring the peak of {device} (matmul fp32/bf16, large copy)...", highlight=False)
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
        print(json.dumps({"cases": [c.to_dict() for c in cmp.cases], "only_base": cmp.only_base,
                          "only_new": cmp.only_new, "regressed": cmp.regressed}, indent=1))
    else:
        console.print(comparison_table(cmp))
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
    from perfsuite.stats import median
    from perfsuite.storage import atomic_write_text
    from perfsuite.training.amp_compare import compare_precisions
    from perfsuite.units import fmt_bytes, fmt_seconds

    workload = registry.get(args.workload)
    given = _single(args.param, workload)  # one case: a value list is an error, not silently cut
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
    if args.out is not None:
        atomic_write_text(args.out, json.dumps(res.to_dict(), indent=1))
    return 0 if res.accuracy_ok else 1


def cmd_report(args, console) -> int:
    from perfsuite.report.markdown import write_report
    from perfsuite.storage import load_many

    for given in args.results:
        if given.is_dir():
            args.amp += sorted(given.rglob("*.amp.json"))
            args.pair += sorted(given.rglob("*.pair.json"))
    plain = [p for p in args.results if not p.is_dir()] + [
        f for d in args.results if d.is_dir() for f in sorted(d.rglob("*.json"))
        if not f.name.endswith((".amp.json", ".pair.json")) and f.name != "run-config.json"]
    records, problems = load_many(plain)
    for problem in problems:
        console.print(Text(f"skipped: {problem}", style="yellow"))
    if not records:
        raise PerfsuiteError("no records in " + ", ".join(map(str, args.results)))
    amp = []
    for path in args.amp:
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise PerfsuiteError(f"--amp {path}: cannot read ({exc})") from None
        amp.extend(doc if isinstance(doc, list) else [doc])
    pairs = []
    for path in args.pair:
        try:
            pairs.extend(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise PerfsuiteError(f"--pair {path}: cannot read ({exc})") from None
    page = write_report(records, args.out_dir, sources=args.results, amp=amp, pairs=pairs,
                        latency_bound_ms=args.latency_bound)
    console.print(f"report written to {page}", highlight=False)
    return 0


def cmd_gate(args, console) -> int:
    from perfsuite import gate as g
    from perfsuite import registry
    from perfsuite.config import resolve_device
    from perfsuite.errors import Unsupported
    from perfsuite.gate_versions import workload_at
    from perfsuite.measure.timing import clock_for
    from perfsuite.params import expand_sweep, parse_assignments
    from perfsuite.storage import atomic_write_text

    if args.threshold < 0:
        raise PerfsuiteError(f"--threshold must be >= 0, got {args.threshold}")
    if args.json is not None and args.json.exists():
        raise PerfsuiteError(f"--json {args.json}: file exists; refusing to overwrite")
    new = registry.get(args.workload)
    device = resolve_device(args.device)
    clock = clock_for(device, "host")  # host-inclusive: both versions pay the same sync
    cases = expand_sweep(parse_assignments(args.param, new.params, new.name))
    runnable = []
    for case in cases:
        try:
            new.check(case, device)
            runnable.append(case)
        except Unsupported as exc:
            console.print(Text(f"skipped {new.name} {case}: {exc}", style="yellow"))
    label = lambda case: f"{new.name}[{','.join(f'{k}={v}' for k, v in new.resolve(case).items())}]"  # noqa: E731

    if args.slowdown is not None:
        if not 0 < args.slowdown < 1 or args.trials < 1:
            raise PerfsuiteError("--slowdown must be in (0, 1) and --trials >= 1")
        out = []
        for case in runnable:
            res = g.power_and_false_alarms(lambda: new.build(case, device).fn, clock, args.slowdown,
                                           args.trials, args.budget, args.threshold)
            lo, hi = g.wilson_interval(res["caught"], res["trials"])
            flo, fhi = g.wilson_interval(res["false_alarms"], res["trials"])
            console.print(Text(
                f"{label(case)}: injected {res['fraction_estimated']:.1%} ({res['matmuls_added']} matmuls): "
                f"caught {res['caught']}/{res['trials']} (95% CI {lo:.0%}-{hi:.0%}); unchanged flagged "
                f"{res['false_alarms']}/{res['trials']} (95% CI {flo:.0%}-{fhi:.0%}); {args.budget:g}s per gate"))
            out.append({"case": label(case), **res})
        if args.json:
            atomic_write_text(args.json, json.dumps(out, indent=1))
        return 0

    floors = json.loads(args.floors.read_text()) if args.floors.exists() else {}
    if args.learn_floor:
        for case in runnable:
            floors[label(case)] = g.noise_floor(lambda: new.build(case, device).fn, clock, args.learn_floor,
                                                args.budget / 3)
            console.print(Text(f"{label(case)}: noise floor {floors[label(case)]:.2%}"))
        args.floors.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.floors, json.dumps(floors, indent=1))
        return 0

    base = workload_at(args.base_ref, args.workload)
    gate_cases = [g.GateCase(label(c), base.build(c, device).fn, new.build(c, device).fn, floors.get(label(c), 0.0))
                  for c in runnable]
    verdicts = g.run_gate(gate_cases, clock, args.threshold, args.budget, args.fdr)
    for v in verdicts:
        state = "SLOWER" if v.slower else ("flagged, not confirmed" if v.flagged else "ok")
        console.print(Text(f"{v.label}: median ratio {v.first.median:.3f} over {len(v.first.ratios)} pairs "
                           f"(threshold +{v.threshold:.1%}, p={v.p_first:.2g}) -> {state}",
                           style="bold red" if v.slower else ""))
    if args.json:
        atomic_write_text(args.json, json.dumps([v.to_dict() for v in verdicts], indent=1))
    return 1 if any(v.slower for v in verdicts) else 0


def cmd_pair(args, console) -> int:
    from perfsuite import registry
    from perfsuite.config import resolve_device
    from perfsuite.measure.timing import clock_for
    from perfsuite.pairing import pair
    from perfsuite.params import expand_sweep, parse_assignments
    from perfsuite.storage import atomic_write_text

    w = registry.get(args.workload)
    varied = parse_assignments([args.vary], w.params, w.name)
    (key, values), = varied.items()
    if len(values) != 2:
        raise PerfsuiteError(f"--vary expects exactly two values of {key!r}, got {len(values)}")
    sweep = parse_assignments(args.param, w.params, w.name)
    if key in sweep:
        raise PerfsuiteError(f"parameter {key!r} is given both by --vary and -p")
    if args.out is not None and args.out.exists():
        raise PerfsuiteError(f"--out {args.out}: file exists; refusing to overwrite")
    device = resolve_device(args.device)
    cases = expand_sweep(sweep)
    for case in cases:
        for v in values:
            w.check({**case, key: v}, device)
    results = []
    for case in cases:
        r = pair(w, case, key, values[0], values[1], device, clock_for(device, "host"), args.budget)
        results.append(r)
        ci = r.time_ratio_ci
        ci_txt = "" if ci is None else f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})"
        saved = "" if r.saved_ratio is None else f"; saved for backward {r.a}/{r.b} = {r.saved_ratio:.2f}"
        console.print(Text(f"{w.name} {case}: time {r.a}/{r.b} = {r.time_ratio:.3f}{ci_txt} over "
                           f"{len(r.ratios)} pairs{saved}"))
        if args.out is not None:
            atomic_write_text(args.out, json.dumps([x.to_dict() for x in results], indent=1))
    return 0


def cmd_roofline(args, console) -> int:
    from perfsuite.roofline import chart, model
    from perfsuite.storage import atomic_write_text

    if (args.csv is None) == (args.records is None):
        raise PerfsuiteError("give an ncu CSV file, or --records RESULTS for this CPU's roofline")
    if args.records:
        from perfsuite.roofline.cpu import record_points
        from perfsuite.storage import load_many

        records, problems = load_many(args.records)
        for problem in problems:
            console.print(Text(f"skipped: {problem}", style="yellow"))
        points, peaks = record_points(records)
        if not points or "fp32" not in peaks:
            raise PerfsuiteError("no record with FLOPs, bytes and an fp32 machine peak (run `perfsuite peak` first)")
        flops, bw = peaks["fp32"]
        extra = tuple((f"{d} matmul peak", f) for d, (f, _) in peaks.items() if d != "fp32" and f)
        out = args.out or Path("reports") / "roofline" / "cpu-roofline.png"
        chart.draw(points, flops, bw, out, args.label or "this CPU: measured peaks, counted FLOPs, estimated bytes",
                   extra_ceilings=extra)
        summary = args.summary or out.with_suffix(".csv")
        def ridge(p):  # each point against the roof of its own precision (bf16 has a higher one)
            f = (peaks.get(p.dtype) or (None,))[0] or flops
            return f / bw

        atomic_write_text(summary, chart.summary_csv(points, ridge))
        console.print(Text(f"roofline: {out}  summary: {summary}"))
        return 0

    from perfsuite.roofline.ncu import read_ncu_csv

    if args.device:
        if args.device not in model.KNOWN_DEVICES:
            raise PerfsuiteError(f"--device {args.device}: unknown; known: {', '.join(model.KNOWN_DEVICES)}")
        tflops, gbs = model.KNOWN_DEVICES[args.device]
    else:
        if args.peak_compute is None or args.peak_bw is None:
            raise PerfsuiteError("give --peak-compute TFLOP/s and --peak-bw GB/s, or --device NAME")
        tflops, gbs = args.peak_compute, args.peak_bw
    peak_flops, peak_bw = tflops * 1e12, gbs * 1e9
    launches = read_ncu_csv(args.csv)
    points = [model.point(l, args.csv) for l in launches]
    ranges = model.by_range(points, launches)
    rows = points + [model.aggregate(points, launches, "total")] + ranges
    csv_text = chart.summary_csv(rows, peak_flops / peak_bw)
    out = args.out or Path("reports") / "roofline" / f"{args.csv.stem}.png"
    chart.draw(ranges if args.by_range and ranges else points, peak_flops, peak_bw, out,
               args.label or f"{args.csv.name}: {tflops:g} TFLOP/s, {gbs:g} GB/s")
    summary = args.summary or out.with_suffix(".csv")
    atomic_write_text(summary, csv_text)
    console.print(Text(f"{len(points)} launches, {len(ranges)} NVTX ranges -> {out}, {summary}"))
    return 0


def _single(params: list[str], workload) -> dict:
    from perfsuite.params import parse_assignments

    parsed = parse_assignments(params, workload.params, workload.name)
    many = [k for k, v in parsed.items() if len(v) > 1]
    if many:
        raise PerfsuiteError(f"parameter {many[0]!r}: this command takes one value, not a list")
    return {k: v[0] for k, v in parsed.items()}


def cmd_profile_step(args, console) -> int:
    import shlex

    import torch

    from perfsuite import registry
    from perfsuite.config import resolve_device
    from perfsuite.profiling.step_marking import nsight_commands, process_range
    from perfsuite.training.setup import training_setup
    from perfsuite.training.step import make_train_step

    w = registry.get(args.workload)
    params = _single(args.param, w)
    device = resolve_device(args.device)
    w.check(params, device)
    k = args.warmup_iters if args.profile_iter is None else args.profile_iter
    if args.warmup_iters < 0 or k < args.warmup_iters:
        raise PerfsuiteError("--warmup-iters must be >= 0 and --profile-iter >= --warmup-iters")
    cuda = device.startswith("cuda")
    setup = training_setup(w.name, params, device)
    x, y = setup.batch(0)
    plain = make_train_step(setup.parts, x, y, forward=setup.forward)
    marked = make_train_step(setup.parts, x, y, forward=setup.forward, phase=lambda n: process_range(n, cuda))
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    for _ in range(k):
        plain()
    sync()  # nothing from the warm-up steps may run inside the marked range
    with process_range("train_step", cuda):
        marked()
        sync()
    argv = "python -m perfsuite " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "python -m perfsuite profile-step ..."
    if not cuda:
        console.print(Text(f"ran {k} warm-up steps and step {k} on {device}: Nsight Systems and Nsight Compute need a "
                           "CUDA GPU, so no NVTX range was emitted here. On a GPU host:", style="yellow"))
    else:
        console.print(Text(f"marked step {k} (train_step > forward, loss, backward, optimizer_step) after {k} warm-up steps"))
    for line in nsight_commands(argv.replace("--device cpu", "--device cuda")):
        console.print(Text("  " + line))
    return 0


def cmd_trace(args, console) -> int:
    from torch.profiler import record_function

    from perfsuite import registry
    from perfsuite.config import resolve_device
    from perfsuite.profiling.step_marking import split_from_profile
    from perfsuite.profiling.trace import slug, trace_window
    from perfsuite.storage import atomic_write_text

    w = registry.get(args.workload)
    params = _single(args.param, w)
    if min(args.wait, args.warmup) < 0 or not 1 <= args.active <= 10:
        raise PerfsuiteError("--wait and --warmup must be >= 0, --active between 1 and 10")
    device = resolve_device(args.device)
    w.check(params, device)
    label = f"{w.name}[{','.join(f'{k}={v}' for k, v in w.resolve(params).items())}]"
    if w.name in ("resnet", "autoencoder"):
        from perfsuite.training.setup import training_setup
        from perfsuite.training.step import make_train_step

        setup = training_setup(w.name, params, device)
        step = make_train_step(setup.parts, *setup.batch(0), forward=setup.forward,
                               phase=lambda n: record_function(f"phase:{n}"))
    else:
        step = w.build(params, device).fn
    t = trace_window(step, args.out_dir, label, device, args.wait, args.warmup, args.active)
    trace, table = t.trace, t.table
    split = split_from_profile(t.profile, t.wall_s)
    split = {k: v / args.active for k, v in split.items()}  # per step
    atomic_write_text(args.out_dir / f"{slug(label)}.split.json", json.dumps(split, indent=1))
    console.print(Text(f"trace {trace} ({trace.stat().st_size / 1e6:.1f} MB), top operators {table}"))
    if w.name in ("resnet", "autoencoder"):
        parts = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in split.items() if k != "wall")
        console.print(Text(f"per step ({split['wall'] * 1e3:.1f} ms wall): {parts} (data loading is 0: "
                           "the step trains on a batch already on the device)"))
    return 0


COMMANDS = {"profile-step": cmd_profile_step, "trace": cmd_trace, "roofline": cmd_roofline, "suites": cmd_suites, "pair": cmd_pair, "gate": cmd_gate, "list": cmd_list, "env": cmd_env, "run": cmd_run, "peak": cmd_peak, "amp": cmd_amp,
            "compare": cmd_compare, "report": cmd_report}


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


if __name__ == "__main__":
    sys.exit(main())
