"""asv benchmarks of perfsuite's `matmul` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import make_suite

MatmulSuite = make_suite("matmul", grid("matmul", asv_size()))
