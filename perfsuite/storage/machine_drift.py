"""How far this machine's speed moves between runs, learned from the runs made on it (issue 26).

A run's own interval comes from its processes and builds, which share the machine's state of
those few seconds; a run minutes later meets another state (on the 2-core VM of 2026-11-26 the
same step's run medians spread with a CV of 7-15% while each run's processes agreed within 1-2%).
No run can see that in itself, but every CPU run times the machine-speed reference
(perfsuite.measuring.reference), and how far the reference's medians of the last runs on this
machine spread is how far the machine moved between them. `perfsuite run` (a suite's cases
included) and the pytest front-end keep one line per run in one log, `default_log()`:
$PERFSUITE_MACHINE_LOG, or ~/.cache/perfsuite/machine-speed.jsonl, and add that spread to the run's
reported interval (Record.stats), so that the interval says where the next run will land. The asv
classes do not: asv stores medians only, no interval, and `asv run` over a range of commits would
teach the log the steps' differences (the reference moves with the step beside it) as drift.

Only runs alike count: the same case, reference kernel, device, torch threads and host (the
reference's time depends a little on the step beside it, through the caches: 52-89 us beside a
256x256 matmul, 67-88 us beside ResNet18 on this VM); at most the last `KEEP` of them, none older
than `MAX_AGE_S`: a machine's noise changes from day to day.
With fewer than MIN_RUNS alike runs nothing is learned and RunConfig.run_drift stands alone.
"""

from __future__ import annotations

import json
import math
import os
import stat
import time
from pathlib import Path
from typing import Any

from perfsuite.core.errors import PerfsuiteError, StorageError
from perfsuite.core.record import Record
from perfsuite.stats import summary as stats

ENV_VAR = "PERFSUITE_MACHINE_LOG"  # a path, or "none" to keep no log (the CLI's --machine-log beats it)
KEEP = 20
MAX_AGE_S = 24 * 3600.0
MIN_RUNS = stats.MIN_RUNS_FOR_DRIFT
MAX_LINES = 2000  # the log is rewritten to its last lines past this


def default_log() -> Path | None:
    """The machine-speed log of this user on this machine, read when asked (a test, or asv's
    environment, may set the variable after import); None when $PERFSUITE_MACHINE_LOG is "none"."""
    value = os.environ.get(ENV_VAR, "").strip()
    if value.lower() == "none":
        return None
    # A relative path is taken from where it is read, once: workers get the absolute one.
    if value:
        return Path(value).expanduser().absolute()
    return Path.home() / ".cache" / "perfsuite" / "machine-speed.jsonl"


def run_key(record: Record) -> dict[str, Any] | None:
    ref = record.conditions.get("reference")
    if not ref:
        return None
    return {
        "case": record.label(),
        "kernel": ref["kernel"],
        "device": record.device,
        "threads": record.conditions.get("torch_threads"),
        "host": (record.env or {}).get("host"),
    }


# The log is read whole: past MAX_LINES it is rewritten to half, so a longer file is not ours.
MAX_LOG_BYTES = 2 * 2**20
# A reference median outside this range (seconds) is not a measurement: an edited or planted line.
_MEDIAN_RANGE = (1e-9, 1e4)


def _usable(e: Any) -> bool:
    """A line the drift may be learned from: its median a finite time in range, its time finite."""
    if not isinstance(e, dict):
        return False
    m, t = e.get("median_s"), e.get("time")
    return (
        isinstance(m, (int, float))
        and not isinstance(m, bool)
        and math.isfinite(m)
        and _MEDIAN_RANGE[0] <= m <= _MEDIAN_RANGE[1]
        and isinstance(t, (int, float))
        and not isinstance(t, bool)
        and math.isfinite(t)
    )


def _refuse_link(path: Path) -> None:
    """The log is never reached through a link: a planted one (dangling or not) would have
    perfsuite read or append to a file the user never named (issue 51)."""
    if path.is_symlink():
        raise StorageError(f"{path} is a symbolic link")


def read_log(path: Path) -> list[dict[str, Any]]:
    """The log's entries, through the one door files come in by (perfsuite.storage.read: a regular
    file of bounded size, never a FIFO or device); lines that do not parse or hold no usable
    numbers (a torn write, an edit, a non-UTF-8 byte) are passed over."""
    from perfsuite.storage.read import read_bytes

    _refuse_link(path)
    if not path.exists():
        return []
    data = read_bytes(path, StorageError, MAX_LOG_BYTES)
    entries = []
    for raw in data.splitlines():
        try:
            e = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            continue
        if _usable(e):
            entries.append(e)
    return entries


def _append(path: Path, line: str) -> None:
    """One line added to the log: never through a link, never to anything but a regular file (a
    FIFO would block, /dev/full fail), created when missing."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StorageError(f"{path} is not a regular file")
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def learned(entries: list[dict[str, Any]], key: dict[str, Any], now: float) -> dict[str, Any] | None:
    """The drift between alike runs as a 95% half-width (stats.drift_halfwidth of their reference
    medians), from the last KEEP alike runs younger than MAX_AGE_S; None below MIN_RUNS."""
    alike = [e for e in entries if all(e.get(k) == v for k, v in key.items()) and now - e["time"] <= MAX_AGE_S]
    alike = alike[-KEEP:]
    if len(alike) < MIN_RUNS:
        return None
    return {
        "half_width": stats.drift_halfwidth([e["median_s"] for e in alike]),
        "runs": len(alike),
        "hours": (now - alike[0]["time"]) / 3600.0,
    }


def note_run(record: Record, path: Path, now: float | None = None) -> Record:
    """Add `record`'s reference median to the log at `path` and return the record with
    `conditions["machine_drift"]` learned from the log (this run included), when it can be. A log
    that cannot be read or written costs the record its learning, with a warning, never the record."""
    from dataclasses import replace

    key = run_key(record)
    if key is None:
        return record
    now = time.time() if now is None else now
    entry = {**key, "time": now, "median_s": record.conditions["reference"]["median_s"]}
    try:
        entries = read_log(path) + [entry]
        path.parent.mkdir(parents=True, exist_ok=True)
        if len(entries) > MAX_LINES:
            from perfsuite.storage.files import atomic_write_text

            atomic_write_text(path, "".join(json.dumps(e) + "\n" for e in entries[-MAX_LINES // 2 :]))
        else:
            _append(path, json.dumps(entry) + "\n")  # one short line per run: an append, not a rewrite
    except (OSError, PerfsuiteError) as exc:
        return replace(
            record,
            warnings=(
                *record.warnings,
                f"machine-speed log {path} not used ({exc}): the "
                "interval does not include the drift between this machine's runs",
            ),
        )
    try:
        drift = learned(entries, key, now)
    except (ArithmeticError, ValueError):  # numbers no run made: the learning is lost, not the record
        drift = None
    if drift is None or not math.isfinite(drift["half_width"]):
        return record
    return replace(record, conditions={**record.conditions, "machine_drift": drift})
