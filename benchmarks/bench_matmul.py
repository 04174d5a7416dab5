"""asv benchmarks of perfsuite's `matmul` workload."""

from benchmarks._grids import asv_size, grid, worker_processes
from benchmarks._suite import measure_cases, make_time_suite, make_track_suite

GRID = grid("matmul", asv_size())


class MatmulTrack(make_track_suite("matmul", GRID)):
    def setup_cache(self):
        return measure_cases("matmul", GRID, max_time=5.0, processes=worker_processes("matmul"))


class MatmulTime(make_time_suite("matmul", GRID)):
    pass
