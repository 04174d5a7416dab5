"""asv benchmarks of perfsuite's `mar` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import make_suite

MarSuite = make_suite("mar", grid("mar", asv_size()))
