"""asv benchmarks of perfsuite's `matmul` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, time_class, track_class

GRID = grid("matmul", asv_size())


class MatmulTrack(track_class("matmul", GRID)):
    def setup_cache(self):
        return measure_cases("matmul", GRID, budget_s=5.0)


class MatmulTime(time_class("matmul", GRID)):
    pass
