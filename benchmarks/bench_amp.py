"""asv benchmarks of the AMP comparison (`perfsuite amp`): fp32 against bf16/fp16 per training
workload (those that declare asv={"amp": True}), interleaved in one process; asv tracks
1/speed-up, the saved-memory ratio and the final-loss difference across commits."""

from benchmarks._suite import amp_grid, asv_size, make_amp_suite, measure_amp

GRID = amp_grid()


class AmpTrack(make_amp_suite(GRID)):
    def setup_cache(self):
        return measure_amp(GRID, asv_size())
