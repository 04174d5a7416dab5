"""perfsuite: a benchmarking harness for deep-learning workloads.

The public API, for benchmarking your own model (docs/adding-a-workload.md):

    @perfsuite.workload(params={"batch_size": [32, 128]})
    def my_step(batch_size: int, device: str):
        ...
        return perfsuite.Step(step, items=batch_size, unit="samples")

and for reading results back: `perfsuite.load(paths)` -> list of `perfsuite.Record`.
"""

from __future__ import annotations

from perfsuite.core.record import Record, Work
from perfsuite.user.declare import Step, param, workload
from perfsuite.core.errors import ConfigError
from perfsuite.storage.files import load_many

__version__ = "0.1.0"
__all__ = ["Record", "Step", "Work", "__version__", "load", "param", "workload"]


def load(*paths) -> list[Record]:
    """Records from results files and folders (perfsuite's own, pytest-benchmark's, asv's).

    A file that cannot be read raises perfsuite.core.errors.ConfigError naming it."""
    records, problems = load_many([str(p) for p in paths])
    if problems:
        raise ConfigError("; ".join(problems))
    return records
