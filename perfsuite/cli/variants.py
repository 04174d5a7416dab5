"""`perfsuite variants`: the arguments, one call of perfsuite.jobs.variants (each variant gated
against eager, interleaved in side processes, held to an accuracy floor), the table per case and
the line a user acts on.

Exit status: 0 when every variant asked for was measured or refused with its reason (a library
not installed, a device it does not run on); 3 when one failed (its build, export or step
raised, or its output had another shape or was not finite): the others are still measured and
kept; 2 for bad input before anything is measured (an unknown variant); 130 on Ctrl-C, with the
rows measured so far written."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from perfsuite.cli import options, values
from perfsuite.cli.console import make_console
from perfsuite.cli.events import GateEvents
from perfsuite.compare.settings import GateSettings
from perfsuite.core import registry
from perfsuite.core.config import resolve_device
from perfsuite.core.params import expand_sweep, parse_assignments
from perfsuite.core.text import printable
from perfsuite.jobs import variants as study
from perfsuite.measuring.system import pinned
from perfsuite.run.execute import interrupted_exit
from perfsuite.storage import write
from perfsuite.storage.files import document
from perfsuite.storage.folder import Reserved
from perfsuite.variants import fidelity
from perfsuite.variants.catalog import names

NAME = "variants"
NAMES_WORKLOADS = True
_STYLE = {"faster": "green", "slower": "red", "undecided": "yellow"}


def add_arguments(sub) -> None:
    p = sub.add_parser(
        NAME,
        help="measure variants of a workload's model (bf16, int8, compile, ONNX Runtime, OpenVINO...) "
        "against eager, interleaved, held to an accuracy floor",
    )
    p.add_argument("workload")
    options.params(p, sweep=True)
    p.add_argument(
        "--variants",
        required=True,
        metavar="NAME[,NAME...]",
        help="variants to gate against eager: " + ", ".join(names()) + " (compile:MODE picks torch.compile's "
        "mode), or one the workload file declares with @perfsuite.variant",
    )
    options.device(p)
    options.budget(p, 15.0, "seconds per variant and case (default 15)")
    options.threshold(p, "smallest speed-up or slowdown that counts, as a fraction (default 0.01)")
    options.fdr(p, "false verdicts per variant")
    options.threads(p, "torch threads in every side (default 1 on the CPU, as the gate's)")
    options.energy(p)
    p.add_argument(
        "--accuracy-floor",
        type=values.fraction("--accuracy-floor", 1.0000001),
        default=fidelity.FLOOR,
        help="the fraction of eager's top-1 agreement and metrics a variant must keep (default 0.99, as "
        "MLPerf's 99%% of the FP32 reference); a variant below it is never the one recommended",
    )
    options.json_out(p, help="write the studies as JSON (must not exist)")
    p.add_argument(
        "--charts",
        type=values.given_path("--charts"),  # "" would be the current folder
        metavar="DIR",
        help="a PNG per case in DIR: speed-up against the accuracy kept (the Pareto front marked), memory beside it",
    )


def command(args, console, recorder) -> int:
    json_out = Reserved(args.json, "--json") if args.json is not None else None
    charts = write.check_output_dir(args.charts, "--charts") if args.charts is not None else None
    w = registry.get(args.workload)
    # The workload's default sweep where -p does not say (as `run`: classify's batch sizes 1 and 64).
    cases = expand_sweep(w.default_sweep(parse_assignments(args.param, w.params, w.name)))
    asked = [v.strip() for v in args.variants.split(",") if v.strip()]
    names_ = study.checked_names(asked)  # an unknown variant: exit 2 before anything runs
    device = resolve_device(args.device)
    settings = GateSettings(args.budget, 1, args.threshold, args.fdr, args.threads, energy=args.energy).on(device)

    def said(row) -> None:
        console.print(Text(printable(_row_line(row)), style=_STYLE.get(row.word or "", "")))

    with console.status(f"{w.name}: {', '.join(names_)} against eager") as status, pinned(None, settings.threads):
        studies, interrupted = study.study(w, cases, names_, device, settings, args.accuracy_floor,
                                           events=GateEvents(console), on_row=said,
                                           progress=lambda text: status.update(Text(printable(text))))  # fmt: skip
    for s in studies:
        console.print(_table(s))
        console.print(Text(printable(s.closing), style="bold"))
    if recorder is not None:
        for s in studies:
            recorder.add_document("variants", s.to_dict(), workload=w.name)
    if json_out is not None:
        json_out.write(document("variants", [s.to_dict() for s in studies]))
    if charts is not None:
        from perfsuite.report.variants_chart import chart

        for s in studies:
            console.print(Text(f"chart: {chart(s, charts)}"))
    if interrupted is not None:
        return interrupted_exit(interrupted)
    if any(r.status == "failed" for s in studies for r in s.rows):
        return 3
    if not any(r.status == "measured" for s in studies for r in s.rows):
        # every variant refused (fp16 on a CPU, a model-level one on a step without model=): no
        # answer was measured, and exit 0 would let a script take "keep eager" as one
        err = make_console(stderr=True)
        err.print(
            Text("error: ", style="bold red")
            + Text("no variant could be measured on this step here; the reasons are above")
        )
        return 2
    return 0


def _row_line(row) -> str:
    if row.status != "measured":
        return f"{row.variant}: {row.status}: {(row.reason or '').strip().splitlines()[0][:300] if row.reason else ''}"
    lo, hi = row.speedup_interval or (0.0, 0.0)
    return f"{row.variant}: {row.word}, {row.speedup:.2f}x ({lo:.2f}-{hi:.2f}) against eager" + (
        f"; below the floor: {'; '.join(row.below)}" if row.below else ""
    )


def _table(s) -> Table:
    from perfsuite.report.variants_section import COLUMNS, cells

    case = ", ".join(f"{k}={v}" for k, v in s.params.items())
    t = Table(title=f"{s.workload} [{case}] on {s.device}: variants against eager (floor {s.floor:.0%})")
    for col in COLUMNS:
        t.add_column(col.replace("items", s.items_unit))
    for r in [*([s.eager] if s.eager is not None else []), *s.rows]:
        t.add_row(*(Text(printable(c)) for c in cells(r, no="NO")))
    return t
