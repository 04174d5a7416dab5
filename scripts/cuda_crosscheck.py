"""Independent CUDA-event timing of a few cases, against perfsuite's runner on the same steps.

The loop here shares no timing code with perfsuite: plain `torch.cuda.Event`s around blocks of
`--block` steps, the cases' blocks alternating round by round (case A, B, C, A, B, C, ...) so
that drift over the run spreads evenly, after `--warmup` untimed steps each; the per-step
median over the blocks is the loop's figure. The steps themselves come from perfsuite's
workload builders, so both sides time exactly the same work. Then `perfsuite.measuring.runner.time_case`
measures each case with its own budget, and a table compares the two medians.

    python scripts/cuda_crosscheck.py [--cases NAME ...] [--rounds 15] [--block 20] [--max-time 3]

Cases: matmul 4096/8192 in fp32/bf16 and the ResNet18 batch-128 fp32 training step (eager and
captured as a CUDA graph). It is a report: it exits 0 whatever it finds, and without CUDA it
says that it needs CUDA and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing perfsuite
    sys.path.insert(0, str(ROOT))

# name -> (workload, params)
CASES: dict[str, tuple[str, dict]] = {
    "matmul-4096-fp32": ("matmul", {"n": 4096, "dtype": "fp32"}),
    "matmul-4096-bf16": ("matmul", {"n": 4096, "dtype": "bf16"}),
    "matmul-8192-fp32": ("matmul", {"n": 8192, "dtype": "fp32"}),
    "matmul-8192-bf16": ("matmul", {"n": 8192, "dtype": "bf16"}),
    "resnet18-b128-fp32": ("resnet", {"size": "gpu", "model": "resnet18", "batch_size": 128, "precision": "fp32"}),
    "resnet18-b128-fp32-graph": (
        "resnet",
        {"size": "gpu", "model": "resnet18", "batch_size": 128, "precision": "fp32", "cuda_graph": True},
    ),
}
TOLERANCE = 0.02


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--cases",
        nargs="+",
        default=list(CASES),
        metavar="NAME",
        help=f"cases to run (default all): {', '.join(CASES)}",
    )
    p.add_argument("--rounds", type=int, default=15, help="timed blocks per case (default 15: 300 steps at --block 20)")
    p.add_argument("--block", type=int, default=20, help="steps per timed block (default 20)")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps per case first (default 10)")
    p.add_argument("--max-time", type=float, default=3.0, help="perfsuite's budget per case, seconds (default 3)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help="relative agreement asked for (default 0.02)")
    p.add_argument("--device", default="cuda:0")
    args = p.parse_args(argv)
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        p.error(f"unknown case {unknown[0]!r}; known: {', '.join(CASES)}")
    for name in ("rounds", "block"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if args.warmup < 0 or args.max_time <= 0 or args.tolerance <= 0:
        p.error("--warmup must be >= 0, --max-time and --tolerance > 0")
    return args


def interleaved_medians(
    steps: dict[str, Callable[[], object]],
    rounds: int,
    block: int,
    time_block: Callable[[Callable[[], object], int], float],
) -> dict[str, list[float]]:
    """Per-step seconds of every block, the cases alternating within each round."""
    per_step: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            per_step[name].append(time_block(fn, block) / block)
    return per_step


def event_block(fn: Callable[[], object], n: int) -> float:
    """Seconds of device time for `n` calls of `fn`, from two CUDA events on the current stream."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def compare_row(
    name: str,
    loop_s: float | None,
    perfsuite_s: float | None,
    tolerance: float = TOLERANCE,
    loop_iqr: float | None = None,
    note: str = "",
) -> dict:
    ratio = perfsuite_s / loop_s if loop_s and perfsuite_s else None
    within = None if ratio is None else abs(ratio - 1.0) <= tolerance
    return {
        "case": name,
        "loop_s": loop_s,
        "perfsuite_s": perfsuite_s,
        "ratio": ratio,
        "within": within,
        "loop_iqr": loop_iqr,
        "note": note,
    }


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.3f} ms"


def format_table(rows: list[dict], tolerance: float = TOLERANCE) -> str:
    head = ("case", "loop median", "perfsuite median", "ratio", f"within {tolerance:.0%}", "loop IQR/med", "note")
    body = [
        (
            r["case"],
            _ms(r["loop_s"]),
            _ms(r["perfsuite_s"]),
            "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
            "-" if r["within"] is None else ("yes" if r["within"] else "no"),
            "-" if r.get("loop_iqr") is None else f"{r['loop_iqr']:.1%}",
            r.get("note", ""),
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(b) for b in body])


def _iqr_fraction(xs: list[float]) -> float | None:
    if len(xs) < 4:
        return None
    q = statistics.quantiles(xs, n=4)
    return (q[2] - q[0]) / statistics.median(xs)


def on_device(device: str):
    """`torch.cuda.device(N)` for "cuda:N": the events, `synchronize()` and `empty_cache()` here
    and the runner's own clocks act on the *current* device, which stays 0 otherwise. A CPU
    device (the tests) changes nothing."""
    import contextlib

    import torch

    if torch.device(device).type != "cuda":
        return contextlib.nullcontext()
    return torch.cuda.device(torch.device(device))


def run(args: argparse.Namespace) -> list[dict]:
    with on_device(args.device):
        return _run(args)


def _run(args: argparse.Namespace) -> list[dict]:
    import torch

    from perfsuite.core import registry
    from perfsuite.core.config import RunConfig
    from perfsuite.measuring.runner import time_case

    names = list(dict.fromkeys(args.cases))
    built, notes = {}, {}
    for name in names:
        workload, params = CASES[name]
        w = registry.get(workload)
        try:
            w.validate_case(params, args.device)
            torch.manual_seed(0)
            built[name] = w.build(params, args.device)
        except Exception as exc:  # noqa: BLE001 - a refused or broken case is a row, not the end of the report
            notes[name] = f"not built: {type(exc).__name__}: {exc}"
    steps = {name: b.fn for name, b in built.items()}
    for fn in steps.values():
        for _ in range(args.warmup):
            fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    loop = interleaved_medians(steps, args.rounds, args.block, event_block)
    print(
        f"loop: {args.rounds} rounds x {len(steps)} cases x {args.block} steps in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    for b in built.values():
        if b.teardown is not None:
            b.teardown()
    del built, steps
    torch.cuda.empty_cache()

    rows = []
    for name in names:
        workload, params = CASES[name]
        ps = None
        if name not in notes:
            try:
                rec = time_case(
                    registry.get(workload), dict(params), RunConfig(device=args.device, max_time=args.max_time)
                )
                ps = rec.median_s
                if not rec.converged:
                    notes[name] = "perfsuite: not converged"
            except Exception as exc:  # noqa: BLE001 - a failed case is a row of the report
                notes[name] = f"perfsuite failed: {type(exc).__name__}: {exc}"
        samples = loop.get(name, [])
        rows.append(
            compare_row(
                name,
                statistics.median(samples) if samples else None,
                ps,
                args.tolerance,
                _iqr_fraction(samples),
                notes.get(name, ""),
            )
        )
        print(f"{name}: loop {_ms(rows[-1]['loop_s'])}, perfsuite {_ms(ps)}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import torch
    except ImportError as exc:
        print(f"cuda_crosscheck needs torch with CUDA: {exc}")
        return 0
    if not torch.cuda.is_available():
        print(f"cuda_crosscheck needs CUDA: no CUDA device here (torch {torch.__version__}); nothing measured")
        return 0
    print(
        f"cuda_crosscheck: {torch.cuda.get_device_name(args.device)}, torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}; loop: {args.warmup} warm-up steps, {args.rounds} blocks of {args.block} "
        f"per case (alternating); perfsuite: time_case with max_time {args.max_time:g} s",
        flush=True,
    )
    try:
        rows = run(args)
    except Exception:  # noqa: BLE001 - a report: say what broke, exit 0
        traceback.print_exc()
        print("cuda_crosscheck: stopped by the error above")
        return 0
    print()
    print(format_table(rows, args.tolerance))
    return 0


if __name__ == "__main__":
    sys.exit(main())
