"""asv benchmarks of perfsuite's `noop` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import make_suite

NoopSuite = make_suite("noop", grid("noop", asv_size()))
