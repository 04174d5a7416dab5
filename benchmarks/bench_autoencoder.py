"""asv benchmarks of perfsuite's `autoencoder` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, time_class, track_class

GRID = grid("autoencoder", asv_size())


class AutoencoderTrack(track_class("autoencoder", GRID)):
    def setup_cache(self):
        return measure_cases("autoencoder", GRID, budget_s=5.0)


class AutoencoderTime(time_class("autoencoder", GRID)):
    pass
