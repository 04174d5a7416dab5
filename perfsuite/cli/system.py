"""`perfsuite system`: what could disturb measurements here."""

from __future__ import annotations

import json

from rich.text import Text

from perfsuite.cli import values
from perfsuite.measuring import fingerprint
from perfsuite.measuring.system import check, cpu_ranges

NAME = "system"


def add_arguments(sub) -> None:
    sy = sub.add_parser(
        NAME,
        help="what could disturb measurements here: governor, turbo, load, steal, busy processes, threads, affinity",
    )
    sy.add_argument(
        "--window",
        type=values.positive_float("--window"),
        default=1.0,
        help="seconds to watch steal and other processes (default 1)",
    )
    sy.add_argument("--json", action="store_true", help="readings and warnings as JSON")


def command(args, console, recorder) -> int:
    """`perfsuite system`: what can make numbers unstable here, watched for `--window` seconds."""
    readings: dict = {}
    for collect in (
        fingerprint.collect_cpu,
        fingerprint.collect_cpu_power,
        fingerprint.collect_load,
        fingerprint.collect_threads,
        fingerprint.collect_torch,
    ):
        readings.update(collect())
    readings.update(fingerprint.collect_activity(args.window))
    warnings = check(readings)
    if args.json:
        print(json.dumps({"readings": readings, "warnings": warnings}, indent=1))
        return 0
    affinity = readings.get("cpu_affinity")
    lines = [
        ("CPU", f"{readings['cpu_model']}, {readings['logical_cores']} logical"),
        ("affinity", cpu_ranges(affinity) if affinity else "not visible"),
        ("governor", ", ".join(readings["cpu_governors"] or ["not visible (no cpufreq in /sys)"])),
        ("turbo", {True: "on", False: "off", None: "not visible"}[readings["cpu_turbo"]]),
        ("load average", " ".join(f"{x:.2f}" for x in readings["load_avg"] or []) or "not visible"),
        (
            f"over {args.window:g}s",
            f"steal {readings['steal_fraction'] or 0:.1%}, other processes {readings['others_cpus'] or 0:.2f} CPU(s)",
        ),
        ("torch threads", f"{readings.get('torch_threads')} (interop {readings.get('torch_interop_threads')})"),
        ("thread variables", ", ".join(f"{k}={v}" for k, v in readings["thread_env"].items()) or "none set"),
    ]
    for p in readings["busy_processes"]:
        lines.append((f"busy pid {p['pid']}", f"{p['cpu']:.0%} of a CPU: {p['command'] or p['name']}"))
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        console.print(Text(f"{key:<{width}}  {value}"))
    for w in warnings:
        console.print(Text(f"warning: {w}", style="yellow"))
    if not warnings:
        console.print(Text("no warnings: nothing visible here should disturb a measurement", style="green"))
    return 0
