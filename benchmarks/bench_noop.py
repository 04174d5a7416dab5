"""asv benchmarks of perfsuite's `noop` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, make_time_suite, make_track_suite

GRID = grid("noop", asv_size())


class NoopTrack(make_track_suite("noop", GRID)):
    def setup_cache(self):
        return measure_cases("noop", GRID, max_time=5.0)


class NoopTime(make_time_suite("noop", GRID)):
    pass
