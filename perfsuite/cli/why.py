"""`perfsuite why`: which operators changed between two sides, as a console table (and JSON)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from perfsuite.cli import options
from perfsuite.compare.why_rows import ROW_CONFIDENCE
from perfsuite.compare.why_sides import why_revision, why_vary
from perfsuite.core import registry
from perfsuite.core.case import Case
from perfsuite.core.errors import ConfigError
from perfsuite.core.params import parse_assignments, single_values
from perfsuite.core.text import printable
from perfsuite.core.units import fmt_bytes, fmt_seconds
from perfsuite.run.execute import check_cases
from perfsuite.storage.files import document
from perfsuite.storage.folder import Reserved

NAME = "why"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    wy = sub.add_parser(
        NAME,
        help="which operators changed between two sides: a differential torch.profiler "
        "table, sorted by their share of the step-time difference, and peak memory",
    )
    wy.add_argument("workload")
    side = wy.add_mutually_exclusive_group(required=True)
    side.add_argument(
        "--base", dest="base_ref", metavar="REV", help="the workload at REV (A) against the working tree (B)"
    )
    side.add_argument("--vary", metavar="KEY=A,B", help="two values of one parameter, e.g. impl=custom,builtin")
    options.params(wy)
    options.device(wy)
    options.threads(wy)
    options.json_out(wy, help="write the comparison as JSON (must not exist)")
    options.workloads_from(wy)
    options.variant(wy)
    options.why(wy)


def command(args, console, recorder) -> int:
    from perfsuite.core.config import RunConfig, resolve_device

    w = registry.get(args.workload)
    params = single_values(args.param, w)
    if args.json is not None:  # checked before profiling: a finished comparison is not thrown away
        json_out = Reserved(args.json, "--json")
    device = resolve_device(args.device)
    if args.variant is not None:  # an unknown name, or one this device cannot run: refused before any side starts
        from perfsuite.variants.catalog import runnable

        runnable(args.variant, device)
    kw = dict(
        threads=RunConfig(threads=args.threads).threads_on(device),
        steps=args.steps,
        rounds=args.rounds,
        top=args.top,
        variant=args.variant,
    )
    if args.vary is not None:
        ((key, values),) = parse_assignments([args.vary], w.params, w.name).items()
        if len(values) != 2:
            raise ConfigError(f"--vary expects exactly two values of {key!r}, got {len(values)}")
        if key in params:
            raise ConfigError(f"parameter {key!r} is given both by --vary and -p")
        check_cases([Case(w, {**params, key: v}) for v in values], device).runnable()
        with console.status(f"{w.name}: two side processes, {args.rounds} profiler windows each, then timed pairs"):
            result = why_vary(w, params, key, values[0], values[1], device, **kw)
    else:
        check_cases([Case(w, params)], device).runnable()
        with console.status(
            f"{w.name}: checking out {args.base_ref}, two side processes, {args.rounds} profiler "
            "windows each, then timed pairs"
        ):
            result = why_revision(w, params, args.base_ref, device, args.workloads_from, **kw)
    print_why(result, console)
    if recorder is not None:
        recorder.add_document("why", result.to_dict(), workload=w.name)
    if args.json is not None:
        json_out.write(document("why", [result.to_dict()]))
        console.print(Text(f"written to {args.json}"))
    return 0


def _us(x: float) -> str:
    return fmt_seconds(x * 1e-6)


def _signed_us(x: float) -> str:
    return ("+" if x >= 0 else "-") + _us(abs(x))


def _signed_bytes(x: float) -> str:
    return ("+" if x >= 0 else "-") + fmt_bytes(abs(x))


def print_why(r, console) -> None:
    """The differential profile: step times, the operators table, what it explains, memory."""
    a, b = r.a, r.b
    console.print(Text(printable(f"{r.workload} ({r.how}, {r.device}): A = {a.label}, B = {b.label}"), style="bold"))
    console.print(Text(r.step_summary()))
    console.print(Text(printable(f"kind of change: {r.kind_said()}")))
    what = "self CUDA time" if r.metric == "self_device_us" else "self CPU time"
    busy = [r.device_busy(side) for side in (a, b)]
    if all(x is not None for x in busy):
        what += f"; the GPU busy {busy[0]:.0%} of A's step, {busy[1]:.0%} of B's"
        if r.metric == "self_cpu_us":
            what += ": the host's time is the step's"
    t = Table(
        title=f"operators per step, those outside their own noise first, then by |B - A| ({what}; "
        f"{r.rounds} windows of {r.steps} steps per side; ± is the {ROW_CONFIDENCE:.0%} interval "
        "from the windows' spread)",
        title_justify="left",
    )
    for col in ("operator", "input shapes", "A", "B", "B - A", "±", "calls A/B", "alloc B - A", "", "noise"):
        t.add_column(col, justify="left" if col in ("operator", "input shapes", "", "noise") else "right")
    for row in r.listed:
        calls = f"{row.value(row.a, 'calls'):g}/{row.value(row.b, 'calls'):g}"
        noise = "" if row.noise_us is None else _us(row.noise_us)
        t.add_row(
            Text(printable(row.name)),
            Text(printable(row.shapes)),
            _us(row.value(row.a, r.metric)),
            _us(row.value(row.b, r.metric)),
            _signed_us(row.delta_us),
            noise,
            calls,
            _signed_bytes(row.delta_bytes) if row.delta_bytes else "",
            row.mark,
            "within" if row.within_noise else "",
            style="dim" if row.within_noise else None,
        )
    console.print(t)
    console.print(Text(r.reconciliation))
    mem = r.memory_delta_bytes
    key = "cuda_peak_delta_bytes" if r.device.startswith("cuda") else "host_peak_delta_bytes"
    where = "CUDA max allocated" if r.device.startswith("cuda") else "host RSS"
    if mem is not None and not a.memory[key] and not b.memory[key]:
        # Issue 50: "A 0 B; B 0 B" read as a broken reading; it is a step that allocates nothing new.
        console.print(Text(f"peak memory of a step ({where} above its start): no growth on either side "
                           "(a step that reuses the memory it already holds reads 0)"))  # fmt: skip
    elif mem is not None:
        console.print(
            Text(
                f"peak memory of a step ({where} above its start): A {fmt_bytes(a.memory[key])}; "
                f"B {fmt_bytes(b.memory[key])}; B - A {_signed_bytes(mem)}"
            )
        )
    grew = [f"{row.name} {row.shapes} {_signed_bytes(row.delta_bytes)}" for row in r.grew[:5]]
    if grew:
        console.print(Text("operators whose allocations grew: " + "; ".join(grew)))
    for note in r.notes + a.memory.get("warnings", []):
        console.print(Text(f"note: {note}", style="yellow"))
