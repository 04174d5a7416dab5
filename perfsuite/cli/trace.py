"""`perfsuite trace`: a torch.profiler window of a workload: Chrome trace, top operators, time split."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from perfsuite.cli import options, values
from perfsuite.cli.console import step_failed
from perfsuite.core import registry
from perfsuite.core.case import Case
from perfsuite.core.errors import USER_CODE_ERRORS, PerfsuiteError
from perfsuite.core.params import single_values
from perfsuite.core.text import slug
from perfsuite.profiling.step_marking import split_from_profile
from perfsuite.profiling.trace import check_trace_files, trace_window
from perfsuite.run.execute import check_cases
from perfsuite.storage.files import atomic_write_text, versioned, writable_dir
from perfsuite.training.setup import training_setup
from perfsuite.training.step import make_train_step

NAME = "trace"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    tr = sub.add_parser(NAME, help="torch.profiler window of a workload: Chrome trace, top operators, time split")
    tr.add_argument("workload")
    options.params(tr)
    options.device(tr)
    tr.add_argument("--wait", type=values.whole("--wait", 0, options.STEPS_AT_MOST), default=1)
    tr.add_argument("--warmup", type=values.whole("--warmup", 0, options.STEPS_AT_MOST), default=1)
    tr.add_argument(
        "--active",
        type=values.whole("--active", 1, 10),
        default=2,
        help="profiled steps (keep it small: traces grow fast)",
    )
    tr.add_argument("--out-dir", type=Path, default=Path("reports") / "traces")


def command(args, console, recorder) -> int:
    from torch.profiler import record_function

    from perfsuite.core.config import resolve_device

    w = registry.get(args.workload)
    params = single_values(args.param, w)
    writable_dir(args.out_dir, "--out-dir")  # checked before profiling: a trace is not thrown away
    if min(args.wait, args.warmup) < 0 or not 1 <= args.active <= 10:
        raise PerfsuiteError("--wait and --warmup must be >= 0, --active between 1 and 10")
    device = resolve_device(args.device)
    check_cases([Case(w, params)], device).runnable()
    label = f"{w.name}[{','.join(f'{k}={v}' for k, v in w.resolve(params).items())}]"
    check_trace_files(args.out_dir, label)
    try:
        if w.trainer is not None:  # a training workload: its phases are marked
            setup = training_setup(w.name, params, device)
            step = make_train_step(
                setup.parts, *setup.batch(0), forward=setup.forward, phase=lambda n: record_function(f"phase:{n}")
            )
        else:
            step = w.build(params, device).fn
        t = trace_window(step, args.out_dir, label, device, args.wait, args.warmup, args.active)
    except PerfsuiteError:
        raise
    except USER_CODE_ERRORS as exc:
        return step_failed(console, label, exc)
    trace, table = t.trace, t.table
    split = split_from_profile(t.profile, t.wall_s)
    split = {k: v / args.active for k, v in split.items()}  # per step
    atomic_write_text(args.out_dir / f"{slug(label)}.split.json", versioned("split", split))
    console.print(Text(f"trace {trace} ({trace.stat().st_size / 1e6:.1f} MB), top operators {table}"))
    if w.trainer is not None:  # a training workload: its phases are marked
        parts = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in split.items() if k != "wall")
        console.print(
            Text(
                f"per step ({split['wall'] * 1e3:.1f} ms wall): {parts} (data loading is 0: "
                "the step trains on a batch already on the device)"
            )
        )
    return 0
