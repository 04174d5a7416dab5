"""The option groups commands share, declared once, and validators whose messages name the flag.

Each command module declares its own arguments (`add_arguments(subparsers)`) from these; the
parser is assembled from the commands (perfsuite.cli.parser)."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfsuite.cli.values import count, fraction, nonnegative_float, positive_float, whole
from perfsuite.core.config import MAX_BUILDS, RunConfig

# Steps run before or around a profiled one (trace --wait/--warmup, profile-step): more is a typo
# that would keep the command busy for hours.
STEPS_AT_MOST = 1000

# Noise floors per case, learned with `gate --learn-floor`, read by compare, gate and history.
DEFAULT_FLOORS = Path(".perfsuite") / "noise-floors.json"

THREADS_HELP = "torch threads in the sides (default 1 on the CPU, as `run`; torch's own on CUDA)"


def params(sp: argparse.ArgumentParser, sweep: bool = False) -> None:
    """-p KEY=VALUE, repeatable; `sweep`: a value list sweeps."""
    sp.add_argument(
        "-p", "--param", action="append", default=[], metavar="KEY=VALUE[,VALUE...]" if sweep else "KEY=VALUE"
    )


def device(sp: argparse.ArgumentParser, default: str = "auto", help: str | None = None) -> None:
    sp.add_argument("--device", default=default, help=help)


def budget(sp: argparse.ArgumentParser, default: float, help: str) -> None:
    """--max-time SECONDS per case, pair or probe (--budget still accepted), as `run`'s."""
    sp.add_argument(
        "--max-time",
        "--budget",
        dest="budget",
        metavar="SECONDS",
        type=positive_float("--max-time"),
        default=default,
        help=help,
    )


def threshold(
    sp: argparse.ArgumentParser,
    help: str = "smallest slowdown that counts, as the gate's (default 0.01)",
    default: float | None = 0.01,
):
    sp.add_argument("--threshold", type=nonnegative_float("--threshold"), default=default, help=help)


def threads(sp: argparse.ArgumentParser, help: str = THREADS_HELP) -> None:
    sp.add_argument("--threads", type=count("--threads"), default=None, metavar="N", help=help)


def heap(sp: argparse.ArgumentParser, default: str | None = "steady", help: str = "as the gate's (default steady)"):
    choices = ("steady", "default") if default == "steady" else ("default", "steady")
    sp.add_argument("--heap", choices=choices, default=default, help=help)


def energy(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--energy",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also pair joules per step, after the timed pairs: 6 pairs of 1 s regions a side between "
        "readings of the energy counter (NVML's on a GPU, RAPL's on the CPU; about 12 s a case); "
        "default: gate and variants on CUDA; history and bisect only when asked (each probe would pay it)",
    )


def fdr(sp: argparse.ArgumentParser, help: str) -> None:
    sp.add_argument(
        "--fdr",
        type=fraction("--fdr", 0.5),  # a one-sided test at 0.5 or more says nothing
        default=0.01,
        help=f"{help} (default 0.01)",
    )


def builds(sp: argparse.ArgumentParser, default: int | None, metavar: str, help: str) -> None:
    sp.add_argument("--builds", type=whole("--builds", 1, MAX_BUILDS), default=default, metavar=metavar, help=help)


def variant(sp: argparse.ArgumentParser) -> None:
    """--variant NAME: every side times that variant of the step (perfsuite.variants)."""
    sp.add_argument(
        "--variant",
        default=None,
        metavar="NAME",
        help="time this variant of the step on every side (int8-dynamic, onnxruntime, compile, ... as "
        "`perfsuite variants` names them): follows that deployment's path across commits",
    )


def sides(sp: argparse.ArgumentParser, fdr_help: str, rounds_of: str) -> None:
    """--fdr and --builds of a command that gates in rounds of side processes (bisect, history)."""
    fdr(sp, fdr_help)
    builds(sp, 1, "K", f"processes per side in each round{' ' + rounds_of if rounds_of else ''} (default 1)")


def floors(sp: argparse.ArgumentParser, help: str) -> None:
    sp.add_argument("--floors", type=Path, default=DEFAULT_FLOORS, help=help)


def workloads_from(sp: argparse.ArgumentParser) -> None:
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


def why(sp: argparse.ArgumentParser) -> None:
    """How `why` profiles two sides (why, and the profile bisect and history attach)."""
    sp.add_argument("--steps", type=count("--steps"), default=5, help="profiled steps per window (default 5)")
    sp.add_argument(
        "--rounds",
        type=count("--rounds"),
        default=4,
        help="profiler windows per side, alternating which side goes first (default 4)",
    )
    sp.add_argument("--top", type=count("--top"), default=20, help="operators listed (default 20)")


def measuring(sp: argparse.ArgumentParser) -> None:
    """How one case is measured in this process or its workers (`run`, `peak`)."""
    device(sp, help="auto | cpu | cuda | cuda:N (default auto)")
    sp.add_argument(
        "--max-time",
        type=positive_float("--max-time"),
        default=None,
        help="time budget per case in seconds, warm-up included (default 10)",
    )
    sp.add_argument(
        "--min-time",
        type=nonnegative_float("--min-time"),
        default=None,
        help="measure at least this long even once converged (default 0)",
    )
    sp.add_argument(
        "--target-ci",
        type=positive_float("--target-ci"),
        default=None,
        help="stop when the median's 95%% CI is within this fraction, once half the budget has passed (default 0.01)",
    )
    sp.add_argument(
        "--timing",
        choices=("event", "host"),
        default=None,
        help="CUDA only: device time from events, or host-inclusive sync + wall clock",
    )
    sp.add_argument("--no-nvtx", action="store_true", help="do not emit NVTX ranges")
    sp.add_argument(
        "--instructions",
        action="store_true",
        help="also count instructions per step under Callgrind (CPU; a child process after measuring, "
        "about 50 s a case): a count load does not move, which compare reads as more or the same work",
    )
    sp.add_argument(
        "--no-signature",
        action="store_true",
        help="do not take the work signature (the operators one step dispatches, after the timed blocks)",
    )


def run_config(args) -> RunConfig:
    """The RunConfig of the measuring options (`run`, `peak`)."""
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
    return RunConfig(
        device=args.device,
        nvtx=not args.no_nvtx,
        signature=not args.no_signature,
        instructions=args.instructions,
        **{k: v for k, v in given.items() if v is not None},
    )


def json_out(
    sp: argparse.ArgumentParser, flag: str = "--json", help: str = "write the result as JSON (must not exist)"
):
    sp.add_argument(flag, type=Path, help=help)
