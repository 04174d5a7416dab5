"""asv benchmarks of perfsuite's `resnet` workload."""

from benchmarks._grids import asv_size, grid, worker_processes
from benchmarks._suite import measure_cases, make_time_suite, make_track_suite

GRID = grid("resnet", asv_size())


class ResnetTrack(make_track_suite("resnet", GRID)):
    def setup_cache(self):
        return measure_cases("resnet", GRID, max_time=5.0, processes=worker_processes("resnet"))


class ResnetTime(make_time_suite("resnet", GRID)):
    pass
