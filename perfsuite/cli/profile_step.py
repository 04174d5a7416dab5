"""`perfsuite profile-step`: one step marked with NVTX for Nsight, and the nsys/ncu commands to run."""

from __future__ import annotations

from rich.text import Text

from perfsuite.cli import options, values
from perfsuite.cli.console import step_failed
from perfsuite.core import registry
from perfsuite.core.case import Case
from perfsuite.core.errors import USER_CODE_ERRORS, PerfsuiteError
from perfsuite.core.params import single_values
from perfsuite.measuring.timing import synchronize
from perfsuite.run.execute import check_cases
from perfsuite.training.setup import training_setup
from perfsuite.training.step import compiled_forward, make_train_step

NAME = "profile-step"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    ps = sub.add_parser(NAME, help="mark one training step with NVTX for Nsight; print the nsys/ncu commands")
    ps.add_argument(
        "workload",
        help="a training workload's phases are marked inside the step; any other "
        "workload (yours included) gets the whole step as one range",
    )
    options.params(ps)
    options.device(ps)
    ps.add_argument("--warmup-iters", type=values.whole("--warmup-iters", 0, options.STEPS_AT_MOST), default=5)
    ps.add_argument(
        "--profile-iter",
        type=values.whole("--profile-iter", 0, options.STEPS_AT_MOST),
        default=None,
        help="index of the marked step (default: right after warm-up)",
    )


def command(args, console, recorder) -> int:

    from perfsuite.core.config import resolve_device
    from perfsuite.profiling.step_marking import nsight_commands, process_range

    w = registry.get(args.workload)
    params = single_values(args.param, w)
    device = resolve_device(args.device)
    check_cases([Case(w, params)], device).runnable()
    k = args.warmup_iters if args.profile_iter is None else args.profile_iter
    if args.warmup_iters < 0 or k < args.warmup_iters:
        raise PerfsuiteError("--warmup-iters must be >= 0 and --profile-iter >= --warmup-iters")
    cuda = device.startswith("cuda")
    resolved = w.resolve(params)
    # The step as it is measured (issue 54, item 7): a graph-replayed step is one captured graph,
    # so it is profiled as the workload builds it, whole; a compiled one keeps its phases marked
    # around the compiled forward (its backward runs compiled code inside "backward").
    replayed = bool(resolved.get("cuda_graph"))
    compiled = bool(resolved.get("compile"))
    teardown = None
    try:
        if w.trainer is not None and not replayed:  # forward, loss, backward, optimizer_step marked inside it
            setup = training_setup(w.name, params, device)
            x, y = setup.batch(0)
            forward = compiled_forward(setup.parts.model, resolved, device) if compiled else setup.forward
            plain = make_train_step(setup.parts, x, y, forward=forward)
            marked = make_train_step(setup.parts, x, y, forward=forward, phase=lambda n: process_range(n, cuda))
        else:  # any other step (a user's, a replayed graph): the whole step is the one range
            built = w.build(params, device)
            plain = marked = built.fn
            teardown = built.teardown
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
        return step_failed(console, w.name, exc)
    finally:
        if teardown is not None:
            teardown()
    how = "graph-replayed, " if replayed else "compiled, " if compiled else ""
    if not cuda:
        console.print(
            Text(
                f"ran {k} warm-up steps and {how}step {k} on {device}: Nsight Systems and Nsight Compute need a "
                "CUDA GPU, so no NVTX range was emitted here. On a GPU host:",
                style="yellow",
            )
        )
    else:
        inside = " > forward, loss, backward, optimizer_step" if w.trainer is not None and not replayed else ""
        console.print(Text(f"marked step {k} ({how}train_step{inside}) after {k} warm-up steps"))
    if replayed:
        console.print(
            Text("the step is one captured CUDA graph, replayed: its phases run inside it and are not marked apart")
        )
    for line in nsight_commands(_same_step_on_cuda(args, device if cuda else "cuda")):
        console.print(Text("  " + line), soft_wrap=True)  # unwrapped: a command to copy, not prose
    return 0


def _same_step_on_cuda(args, device: str) -> str:
    """The command that marks the same step on a GPU host, rebuilt from the parsed options (a
    store URL and its password are not among them; --device is the GPU's)."""
    import shlex

    words = [w for path in args.workload_paths for w in ("--workloads", str(path))]
    words += ["profile-step", args.workload, *[w for p in args.param or [] for w in ("-p", p)]]
    words += ["--warmup-iters", str(args.warmup_iters)]
    if args.profile_iter is not None:
        words += ["--profile-iter", str(args.profile_iter)]
    return "python -m perfsuite " + " ".join(shlex.quote(w) for w in [*words, "--device", device])
