"""perfsuite: a benchmarking harness for deep-learning workloads.

The public API, for benchmarking your own model (docs/adding-a-workload.md):

    @perfsuite.workload(params={"batch_size": [32, 128]})
    def my_step(batch_size: int, device: str):
        ...
        return perfsuite.Step(step, items=batch_size, unit="samples")

measuring one step now, from a script or a notebook:

    record = perfsuite.measure(step)          # a callable, a Step, a workload or its name
    print(record)                             # median, 95% CI, spread, throughput

a history of commits or a bisection, as the command line runs them (docs/history.md,
docs/bisect-and-why.md):

    run = perfsuite.history("my_step", "v1.0..main")   # -> perfsuite.jobs.history.HistoryRun
    run.state.regressions()                             # confirmed, with their operators
    found = perfsuite.bisect("my_step", good="v1.0", bad="main")   # -> BisectRun; found.answer
    verdicts = perfsuite.gate("my_step", base="main")             # -> GateRun; its outcome.records

and reading results back: `perfsuite.load(*paths)` -> list of `perfsuite.Record`;
`perfsuite.table(*sources)` -> a tidy pandas DataFrame, one row per record (results files,
folders, `store:` sources).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfsuite.compare.settings import GateSettings, WhyOptions
    from perfsuite.core.record import Record, Work
    from perfsuite.run.now import StepFailed, measure
    from perfsuite.user.declare import Step, param, workload
    from perfsuite.variants.catalog import variant

# Where each name of the API lives, imported when first used (PEP 562): `import perfsuite` alone
# costs nothing, so `perfsuite --help` and `perfsuite store info` do not wait for numpy, pydantic
# and SQLAlchemy, and the command line's entry (perfsuite.cli.entry) is running, and can answer
# Ctrl-C, before the heavy imports begin.
_LAZY = {
    "GateSettings": "perfsuite.compare.settings",
    "WhyOptions": "perfsuite.compare.settings",
    "Record": "perfsuite.core.record",
    "Work": "perfsuite.core.record",
    "StepFailed": "perfsuite.run.now",
    "measure": "perfsuite.run.now",
    "Step": "perfsuite.user.declare",
    "param": "perfsuite.user.declare",
    "workload": "perfsuite.user.declare",
    "variant": "perfsuite.variants.catalog",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'perfsuite' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: the next use is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"
__all__ = [
    "GateSettings",
    "Record",
    "Step",
    "StepFailed",
    "WhyOptions",
    "Work",
    "__version__",
    "bisect",
    "gate",
    "history",
    "load",
    "measure",
    "param",
    "table",
    "variant",
    "verdicts",
    "workload",
]


def load(*paths) -> list[Record]:
    """Records from results files and folders (perfsuite's own, pytest-benchmark's, asv's) and
    `store:` sources. A file that cannot be read raises perfsuite.core.errors.ConfigError naming it."""
    from perfsuite.core.errors import ConfigError
    from perfsuite.storage.files import load_many

    records, problems = load_many([str(p) for p in paths])
    if problems:
        raise ConfigError("; ".join(problems))
    return records


def table(*sources, skipped: list[str] | None = None):
    """Every record of `sources` (results files and folders, `store:` sources such as
    `store:main` or `store:workload=resnet,since=2026-11-01`) as a tidy pandas DataFrame, one row
    per record: workload, parameters, device, median and interval, throughput, memory, commit.
    A source that cannot be read raises, unless `skipped` is a list its problems are added to."""
    from perfsuite.storage.table import load as read

    return read([str(s) for s in sources], skipped)


def history(workload: str, range: str | None = None, **options):
    """Each first-parent commit of `range` ("A..B") against the one before it, in the repository
    `workload` is declared in: perfsuite.jobs.history.history (its keywords: params, device,
    settings=GateSettings(...), every, log, why=WhyOptions(...), listener, ...). Returns a
    HistoryRun: the history (`state`), its log and page, and `alarm` (a regression confirmed now)."""
    from perfsuite.jobs.history import history as run

    return run(workload, range, **options)


def gate(workload: str, base: str = "HEAD", **options):
    """Each case of `workload` at the revision `base` against the working tree, interleaved in rounds
    of fresh side processes: perfsuite.jobs.gate.gate (its keywords: cases, device,
    settings=GateSettings(...), floors, ...). Returns a GateRun: `outcome.records` holds one
    verdict per case (its word, ratio and interval)."""
    from perfsuite.jobs.gate import gate as run

    return run(workload, base, **options)


def verdicts(store: str | None = None, **options):
    """Every gate, history and bisect verdict in the results store (`store`: a location as --store
    takes it; None: the project's) as a pandas DataFrame, one row per verdict: its word, ratio,
    interval and kind of change (perfsuite.compare.verdict_table.verdicts; keywords kind, workload,
    since, skipped)."""
    from perfsuite.compare.verdict_table import verdicts as read

    return read(store, **options)


def bisect(workload: str, good: str, bad: str, **options):
    """The first commit after `good` up to `bad` that made `workload` slower (faster=True: faster):
    perfsuite.jobs.bisect.bisect (its keywords: params, device, settings=GateSettings(...), log,
    why=WhyOptions(...), listener, ...). Returns a BisectRun: its probes, answer and profile."""
    from perfsuite.jobs.bisect import bisect as run

    return run(workload, good, bad, **options)
