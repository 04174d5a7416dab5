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
import os
import time
from pathlib import Path
from typing import Any

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


def read_log(path: Path) -> list[dict[str, Any]]:
    """The log's entries; lines that do not parse (a torn write, an edit) are passed over."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    entries = []
    for line in text.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(e, dict)
            and isinstance(e.get("median_s"), (int, float))
            and e["median_s"] > 0
            and isinstance(e.get("time"), (int, float))
        ):
            entries.append(e)
    return entries


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
            with path.open("a") as f:  # one short line per run: an append, not a rewrite
                f.write(json.dumps(entry) + "\n")
    except OSError as exc:
        return replace(
            record,
            warnings=(
                *record.warnings,
                f"machine-speed log {path} not used ({exc}): the "
                "interval does not include the drift between this machine's runs",
            ),
        )
    drift = learned(entries, key, now)
    if drift is None:
        return record
    return replace(record, conditions={**record.conditions, "machine_drift": drift})
