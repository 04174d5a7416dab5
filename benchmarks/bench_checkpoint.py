"""asv benchmarks of perfsuite's `checkpoint` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, make_time_suite, make_track_suite

GRID = grid("checkpoint", asv_size())


class CheckpointTrack(make_track_suite("checkpoint", GRID)):
    def setup_cache(self):
        return measure_cases("checkpoint", GRID, max_time=5.0)


class CheckpointTime(make_time_suite("checkpoint", GRID)):
    pass
