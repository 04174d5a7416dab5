"""asv benchmarks of perfsuite's `checkpoint` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import make_suite

CheckpointSuite = make_suite("checkpoint", grid("checkpoint", asv_size()))
