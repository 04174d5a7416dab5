"""asv benchmarks of perfsuite's `checkpoint` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, time_class, track_class

GRID = grid("checkpoint", asv_size())


class CheckpointTrack(track_class("checkpoint", GRID)):
    def setup_cache(self):
        return measure_cases("checkpoint", GRID, budget_s=5.0)


class CheckpointTime(time_class("checkpoint", GRID)):
    pass
