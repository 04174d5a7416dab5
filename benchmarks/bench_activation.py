"""asv benchmarks of perfsuite's `activation` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, time_class, track_class

GRID = grid("activation", asv_size())


class ActivationTrack(track_class("activation", GRID)):
    def setup_cache(self):
        return measure_cases("activation", GRID, budget_s=5.0)


class ActivationTime(time_class("activation", GRID)):
    pass
