"""asv benchmarks of perfsuite's `autoencoder` workload."""

from benchmarks._grids import asv_size, grid
from benchmarks._suite import make_suite

AutoencoderSuite = make_suite("autoencoder", grid("autoencoder", asv_size()))
