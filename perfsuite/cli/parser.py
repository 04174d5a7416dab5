"""The argument parser of every command, with validators whose messages name the flag."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfsuite.cli.store import add_arguments as store_arguments
from perfsuite.core.config import MAX_BUILDS, MAX_TIME_S, number_in
from perfsuite.core.errors import ConfigError
from perfsuite.measuring.system import parse_cpus
from perfsuite.stats import verdict
from perfsuite.storage import machine_drift
from perfsuite.storage.peaks import DEFAULT_PEAK_FILE

DEFAULT_RESULTS_DIR = Path("results")


def _positive_float(name: str, most: float = MAX_TIME_S):
    """A number above 0 and at most `most` (default: seconds, at most a day): `--max-time 1e20`
    would overflow the deadlines computed from it."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} expects a number, got {text[:40]!r}") from None
        try:
            return number_in(name, v, 0, most, above=True)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


# A count on the command line beyond this is a typo (and `int` of 10^20 overflows C callees).
MAX_COUNT = 1_000_000


# Steps run before or around a profiled one (trace --wait/--warmup, profile-step): more is a typo
# that would keep the command busy for hours.
STEPS_AT_MOST = 1000


def _whole(name: str, least: int, most: int = MAX_COUNT):
    def parse(text: str) -> int:
        t = text.strip()
        # Digits only, and few of them: int() of a 10^6-digit string is itself slow.
        if not (t.isascii() and t.isdigit()) or len(t) > 12 or not least <= int(t) <= most:
            raise argparse.ArgumentTypeError(
                f"{name} expects a whole number >= {least} (at most {most}), got {text[:40]!r}"
            )
        return int(t)

    return parse


def _sides_options(sub, fdr_help: str, rounds_of: str) -> None:
    """--fdr and --builds of a command that gates in rounds of side processes (bisect, history),
    declared once."""
    sub.add_argument(
        "--fdr",
        type=_fraction("--fdr", 0.5),  # a one-sided test at 0.5 or more says nothing
        default=0.01,
        help=f"{fdr_help} (default 0.01)",
    )
    sub.add_argument(
        "--builds",
        type=_whole("--builds", 1, MAX_BUILDS),
        default=1,
        metavar="K",
        help=f"processes per side in each round{' ' + rounds_of if rounds_of else ''} (default 1)",
    )


def _count(name: str):
    return _whole(name, 1)


def _fraction(name: str, most: float = 1.0):
    """A probability or a share: strictly between 0 and `most` (`--fdr 2` would accept every slowdown)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} expects a number between 0 and {most:g}, got {text!r}") from None
        if not 0 < v < most:  # also refuses nan, which compares false with everything
            raise argparse.ArgumentTypeError(f"{name} must be between 0 and {most:g} (exclusive), got {text!r}")
        return v

    return parse


def _nonnegative_float(name: str):
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} expects a number, got {text!r}") from None
        if not 0 <= v < float("inf"):  # nan too
            raise argparse.ArgumentTypeError(f"{name} must be a finite number >= 0, got {text!r}")
        return v

    return parse


def _given_path(name: str):
    """A path that names something: `--workloads ""` would be the current folder, every file in it."""

    def parse(text: str) -> Path:
        if not text.strip() or "\x00" in text:
            raise argparse.ArgumentTypeError(f"{name} expects a file or folder, got {text[:40]!r}")
        return Path(text)

    return parse


def _cpu_list(text: str) -> tuple[int, ...]:
    try:
        return parse_cpus(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--cpus: {exc}") from None


def bisect_and_why(sub) -> None:
    """`perfsuite bisect` (which commit made it slower) and `perfsuite why` (which operators changed)."""
    bi = sub.add_parser(
        "bisect",
        help="find the first-parent commit between --good and --bad that made a workload "
        "slower; exit 1 when it names one",
    )
    bi.add_argument("workload")
    bi.add_argument("--good", required=True, metavar="REV", help="a revision that is not slow")
    bi.add_argument("--bad", required=True, metavar="REV", help="a later revision that is slower (checked first)")
    bi.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    bi.add_argument("--device", default="auto")
    bi.add_argument(
        "--max-time",
        "--budget",
        dest="budget",
        metavar="SECONDS",
        type=_positive_float("--max-time"),
        default=15.0,
        help="seconds per probe, as the gate's --max-time (default 15); a probe after "
        "the confirmation takes up to 4x that to tell good from bad",
    )
    bi.add_argument(
        "--threshold",
        type=_nonnegative_float("--threshold"),
        default=0.01,
        help="smallest slowdown that counts, as the gate's (default 0.01)",
    )
    _sides_options(bi, "false alarms per probe of an unchanged commit", "of a probe, as the gate's")
    bi.add_argument(
        "--threads",
        type=_count("--threads"),
        default=None,
        metavar="N",
        help="torch threads in the sides (default 1 on the CPU, as `run`; torch's own on CUDA)",
    )
    bi.add_argument("--heap", choices=("steady", "default"), default="steady", help="as the gate's (default steady)")
    bi.add_argument(
        "--log",
        type=Path,
        default=None,
        help="the log of probes, resumed when it exists (default .perfsuite/bisect/WORKLOAD-GOOD-BAD.bisect.json)",
    )
    bi.add_argument("--no-why", action="store_true", help="do not profile the commit it names")
    bi.add_argument(
        "--faster",
        action="store_true",
        help="find the first commit that made it faster instead (--bad is then the faster revision)",
    )
    workloads_from_option(bi)
    why_options(bi)

    wy = sub.add_parser(
        "why",
        help="which operators changed between two sides: a differential torch.profiler "
        "table, sorted by their share of the step-time difference, and peak memory",
    )
    wy.add_argument("workload")
    side = wy.add_mutually_exclusive_group(required=True)
    side.add_argument(
        "--base", dest="base_ref", metavar="REV", help="the workload at REV (A) against the working tree (B)"
    )
    side.add_argument("--vary", metavar="KEY=A,B", help="two values of one parameter, e.g. impl=custom,builtin")
    wy.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    wy.add_argument("--device", default="auto")
    wy.add_argument(
        "--threads",
        type=_count("--threads"),
        default=None,
        metavar="N",
        help="torch threads in the sides (default 1 on the CPU, as `run`; torch's own on CUDA)",
    )
    wy.add_argument("--json", type=Path, help="write the comparison as JSON (must not exist)")
    workloads_from_option(wy)
    why_options(wy)


def history_parser(sub) -> None:
    """`perfsuite history`: each commit of a range measured against the one before it."""
    hi = sub.add_parser(
        "history",
        help="measure each first-parent commit of a range against the commit before it (paired, "
        "interleaved): confirmed regressions with their operators, an HTML page; exit 1 when a "
        "commit measured now is a confirmed regression",
    )
    hi.add_argument("workload", nargs="?", help="the workload (default: every workload of the project)")
    hi.add_argument("--range", dest="range_", metavar="A..B", help="the commits after A up to B (first-parent)")
    hi.add_argument(
        "--update",
        action="store_true",
        help="measure the commits that came since: the stored history's start up to HEAD (or B of --range)",
    )
    hi.add_argument(
        "--every",
        type=_whole("--every", 1, 1000),
        default=1,
        metavar="N",
        help="measure every Nth commit (and the newest) against the one measured before it; a confirmed "
        "regression spanning several commits is bisected to the first slower one (default 1: every commit)",
    )
    hi.add_argument(
        "--max-commits",
        type=_whole("--max-commits", 1, 10**6),
        default=100,
        metavar="N",
        help="refuse a plan of more than N commits to measure, saying what it would cost (default 100)",
    )
    hi.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    hi.add_argument("--device", default="auto")
    hi.add_argument(
        "--max-time",
        "--budget",
        dest="budget",
        metavar="SECONDS",
        type=_positive_float("--max-time"),
        default=10.0,
        help="seconds per pair of commits, as the gate's --max-time (default 10)",
    )
    hi.add_argument(
        "--threshold",
        type=_nonnegative_float("--threshold"),
        default=0.01,
        help="smallest slowdown that counts, as the gate's (default 0.01)",
    )
    _sides_options(hi, "false discoveries controlled across every commit of the history", "")
    hi.add_argument(
        "--threads",
        type=_count("--threads"),
        default=None,
        metavar="N",
        help="torch threads in the sides (default 1 on the CPU, as `run`; torch's own on CUDA)",
    )
    hi.add_argument("--heap", choices=("steady", "default"), default="steady", help="as the gate's (default steady)")
    hi.add_argument(
        "--log",
        type=Path,
        default=None,
        help="the history, resumed and extended when it exists (default .perfsuite/history/WORKLOAD-PARAMS.history.json)",
    )
    hi.add_argument("--html", type=Path, default=None, help="the page of the history (default beside the log)")
    hi.add_argument(
        "--floors",
        type=Path,
        default=Path(".perfsuite") / "noise-floors.json",
        help="noise floors per case, learned with `gate --learn-floor`: a point is confirmed only beyond its "
        "case's floor (used when the file exists)",
    )
    hi.add_argument(
        "--asv",
        type=Path,
        default=None,
        metavar="ASV_CONF",
        help="also write the paired history into the results of this asv.conf.json: `asv publish` then "
        "draws it as perfsuite_history.WORKLOAD.CASE beside asv's own runs",
    )
    hi.add_argument("--no-why", action="store_true", help="do not profile the confirmed changes")
    hi.add_argument("--allow-dirty", action="store_true", help="measure although tracked files are modified")
    workloads_from_option(hi)
    why_options(hi)


def workloads_from_option(sp: argparse.ArgumentParser) -> None:
    """Which copy of a user's workload file each revision is measured with (revisions.Revisions)."""
    sp.add_argument(
        "--workloads-from",
        default="tree",
        metavar="tree|revision|REV",
        help="the workload file each revision is measured with: tree (default) the working tree's, "
        "so commits older than the benchmark are measured too; revision: each revision's own; "
        "REV: that revision's copy. The project's code always comes from the revision "
        "(perfsuite's own workloads are always the revision's)",
    )


def why_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--steps", type=_count("--steps"), default=5, help="profiled steps per window (default 5)")
    sp.add_argument(
        "--rounds",
        type=_count("--rounds"),
        default=4,
        help="profiler windows per side, alternating which side goes first (default 4)",
    )
    sp.add_argument("--top", type=_count("--top"), default=20, help="operators listed (default 20)")


def _machine_log(text: str) -> Path | None:
    return None if text == "none" else Path(text)


def _shard(text: str) -> tuple[int, int]:
    k, slash, n = text.partition("/")
    if not (slash and k.strip().isdigit() and n.strip().isdigit()) or not 1 <= int(k) <= int(n) <= 1000:
        raise argparse.ArgumentTypeError(f"--shard expects K/N with 1 <= K <= N <= 1000, got {text!r}")
    return int(k), int(n)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="perfsuite", description="Benchmark deep-learning workloads.")
    p.add_argument(
        "--peak-file",
        type=Path,
        default=DEFAULT_PEAK_FILE,
        help=f"where machine peaks are stored (default {DEFAULT_PEAK_FILE})",
    )
    log = machine_drift.default_log()
    p.add_argument(
        "--machine-log",
        type=_machine_log,
        default=log,
        metavar="PATH",
        help="`run` (suites included) notes each run's machine-speed reference here and widens a "
        "run's interval by how far the last runs of the same case moved (default: "
        f"${machine_drift.ENV_VAR} when set, else ~/.cache/perfsuite/machine-speed.jsonl; "
        f"now {log if log is not None else 'none'}; none: off)",
    )
    p.add_argument(
        "--workloads",
        dest="workload_paths",
        action="append",
        type=_given_path("--workloads"),
        default=[],
        metavar="PATH",
        help="a file or folder of your own workloads (@perfsuite.workload); repeatable. "
        "[tool.perfsuite] workloads in pyproject.toml are found without it",
    )
    p.add_argument(
        "--store",
        default=None,
        metavar="PATH|URL",
        help="the results store every measuring command writes to and `store:` sources read: a "
        "SQLite file or postgresql://user@host/db (default: $PERFSUITE_STORE, else [tool.perfsuite] "
        "store, else .perfsuite/results.db in the project)",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ls = sub.add_parser("list", help="workloads with their parameters, defaults and allowed values")
    ls.add_argument(
        "--all",
        action="store_true",
        help="inside a project with [tool.perfsuite]: perfsuite's built-ins too (default: the project's)",
    )
    sub.add_parser("env", help="print this machine's environment fingerprint (JSON)")
    sy = sub.add_parser(
        "system",
        help="what could disturb measurements here: governor, turbo, load, steal, busy processes, threads, affinity",
    )
    sy.add_argument(
        "--window",
        type=_positive_float("--window"),
        default=1.0,
        help="seconds to watch steal and other processes (default 1)",
    )
    sy.add_argument("--json", action="store_true", help="readings and warnings as JSON")

    def measuring(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
        sp.add_argument(
            "--max-time",
            type=_positive_float("--max-time"),
            default=None,
            help="time budget per case in seconds, warm-up included (default 10)",
        )
        sp.add_argument(
            "--min-time",
            type=_nonnegative_float("--min-time"),
            default=None,
            help="measure at least this long even once converged (default 0)",
        )
        sp.add_argument(
            "--target-ci",
            type=_positive_float("--target-ci"),
            default=None,
            help="stop when the median's 95%% CI is within this fraction, once half the budget "
            "has passed (default 0.01)",
        )
        sp.add_argument(
            "--timing",
            choices=("event", "host"),
            default=None,
            help="CUDA only: device time from events, or host-inclusive sync + wall clock",
        )
        sp.add_argument("--no-nvtx", action="store_true", help="do not emit NVTX ranges")

    run = sub.add_parser("run", help="measure a workload (a -p value list sweeps), or a suite file")
    run.add_argument("workload", nargs="?")
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
    run.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE[,VALUE...]")
    measuring(run)
    run.add_argument(
        "--processes",
        type=_count("--processes"),
        default=None,
        metavar="N",
        help="spread each case's budget over N fresh worker processes; the median and its CI "
        "then come from the process medians (default: one per 2 s of --max-time, 2 to 5; "
        "below 4 s, this process)",
    )
    run.add_argument(
        "--builds",
        type=_whole("--builds", 1, MAX_BUILDS),
        default=None,
        metavar="N",
        help="builds of the step rotated in each measuring process; the median and its CI come "
        "from their medians (default 3; 1: one build, the interval of its samples alone)",
    )
    run.add_argument(
        "--cpus",
        type=_cpu_list,
        default=None,
        metavar="LIST",
        help="pin the measuring process(es) to these CPUs, e.g. 0 or 0,1 or 0-3",
    )
    run.add_argument(
        "--threads",
        type=_count("--threads"),
        default=None,
        metavar="N",
        help="torch threads while measuring (torch.set_num_threads); default 1 on the CPU "
        "(as torch.utils.benchmark), torch's own on CUDA",
    )
    run.add_argument(
        "--heap",
        choices=("default", "steady"),
        default=None,
        help="steady: glibc's malloc keeps freed memory, so page faults leave a CPU step's time "
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
        type=_shard,
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

    sub.add_parser("suites", help="the suite files shipped with perfsuite")

    store_arguments(sub, _count)

    peak = sub.add_parser("peak", help="measure and store this device's matmul FLOP/s and bandwidth")
    measuring(peak)

    cmp = sub.add_parser("compare", help="compare two results files case by case")
    cmp.add_argument(
        "base",
        type=Path,
        nargs="+",
        help="the base's results; three or more runs of a case teach compare how much separate "
        "runs of unchanged code differ",
    )
    cmp.add_argument("new", type=Path)
    cmp.add_argument(
        "--threshold",
        type=_positive_float("--threshold"),
        default=0.05,
        help="slowdown that fails the comparison, as a fraction (default 0.05)",
    )
    cmp.add_argument(
        "--alpha", type=_fraction("--alpha"), default=0.01, help="significance level of the test (default 0.01)"
    )
    cmp.add_argument(
        "--allow-env-mismatch", action="store_true", help="compare records measured in different environments"
    )
    cmp.add_argument(
        "--floors",
        type=Path,
        default=Path(".perfsuite") / "noise-floors.json",
        help="noise floors per case, learned with `gate --learn-floor`, used when the file exists",
    )
    cmp.add_argument("--json", action="store_true", help="print the comparison as JSON")

    amp = sub.add_parser("amp", help="two precisions of a training workload, interleaved: speed-up, memory, loss")
    amp.add_argument("workload", help="a training workload (one that declares a trainer: resnet, autoencoder)")
    amp.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    amp.add_argument("--device", default="auto")
    amp.add_argument("--precisions", default="fp32,bf16", help="A,B (default fp32,bf16)")
    amp.add_argument(
        "--pairs", type=_whole("--pairs", 2), default=20, help="interleaved A/B block pairs, at most (default 20)"
    )
    amp.add_argument(
        "--max-time",
        type=_positive_float("--max-time"),
        default=20.0,
        help="seconds for warm-up and the interleaved pairs (at least 2 pairs; default 20)",
    )
    amp.add_argument(
        "--steps", type=_whole("--steps", 5), default=30, help="training steps of the loss check (default 30)"
    )
    amp.add_argument(
        "--loss-tol",
        type=_positive_float("--loss-tol"),
        default=0.02,
        help="the least trajectory distance allowed between the precisions' losses, whatever runs of A "
        "from weights perturbed by B's rounding show (default 0.02)",
    )
    amp.add_argument("--out", type=Path, help="write the comparison as JSON (must not exist)")

    gate = sub.add_parser("gate", help="interleave a workload at a base revision and now; fail on a confirmed slowdown")
    gate.add_argument("workload")
    gate.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE[,VALUE...]")
    gate.add_argument(
        "--base",
        "--base-ref",
        dest="base_ref",
        default="HEAD",
        help="git revision of the baseline workload code (default HEAD); each side runs in a "
        "process of its own, the base in a temporary worktree",
    )
    gate.add_argument("--device", default="auto")
    # One name for the time a case may take, as on `run`: --max-time (--budget still accepted).
    gate.add_argument(
        "--max-time",
        "--budget",
        dest="budget",
        metavar="SECONDS",
        type=_positive_float("--max-time"),
        default=15.0,
        help="seconds per case (default 15)",
    )
    gate.add_argument(
        "--threshold",
        type=_nonnegative_float("--threshold"),
        default=0.01,
        help="smallest slowdown that counts, as a fraction (default 0.01: two builds of the same "
        "code can differ by about 1%% through memory placement alone)",
    )
    gate.add_argument(
        "--fdr",
        type=_fraction("--fdr", 0.5),  # a one-sided test at 0.5 or more says nothing
        default=0.01,
        help="false alarms per unchanged case, held across the sequential looks and, by "
        "Benjamini-Hochberg, across cases (default 0.01)",
    )
    gate.add_argument(
        "--threads",
        type=_count("--threads"),
        default=None,
        metavar="N",
        help="torch threads while gating (default 1 on the CPU, as `run`: two or more stall at "
        "every barrier when another process is busy; torch's own on CUDA)",
    )
    gate.add_argument(
        "--builds",
        type=_whole("--builds", 1, MAX_BUILDS),
        default=None,
        metavar="K",
        help="processes of each side in each of the gate's rounds (default 1; each round's processes "
        "are fresh and count once in the interval); with --slowdown or --learn-floor, builds of each "
        "side the pairs rotate through (default 3)",
    )
    gate.add_argument(
        "--heap",
        choices=("steady", "default"),
        default="steady",
        help="steady (default): glibc's malloc keeps freed memory, and the builds run until no "
        "page faults before the budget (cuts the pair noise ~4x on CPU); default: leave "
        "malloc as it is",
    )
    gate.add_argument(
        "--floors",
        type=Path,
        default=Path(".perfsuite") / "noise-floors.json",
        help="noise floors per case, learned with --learn-floor",
    )
    gate.add_argument(
        "--learn-floor",
        type=_whole("--learn-floor", 0),
        default=0,
        metavar="RUNS",
        help="instead of gating, learn each case's noise floor from RUNS runs of the current code",
    )
    gate.add_argument(
        "--slowdown",
        type=_fraction("--slowdown"),
        default=None,
        help="self-check: gate current code against itself slowed by this fraction, --trials times",
    )
    gate.add_argument("--trials", type=_count("--trials"), default=10)
    gate.add_argument(
        "--undecided",
        choices=verdict.UNDECIDED_EXITS,
        default="report",
        help="what a case the pairs could not decide ends in: report (exit 5, the default), pass "
        "(exit 0: only a confirmed slowdown fails) or fail (exit 1: only same or faster passes)",
    )
    gate.add_argument("--json", type=Path, help="write the verdicts as JSON (must not exist)")
    workloads_from_option(gate)

    bisect_and_why(sub)
    history_parser(sub)

    pr = sub.add_parser("pair", help="two values of one parameter, interleaved: time ratio with CI, saved-memory ratio")
    pr.add_argument("workload")
    pr.add_argument("--vary", required=True, metavar="KEY=A,B", help="e.g. impl=custom,builtin")
    pr.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE[,VALUE...]")
    pr.add_argument("--device", default="auto")
    pr.add_argument(
        "--max-time",
        "--budget",
        dest="budget",
        metavar="SECONDS",
        type=_positive_float("--max-time"),
        default=5.0,
        help="seconds per case (default 5)",
    )
    pr.add_argument("--out", type=Path, help="JSON file to write (must not exist)")

    roof = sub.add_parser("roofline", help="roofline from an Nsight Compute CSV, or this CPU's from stored records")
    roof.add_argument("csv", type=Path, nargs="?", help="ncu --csv export (--page details or raw)")
    # Beyond an exaFLOP/s or a PB/s is no device's roof (1e308 TFLOP/s is no number in FLOP/s).
    roof.add_argument("--peak-compute", type=_positive_float("--peak-compute", 1e6), help="TFLOP/s")
    roof.add_argument("--peak-bw", type=_positive_float("--peak-bw", 1e6), help="GB/s")
    roof.add_argument("--device", help="take the peaks from a table of known GPUs")
    roof.add_argument("--label", default=None, help="chart title")
    roof.add_argument("--by-range", action="store_true", help="one marker per NVTX range instead of per launch")
    roof.add_argument("--out", type=Path, help="chart PNG (default reports/roofline/NAME.png)")
    roof.add_argument("--summary", type=Path, help="summary CSV (default beside the chart)")
    roof.add_argument("--records", type=Path, nargs="+", help="results files or folders: this CPU's roofline")
    roof.add_argument(
        "--record", type=Path, nargs="+", help="perfsuite results of the same step: executed vs model FLOPs and MFU"
    )

    ps = sub.add_parser("profile-step", help="mark one training step with NVTX for Nsight; print the nsys/ncu commands")
    ps.add_argument(
        "workload",
        help="a training workload's phases are marked inside the step; any other "
        "workload (yours included) gets the whole step as one range",
    )
    ps.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    ps.add_argument("--device", default="auto")
    ps.add_argument("--warmup-iters", type=_whole("--warmup-iters", 0, STEPS_AT_MOST), default=5)
    ps.add_argument(
        "--profile-iter",
        type=_whole("--profile-iter", 0, STEPS_AT_MOST),
        default=None,
        help="index of the marked step (default: right after warm-up)",
    )

    tr = sub.add_parser("trace", help="torch.profiler window of a workload: Chrome trace, top operators, time split")
    tr.add_argument("workload")
    tr.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    tr.add_argument("--device", default="auto")
    tr.add_argument("--wait", type=_whole("--wait", 0, STEPS_AT_MOST), default=1)
    tr.add_argument("--warmup", type=_whole("--warmup", 0, STEPS_AT_MOST), default=1)
    tr.add_argument(
        "--active", type=_whole("--active", 1, 10), default=2, help="profiled steps (keep it small: traces grow fast)"
    )
    tr.add_argument("--out-dir", type=Path, default=Path("reports") / "traces")

    rep = sub.add_parser("report", help="markdown report with plots from results files")
    rep.add_argument("results", type=Path, nargs="+")
    rep.add_argument("--out-dir", type=Path, default=Path("reports") / "latest")
    rep.add_argument("--amp", type=Path, action="append", default=[], help="`perfsuite amp --out` JSON to include")
    rep.add_argument("--pair", type=Path, action="append", default=[], help="`perfsuite pair --out` JSON to include")
    rep.add_argument(
        "--why",
        type=Path,
        action="append",
        default=[],
        help="`perfsuite why --json` JSON to include (also found among the results given)",
    )
    rep.add_argument(
        "--latency-bound",
        type=_positive_float("--latency-bound"),
        default=None,
        metavar="MS",
        help="qwen: the optimal batch size must keep p90 latency within this many ms",
    )

    chk = sub.add_parser(
        "check",
        help="run the workloads' correctness checks (gradcheck, AMP loss, resume, early stopping); exit 3 on a failure",
    )
    chk.add_argument(
        "workloads",
        nargs="*",
        metavar="WORKLOAD",
        help="default: inside a project with [tool.perfsuite] its workloads, elsewhere every workload",
    )
    chk.add_argument("--all", action="store_true", help="every workload, perfsuite's built-ins included")
    chk.add_argument("--device", default="cpu", help="cpu (default) | cuda | cuda:N | auto")

    exp = sub.add_parser("export", help="results as a tidy CSV/Parquet table, or TensorBoard event files")
    exp.add_argument("format", choices=("csv", "parquet", "tensorboard"))
    exp.add_argument("results", type=Path, nargs="+", help="results files or folders")
    exp.add_argument("--out", type=Path, help="csv/parquet: the file to write (must not exist)")
    exp.add_argument("--logdir", type=Path, help="tensorboard: the log directory (one run folder per case)")
    return p
