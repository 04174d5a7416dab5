"""perfsuite: a benchmarking harness for deep-learning workloads.

The public API, for benchmarking your own model (docs/adding-a-workload.md):

    @perfsuite.workload(params={"batch_size": [32, 128]})
    def my_step(batch_size: int, device: str):
        ...
        return perfsuite.Step(step, items=batch_size, unit="samples")

measuring one step now, from a script or a notebook:

    record = perfsuite.measure(step)          # a callable, a Step, a workload or its name
    print(record)                             # median, 95% CI, spread, throughput

and reading results back: `perfsuite.load(*paths)` -> list of `perfsuite.Record`;
`perfsuite.table(*sources)` -> a tidy pandas DataFrame, one row per record (results files,
folders, `store:` sources).
"""

from __future__ import annotations

from perfsuite.core.errors import ConfigError
from perfsuite.core.record import Record, Work
from perfsuite.run.now import StepFailed, measure
from perfsuite.storage.files import load_many
from perfsuite.storage.table import load as _table
from perfsuite.user.declare import Step, param, workload

__version__ = "0.1.0"
__all__ = ["Record", "Step", "StepFailed", "Work", "__version__", "load", "measure", "param", "table", "workload"]


def load(*paths) -> list[Record]:
    """Records from results files and folders (perfsuite's own, pytest-benchmark's, asv's) and
    `store:` sources. A file that cannot be read raises perfsuite.core.errors.ConfigError naming it."""
    records, problems = load_many([str(p) for p in paths])
    if problems:
        raise ConfigError("; ".join(problems))
    return records


def table(*sources, skipped: list[str] | None = None):
    """Every record of `sources` (results files and folders, `store:` sources such as
    `store:main` or `store:workload=resnet,since=2026-11-01`) as a tidy pandas DataFrame, one row
    per record: workload, parameters, device, median and interval, throughput, memory, commit.
    A source that cannot be read raises, unless `skipped` is a list its problems are added to."""
    return _table([str(s) for s in sources], skipped)
