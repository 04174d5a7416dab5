"""asv benchmarks of perfsuite's `resnet` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import make_suite

ResnetSuite = make_suite("resnet", grid("resnet", asv_size()))
