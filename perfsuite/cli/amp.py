"""`perfsuite amp`: one workload in two precisions, interleaved."""

from __future__ import annotations

import contextlib

from rich.text import Text

from perfsuite.cli import options, values
from perfsuite.compare.amp import Amp
from perfsuite.core import registry
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.params import single_values
from perfsuite.core.units import fmt_bytes, fmt_seconds
from perfsuite.run.execute import interrupted_exit
from perfsuite.stats.summary import median
from perfsuite.storage.folder import folder_of

NAME = "amp"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    amp = sub.add_parser(NAME, help="two precisions of a training workload, interleaved: speed-up, memory, loss")
    amp.add_argument("workload", help="a training workload (one that declares a trainer: resnet, autoencoder)")
    options.params(amp)
    options.device(amp)
    amp.add_argument("--precisions", default="fp32,bf16", help="A,B (default fp32,bf16)")
    amp.add_argument(
        "--pairs",
        type=values.whole("--pairs", 2),
        default=20,
        help="interleaved A/B block pairs, at most (default 20)",
    )
    amp.add_argument(
        "--max-time",
        type=values.positive_float("--max-time"),
        default=20.0,
        help="seconds for warm-up and the interleaved pairs (at least 2 pairs; default 20)",
    )
    amp.add_argument(
        "--steps", type=values.whole("--steps", 5), default=30, help="training steps of the loss check (default 30)"
    )
    amp.add_argument(
        "--loss-tol",
        type=values.positive_float("--loss-tol"),
        default=0.02,
        help="the least trajectory distance allowed between the precisions' losses, whatever runs of A "
        "from weights perturbed by B's rounding show (default 0.02)",
    )
    options.json_out(amp, "--out", "write the comparison as JSON (must not exist)")


def command(args, console, recorder) -> int:
    from perfsuite.core.config import RunConfig, resolve_device
    from perfsuite.run.execute import Case, Events, check_cases, run_cases

    workload = registry.get(args.workload)
    if workload.trainer is None:  # the comparison trains from the workload's declared trainer
        trainers = ", ".join(n for n in registry.names() if registry.get(n).trainer is not None)
        raise PerfsuiteError(f"amp compares training workloads ({trainers}); {workload.name!r} is not one")
    given = single_values(args.param, workload)  # one case: a value list is an error, not silently cut
    if "precision" in given:
        raise PerfsuiteError("set the two precisions with --precisions A,B, not -p precision=")
    precisions = args.precisions.split(",")
    if len(precisions) != 2 or any(p not in ("fp32", "bf16", "fp16") for p in precisions):
        raise PerfsuiteError(f"--precisions expects two of fp32, bf16, fp16, got {args.precisions!r}")
    if precisions[0] == precisions[1]:
        raise PerfsuiteError(f"--precisions {args.precisions}: compares {precisions[0]} with itself; name two")
    if args.pairs < 2 or args.steps < 5:
        raise PerfsuiteError("--pairs must be >= 2 and --steps >= 5")
    device = resolve_device(args.device)
    case = Case(workload, given)
    measure = Amp(precisions[0], precisions[1], pairs=args.pairs, steps=args.steps, loss_tolerance=args.loss_tol)
    checked = check_cases([case], device, measure).runnable()
    held = contextlib.ExitStack()  # the --out file claimed before measuring; removed if it stays empty
    writer = None
    if args.out is not None:
        folder, name = held.enter_context(folder_of(args.out))
        writer = folder.document(name, "amp")
    console.print(
        f"{workload.name} {given or ''} on {device}: {precisions[0]} vs {precisions[1]}, "
        f"up to {args.pairs} interleaved pairs in {args.max_time:g}s, {args.steps}-step loss check",
        highlight=False,
    )

    class Show(Events):
        def done(self, case, res) -> None:
            console.print(
                Text(
                    f"  step time: {fmt_seconds(median(res.time_a_s))} ({res.precision_a}) vs "
                    f"{fmt_seconds(median(res.time_b_s))} ({res.precision_b})"
                )
            )
            console.print(
                Text(
                    f"  saved for backward: {fmt_bytes(res.saved_bytes_a)} vs "
                    f"{fmt_bytes(res.saved_bytes_b)} (ratio {res.memory_ratio:.2f})"
                )
            )
            console.print(Text("  " + res.verdict(), style="green" if res.accuracy_ok else "bold red"))
            if line := res.bound_line():
                console.print(Text("  where the time went: " + line))

        def failed(self, case, failure) -> None:
            console.print(Text(f"failed: {case.label}: {failure['error']}", style="red"))

    with held:
        out = run_cases(
            checked,
            RunConfig(device=device, max_time=args.max_time),
            outputs=(writer, recorder),
            events=Show(),
        )
    if out.interrupted:
        return interrupted_exit(out.interrupted)
    # A comparison that failed, or whose accuracy check failed: a failed case, not a slowdown.
    return 0 if out.records and all(r.accuracy_ok for r in out.records) else 3
