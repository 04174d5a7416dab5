"""asv benchmarks of perfsuite's `autoencoder` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import measure_cases, make_time_suite, make_track_suite

GRID = grid("autoencoder", asv_size())


class AutoencoderTrack(make_track_suite("autoencoder", GRID)):
    def setup_cache(self):
        return measure_cases("autoencoder", GRID, max_time=5.0)


class AutoencoderTime(make_time_suite("autoencoder", GRID)):
    pass
