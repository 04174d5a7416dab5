import json, statistics, sys
from pathlib import Path

KEYS = ("model", "n", "batch_size", "dtype", "precision", "cuda_graph", "world_size")

def quart(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]

def documents(path):
    files = sorted(Path(path).glob("*.json")) if Path(path).is_dir() else [Path(path)]
    for f in files:
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("format") == "perfsuite.results":
            yield f, doc.get("records", []), doc.get("failures", [])
        elif isinstance(doc, list):  # pair / amp results of a suite
            for r in doc:
                if isinstance(r, dict):
                    what = r.get("verdict") or f"time ratio {r.get('time_ratio')} ({r.get('vary')}: {r.get('a')} / {r.get('b')})"
                    print(f"  {f.stem:<28} {what}")

rows = {}
for f, recs, fails in documents(sys.argv[1]):
    varying = {k for k in set().union(*[r["params"] for r in recs]) if len({str(r["params"].get(k)) for r in recs}) > 1}
    for r in recs:
        lo, med, hi = quart(r["samples_s"])
        util = (r.get("nvml") or {}).get("gpu_util_pct", {}).get("mean")
        procs = r.get("processes")
        keys = [k for k in KEYS if k in r["params"]] + sorted(varying - set(KEYS))
        label = r["workload"] + "[" + ",".join(f"{k}={r['params'][k]}" for k in keys) + "]"
        rows[label] = med
        print(f"  {label:<64} median {med * 1e3:9.3f} ms  IQR/median {(hi - lo) / med:6.1%}  n={len(r['samples_s']):<4} "
              f"processes={len(procs) if isinstance(procs, list) else 1} converged={str(r['converged']).lower():<5}"
              + (f"  GPU util {util:.0f}%" if util is not None else "")
              + ("  [graph-captured]" if (r.get("extra") or {}).get("cuda_graph") else ""))
    for x in fails:
        print(f"  FAILED {x.get('workload')} {x.get('params')}: {str(x.get('error', ''))[:200]}")
if len(sys.argv) > 2 and sys.argv[2] == "graph-speedup":
    eager = [v for k, v in rows.items() if "cuda_graph=False" in k]
    graph = [v for k, v in rows.items() if "cuda_graph=True" in k]
    if eager and graph:
        print(f"  cuda_graph speed-up (eager / graph median): {eager[0] / graph[0]:.2f}x")
