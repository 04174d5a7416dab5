"""asv benchmarks of perfsuite's `noop` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, time_class, track_class

GRID = grid("noop", asv_size())


class NoopTrack(track_class("noop", GRID)):
    def setup_cache(self):
        return measure_cases("noop", GRID, budget_s=5.0)


class NoopTime(time_class("noop", GRID)):
    pass
