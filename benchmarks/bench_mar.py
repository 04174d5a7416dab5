"""asv benchmarks of perfsuite's `mar` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, make_time_suite, make_track_suite

GRID = grid("mar", asv_size())


class MarTrack(make_track_suite("mar", GRID)):
    def setup_cache(self):
        return measure_cases("mar", GRID, max_time=5.0)


class MarTime(make_time_suite("mar", GRID)):
    pass
