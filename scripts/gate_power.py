"""The gate's power against budget and slowdown, from measured A-against-A pairs.

    python scripts/gate_power.py collect --runs 6 --budget 60 --out reports/gate/aa-pairs.json
    python scripts/gate_power.py curve reports/gate/aa-pairs.json [--selfcheck reports/gate/selfcheck.json]

`collect` gates the unchanged ResNet18 `ci` step against itself as `perfsuite gate` does (fresh
builds per side rotated, one torch thread, the gate's block size) but fills the whole budget
with pairs and keeps them in time order. `curve` replays the gate's sequential test
(perfsuite.stats.sequential, the same looks and alpha) on the first k seconds' worth of each run's
pairs, with every log ratio shifted by log(1 + s) for an injected slowdown s: the power at
budget k and slowdown s, and at s = 0 the false-alarm rate. The shift models a slowdown that
adds the same fraction to every pair, which is what the self-check's padded matmuls do; the
self-check's measured point is printed beside the curve when given. Rates come with Wilson
95% intervals.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BUDGETS = (5, 10, 15, 20, 30, 45, 60, 120)
SLOWDOWNS = (0.0, 0.01, 0.02, 0.03, 0.05)


def collect(args) -> None:
    from perfsuite.compare import paired_gate
    from perfsuite.core import registry
    from perfsuite.measuring import counted, heap
    from perfsuite.measuring.fingerprint import collect_activity
    from perfsuite.measuring.system import CpuUsage, pinned, read_load_average
    from perfsuite.measuring.timing import PerfCounterClock

    w = registry.get("resnet")
    build = counted.alike(lambda: w.build({"size": "ci"}, "cpu"))  # every build of the case: counted once
    clock = PerfCounterClock()
    runs = []
    held = heap.apply(args.heap)  # as `perfsuite gate` does by default
    with pinned(None, args.threads), CpuUsage() as usage:
        before = collect_activity(2.0)
        for i in range(args.runs):
            load0 = read_load_average()
            # Built A B A B ..., as the gate builds them: neither side gets all the later allocations.
            a, b = paired_gate.alternate(lambda: build().fn, lambda: build().fn, args.builds)
            t0 = time.perf_counter()
            run = paired_gate.paired_ratios(a, b, clock, args.budget)
            # The budget's seconds: the heap's settling before it is set-up, as in the gate.
            settle_s = run.settle["seconds"] if run.settle else 0.0
            runs.append(
                {
                    "ratios": run.ratios,
                    "seconds": time.perf_counter() - t0 - settle_s,
                    "settle": run.settle,
                    "faults_per_pair": run.faults_per_pair,
                    "block_size": run.block_size,
                    "load_before": load0,
                    "load_after": read_load_average(),
                }
            )
            print(f"run {i}: {len(run.ratios)} pairs, median ratio {run.median:.4f}, load {load0}", file=sys.stderr)
    doc = {
        "workload": "resnet[size=ci]",
        "threads": args.threads,
        "builds": args.builds,
        "budget_s": args.budget,
        "heap": held,
        "runs": runs,
        "machine": {"before": before, "whole_run": usage.readings},
    }
    Path(args.out).write_text(json.dumps(doc, indent=1))


def replay(logs: list[float], shift: float, alpha: float, threshold: float) -> bool:
    """The gate's sequential decision on these pairs (time order), every log ratio moved by `shift`."""
    from perfsuite.compare.paired_gate import MIN_PAIRS, read_look
    from perfsuite.stats import sequential

    bounds = sequential.boundaries(sequential.LOOKS, alpha)
    for k, (frac, bound) in enumerate(zip(sequential.LOOKS, bounds)):
        seen = [x + shift for x in logs[: max(MIN_PAIRS, round(frac * len(logs)))]]
        decision, _ = read_look(seen, threshold, bound, k == len(bounds) - 1)
        if decision is not None:
            return decision == sequential.SLOWER
    return False


def curve(args) -> None:
    from perfsuite.compare.paired_gate import wilson_interval

    doc = json.loads(Path(args.pairs).read_text())
    runs = doc["runs"]
    print(
        f"A-against-A pairs: {len(runs)} runs of {doc['budget_s']:g}s, {doc['builds']} builds per side, "
        f"{doc['threads']} thread(s); alpha {args.alpha:g}"
    )
    for threshold in args.threshold:
        print(f"\n### threshold {threshold:g}\n")
        _table(runs, doc, threshold, args.alpha)
    if args.selfcheck:
        for res in json.loads(Path(args.selfcheck).read_text())["results"]:
            lo, hi = wilson_interval(res["caught"], res["trials"])
            flo, fhi = wilson_interval(res["false_alarms"], res["trials"])
            print(
                f"\nMeasured self-check ({res['case']}, {res['budget_s']:g}s, threshold {res['threshold']:g}, "
                f"injected {res['fraction_estimated']:.1%}): caught {res['caught']}/{res['trials']} "
                f"({lo:.0%}-{hi:.0%}), false alarms {res['false_alarms']}/{res['trials']} ({flo:.0%}-{fhi:.0%})"
            )


def _table(runs: list[dict], doc: dict, threshold: float, alpha: float) -> None:
    from perfsuite.compare.paired_gate import WARMUP_SHARE, wilson_interval
    from perfsuite.stats import summary as stats

    print(
        "| budget per case | pairs | "
        + " | ".join(f"+{s:.0%}" if s else "unchanged (false alarms)" for s in SLOWDOWNS)
        + " |"
    )
    print("|---|---|" + "---|" * len(SLOWDOWNS))
    for budget in BUDGETS:
        if budget > doc["budget_s"]:
            continue
        cells, npairs = [], []
        for s in SLOWDOWNS:
            hits = n = 0
            for r in runs:
                # Pairs per second of budget, as the gate gets them (its warm-up takes WARMUP_SHARE first).
                per_s = len(r["ratios"]) / r["seconds"]
                k = int(per_s * budget * (1 - WARMUP_SHARE))
                logs = [math.log(x) for x in r["ratios"]]
                # Each run gives several independent windows of k pairs when it is long enough.
                for start in range(0, len(logs) - k + 1, max(k, 1)):
                    hits += replay(logs[start : start + k], math.log1p(s), alpha, threshold)
                    n += 1
                npairs.append(k)
            lo, hi = wilson_interval(hits, n)
            cells.append(f"{hits}/{n} = {hits / n:.0%} ({lo:.0%}-{hi:.0%})")
        print(f"| {budget} s | ~{stats.median(npairs):.0f} | " + " | ".join(cells) + " |")


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--runs", type=int, default=6)
    c.add_argument("--budget", type=float, default=60.0)
    c.add_argument("--builds", type=int, default=3)
    c.add_argument("--threads", type=int, default=1)
    c.add_argument("--heap", choices=("steady", "default"), default="steady")
    c.add_argument("--out", required=True)
    v = sub.add_parser("curve")
    v.add_argument("pairs")
    v.add_argument("--selfcheck")
    v.add_argument(
        "--threshold",
        type=lambda t: [float(x) for x in t.split(",")],
        default=[0.01],
        help="the gate's threshold(s), comma-separated (default 0.01, the gate's own)",
    )
    v.add_argument("--alpha", type=float, default=0.01)
    args = p.parse_args()
    collect(args) if args.cmd == "collect" else curve(args)


if __name__ == "__main__":
    main()
