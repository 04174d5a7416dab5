"""asv benchmarks of perfsuite's `activation` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, make_time_suite, make_track_suite

GRID = grid("activation", asv_size())


class ActivationTrack(make_track_suite("activation", GRID)):
    def setup_cache(self):
        return measure_cases("activation", GRID, max_time=5.0)


class ActivationTime(make_time_suite("activation", GRID)):
    pass
