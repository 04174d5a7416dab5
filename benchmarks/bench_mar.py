"""asv benchmarks of perfsuite's `mar` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, time_class, track_class

GRID = grid("mar", asv_size())


class MarTrack(track_class("mar", GRID)):
    def setup_cache(self):
        return measure_cases("mar", GRID, budget_s=5.0)


class MarTime(time_class("mar", GRID)):
    pass
