"""asv benchmarks of perfsuite's `allreduce` workload: collectives over torchrun ranks.

Only a track class (the collective runs in ranks perfsuite's launcher starts, through
measure_cases -> perfsuite.run.execute.run_cases). asv reads larger as worse, so bus bandwidth is
tracked as its inverse: seconds per GB carried on the bus.
"""

import math

from benchmarks._grids import asv_size, grid
from benchmarks._suite import make_track_suite, measure_cases

GRID = grid("allreduce", asv_size())


class AllreduceTrack(make_track_suite("allreduce", GRID)):
    def setup_cache(self):
        return measure_cases("allreduce", GRID, max_time=2.0)

    def track_seconds_per_bus_gb(self, cache, *params):
        busbw = self.record["extra"].get("busbw_Bps")
        return math.nan if not busbw else 1e9 / busbw  # world_size=1 moves nothing on a bus

    track_seconds_per_bus_gb.unit = "s/GB"
