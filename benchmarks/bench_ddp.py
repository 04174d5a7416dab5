"""asv benchmarks of perfsuite's `ddp` workload: DDP over torchrun ranks (perfsuite.distributed).

Only a track class: the step runs in ranks that perfsuite's launcher starts, through the same
case loop as `perfsuite run` (measure_cases -> perfsuite.run.execute.run_cases), so asv cannot time
it itself. asv reads larger as worse: scaling is tracked as 1 / efficiency (world_size=1: 1).
"""

import math

from benchmarks._grids import asv_size, grid
from benchmarks._suite import make_track_suite, measure_cases

GRID = grid("ddp", asv_size())


class DdpTrack(make_track_suite("ddp", GRID)):
    def setup_cache(self):
        return measure_cases("ddp", GRID, max_time=5.0)

    def track_inverse_scaling_efficiency(self, cache, *params):
        extra = self.record["extra"]
        if extra.get("world_size") == 1:
            return 1.0
        eff = extra.get("scaling_efficiency")
        return math.nan if not eff else 1.0 / eff

    track_inverse_scaling_efficiency.unit = "1/efficiency"

    def track_comm_share(self, cache, *params):
        share = (self.record["extra"].get("comm") or {}).get("comm_share")
        return math.nan if share is None else share

    track_comm_share.unit = "fraction"
