"""asv benchmarks of perfsuite's `resnet` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, time_class, track_class

GRID = grid("resnet", asv_size())


class ResnetTrack(track_class("resnet", GRID)):
    def setup_cache(self):
        return measure_cases("resnet", GRID, budget_s=5.0)


class ResnetTime(time_class("resnet", GRID)):
    pass
