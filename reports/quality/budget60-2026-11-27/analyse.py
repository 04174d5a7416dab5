"""The budget experiment's figures from its records: python reports/quality/budget60-2026-11-27/analyse.py [FOLDER]
(FOLDER: the records, default this folder's records/; run from the repository root)."""
import glob
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, "scripts")
import quality  # noqa: E402

from perfsuite.storage.files import load_records  # noqa: E402

folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "records"
for t in (60, 10):
    files = sorted(glob.glob(str(folder / f"r{t}-*.json")))
    recs = [load_records(p)[0] for p in files]
    if len(recs) < 3:
        continue
    rel = [statistics.median(r.relative_units()) for r in recs]
    sec = [r.median_s for r in recs]
    walls = [float(open(p).read().split()[-1]) for p in sorted(glob.glob(str(folder / f"wall-{t}-*.txt")))]

    def sd(xs):
        return statistics.stdev(math.log(x) for x in xs)

    print(f"budget {t} s: runs {len(recs)}, processes {sorted({r.conditions.get('processes') for r in recs})}, "
          f"samples/run {statistics.median(len(r.samples_s) for r in recs)}, wall {min(walls):.0f}-{max(walls):.0f} s")
    print(f"  between-run SD of centres: per reference {sd(rel):.1%}, seconds {sd(sec):.1%}")
    for relative in (True, False):
        s = quality.between_runs(recs, relative)
        print(f"  split ({'per reference' if relative else 'seconds'}): between {s['between_sd']:.1%}, "
              f"explained by processes {s['explained_by_processes_sd']:.1%}, run-level {s['run_level_sd']:.1%}")
    covered = sum(r.stats.ci_low <= statistics.median(sec) <= r.stats.ci_high for r in recs)
    print(f"  intervals covering the median of medians (no machine log): {covered}/{len(recs)}")
