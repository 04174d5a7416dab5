"""asv benchmarks of perfsuite's `dataloader` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, time_class, track_class

GRID = grid("dataloader", asv_size())


class DataloaderTrack(track_class("dataloader", GRID)):
    def setup_cache(self):
        return measure_cases("dataloader", GRID, budget_s=5.0)


class DataloaderTime(time_class("dataloader", GRID)):
    pass
