"""perfsuite: a benchmarking harness for deep-learning workloads.

One measured run of a workload step produces one :class:`perfsuite.core.record.Record`;
every front-end (CLI, asv, pytest-benchmark, reports) reads that record.
"""

__version__ = "0.1.0"
