"""asv benchmarks of perfsuite's `dataloader` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, make_time_suite, make_track_suite

GRID = grid("dataloader", asv_size())


class DataloaderTrack(make_track_suite("dataloader", GRID)):
    def setup_cache(self):
        return measure_cases("dataloader", GRID, max_time=5.0)


class DataloaderTime(make_time_suite("dataloader", GRID)):
    pass
