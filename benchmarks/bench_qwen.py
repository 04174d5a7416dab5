"""asv benchmarks of perfsuite's `qwen` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, time_class, track_class

GRID = grid("qwen", asv_size())


class QwenTrack(track_class("qwen", GRID)):
    def setup_cache(self):
        return measure_cases("qwen", GRID, budget_s=5.0)


class QwenTime(time_class("qwen", GRID)):
    pass
