"""asv benchmarks of perfsuite's `qwen` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, make_time_suite, make_track_suite

GRID = grid("qwen", asv_size())


class QwenTrack(make_track_suite("qwen", GRID)):
    def setup_cache(self):
        return measure_cases("qwen", GRID, max_time=5.0)


class QwenTime(make_time_suite("qwen", GRID)):
    pass
