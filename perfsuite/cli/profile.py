"""`perfsuite profile-step` (one NVTX-marked step for Nsight) and `perfsuite trace` (a torch.profiler window)."""

from __future__ import annotations

from rich.text import Text

from perfsuite.core import registry
from perfsuite.core.case import Case
from perfsuite.core.errors import USER_CODE_ERRORS, PerfsuiteError, exception_text
from perfsuite.core.params import single_values
from perfsuite.core.text import slug
from perfsuite.measuring.system import hide_credentials
from perfsuite.measuring.timing import synchronize
from perfsuite.profiling.step_marking import split_from_profile
from perfsuite.profiling.trace import check_trace_files, trace_window
from perfsuite.run.execute import runnable
from perfsuite.storage.files import atomic_write_text, versioned, writable_dir
from perfsuite.training.setup import training_setup
from perfsuite.training.step import make_train_step


def profile_step_command(args, console) -> int:
    import shlex

    from perfsuite.core.config import resolve_device
    from perfsuite.profiling.step_marking import nsight_commands, process_range

    w = registry.get(args.workload)
    params = single_values(args.param, w)
    device = resolve_device(args.device)
    runnable([Case(w, params)], device)
    k = args.warmup_iters if args.profile_iter is None else args.profile_iter
    if args.warmup_iters < 0 or k < args.warmup_iters:
        raise PerfsuiteError("--warmup-iters must be >= 0 and --profile-iter >= --warmup-iters")
    cuda = device.startswith("cuda")
    try:
        if w.trainer is not None:  # a training step: forward, loss, backward, optimizer_step marked inside it
            setup = training_setup(w.name, params, device)
            x, y = setup.batch(0)
            plain = make_train_step(setup.parts, x, y, forward=setup.forward)
            marked = make_train_step(setup.parts, x, y, forward=setup.forward, phase=lambda n: process_range(n, cuda))
        else:  # any other step (a user's): the whole step is the one range
            built = w.build(params, device)
            plain = marked = built.fn
        sync = lambda: synchronize(device)  # noqa: E731
        for _ in range(k):
            plain()
        sync()  # nothing from the warm-up steps may run inside the marked range
        with process_range("train_step", cuda):
            marked()
            sync()
    except PerfsuiteError:
        raise
    except USER_CODE_ERRORS as exc:
        return _step_failed(console, w.name, exc)
    given = getattr(args, "argv", None) or []
    argv = (  # a store URL's password is not printed back
        "python -m perfsuite " + hide_credentials(" ".join(shlex.quote(a) for a in given))
        if given
        else "python -m perfsuite profile-step ..."
    )
    if not cuda:
        console.print(
            Text(
                f"ran {k} warm-up steps and step {k} on {device}: Nsight Systems and Nsight Compute need a "
                "CUDA GPU, so no NVTX range was emitted here. On a GPU host:",
                style="yellow",
            )
        )
    else:
        inside = " > forward, loss, backward, optimizer_step" if w.trainer is not None else ""
        console.print(Text(f"marked step {k} (train_step{inside}) after {k} warm-up steps"))
    for line in nsight_commands(argv.replace("--device cpu", "--device cuda")):
        console.print(Text("  " + line), soft_wrap=True)  # unwrapped: a command to copy, not prose
    return 0


def trace_command(args, console) -> int:
    from torch.profiler import record_function

    from perfsuite.core.config import resolve_device

    w = registry.get(args.workload)
    params = single_values(args.param, w)
    writable_dir(args.out_dir, "--out-dir")  # checked before profiling: a trace is not thrown away
    if min(args.wait, args.warmup) < 0 or not 1 <= args.active <= 10:
        raise PerfsuiteError("--wait and --warmup must be >= 0, --active between 1 and 10")
    device = resolve_device(args.device)
    runnable([Case(w, params)], device)
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
        return _step_failed(console, label, exc)
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


# As `run`'s exit when a case failed (perfsuite.cli.app): the workload's step, not the input.
EXIT_FAILED = 3


def _step_failed(console, label: str, exc: BaseException) -> int:
    """The workload's build or step raised (sys.exit included): its message, escaped by the
    console, and exit 3, as a failed case of `run`."""
    console.print(Text(f"failed: {label}: {exception_text(exc)}", style="red"))
    return EXIT_FAILED
