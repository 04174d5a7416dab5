"""Do perfsuite's numbers hold across runs? The measurement of issue 26, rerun from scratch.

For each case (`matmul n=256`, `resnet size=ci batch_size=8`), with perfsuite's defaults on the CPU:

1. `--runs` fresh processes measure the case (the road `perfsuite run` takes: execute.run_cases
   with the default RunConfig); the share of their reported intervals that contain the median of
   all the runs' medians (goal >= 90%), and the spread of those medians (CV, range/median);
2. pytest-benchmark measures the same step in as many fresh processes at the same budget
   (scripts/peers.py's W1 and W2, built like the two cases), for the spread beside perfsuite's;
3. `--runs` more fresh runs of the unchanged code and `--runs` with a 10% slowdown injected (the
   step followed by square matmuls, as the gate's self-check pads it, smaller ones for a fast step),
   each compared with one run of step 1 by `perfsuite compare`'s rule (compare.records): how often
   unchanged code is called `slower` (goal <= 1 in 20) and how often the slowdown is (goal >= 18 in 20).

Runs of every kind are interleaved (base, unchanged, slowed, pytest-benchmark, then the next
index), so that the machine's drift reaches them alike. Raw results go to OUT/quality.json and a
summary to OUT/README.md. Numbers mean something only on a quiet machine: `perfsuite system`
first. Each run pays Python and torch start-up (2-7 s here) on top of its budget; with the
defaults (20 runs, 10 s budgets) the whole takes 35-60 minutes (`--runs 10 --cases ...` for less).

    python scripts/quality.py [--runs 20] [--max-time SECONDS] [--cases CASE ...] [--out reports/quality]
    python scripts/quality.py --reanalyse [--out reports/quality]   # today's code on the kept records
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {  # name: (workload, params, the peers' workload for pytest-benchmark)
    "matmul n=256": ("matmul", {"n": 256}, "W1"),
    "resnet size=ci batch_size=8": ("resnet", {"size": "ci", "batch_size": 8}, "W2"),
}
SLOWDOWN = 0.10
LEARN_FROM = 5  # base runs `compare` learns the drift between runs from, in the second verdict


def _padding(size: int):
    """One size x size matmul on preallocated inputs: the unit of an injected slowdown."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    return lambda: torch.mm(a, b)


class _Padded:
    """A builder: the registered workload's step followed by `count` size x size matmuls. A class at
    module level, not a closure, so that the workload can be sent to perfsuite's worker processes."""

    def __init__(self, name: str, size: int, count: int) -> None:
        self.name, self.size, self.count = name, size, count

    def __call__(self, params, device):
        from dataclasses import replace

        from perfsuite.compare.paired_gate import slowed
        from perfsuite.core import registry

        built = registry.get(self.name).builder(params, device)
        return replace(built, fn=slowed(built.fn, _padding(self.size), self.count))


def _build_wrapped(workload, size: int, count: int):
    """The workload with `count` size x size matmuls after each step (0: unchanged), same case key."""
    from dataclasses import replace

    if count == 0:
        return workload
    return replace(workload, builder=_Padded(workload.name, size, count))


def child(args) -> None:
    """One fresh run, in its own process: the case measured with the default RunConfig."""
    from perfsuite.core import registry
    from perfsuite.core.config import RunConfig
    from perfsuite.measuring.fingerprint import fingerprint
    from perfsuite.run.execute import Case, check_cases, run_cases
    from perfsuite.storage.files import ResultsWriter

    name, params, _ = CASES[args.case]
    size, count = (int(x) for x in args.pad.split(":"))
    workload = _build_wrapped(registry.get(name), size, count)
    cfg = RunConfig(device="cpu", **({"max_time": args.max_time} if args.max_time else {}))
    checked = check_cases([Case(workload, params)], "cpu")
    out = run_cases(checked, cfg, outputs=(ResultsWriter(Path(args.record)),), env=fingerprint())
    if out.failures:
        raise SystemExit(f"{args.case}: {out.failures[0]['error']}")


def _fresh_run(case: str, record: Path, max_time: float | None, pad: str = "256:0", walls: list | None = None):
    """One fresh process measuring the case; its wall time (start-up included) goes to `walls`."""
    import time

    from perfsuite.storage.files import load_records

    cmd = [sys.executable, str(Path(__file__).resolve()), "_child", case, "--record", str(record), "--pad", pad] + (
        ["--max-time", str(max_time)] if max_time else []
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, cwd=ROOT, env=env)
    if walls is not None:
        walls.append(time.monotonic() - t0)
    (rec,) = load_records(record)
    return rec


def _pad_for(case: str) -> tuple[str, float]:
    """The padding that makes the step about SLOWDOWN slower, measured once here: the largest
    matmul (256, 128, 64 or 32 square) of which it takes at least 4, so that the step's own size
    does not round the slowdown far off (one 256x256 matmul is all of `matmul n=256`).
    Returns ("SIZE:COUNT", the estimated slowdown)."""
    import torch

    from perfsuite.core import registry
    from perfsuite.core.config import RunConfig
    from perfsuite.measuring.timing import PerfCounterClock
    from perfsuite.stats import summary as stats

    torch.set_num_threads(RunConfig().threads_on("cpu") or torch.get_num_threads())  # as the runs measure it
    clock = PerfCounterClock()
    name, params, _ = CASES[case]
    w = registry.get(name)
    step = w.build(w.resolve(params), "cpu").fn
    for _ in range(20):
        step()
    t_step = stats.median([clock.time_block(step, 1) for _ in range(31)])
    for size in (256, 128, 64, 32):
        mm = _padding(size)
        t_mm = stats.median([clock.time_block(mm, 20) / 20 for _ in range(15)])
        count = round(SLOWDOWN * t_step / t_mm)
        if count >= 4 or size == 32:
            count = max(1, count)
            return f"{size}:{count}", count * t_mm / t_step
    raise AssertionError("unreachable")


def _spread(medians: list[float]) -> dict:
    from perfsuite.stats import summary as stats

    m = stats.median(medians)
    mean = sum(medians) / len(medians)
    sd = math.sqrt(sum((x - mean) ** 2 for x in medians) / (len(medians) - 1)) if len(medians) > 1 else 0.0
    return {"median_of_medians": m, "cv": sd / mean, "range_over_median": (max(medians) - min(medians)) / m}


def measure_case(case: str, runs: int, max_time: float | None, tmp: Path) -> dict:
    sys.path.insert(0, str(ROOT / "scripts"))
    from peers import _pytest_benchmark

    from perfsuite.core.config import RunConfig

    budget = max_time or RunConfig().max_time
    pad, est = _pad_for(case)
    base, same, slow, pyb, walls, loads = [], [], [], [], [], []
    for i in range(runs):
        loads.append(os.getloadavg()[0])
        print(f"{case}: run {i + 1}/{runs} (load {loads[-1]:.2f})", flush=True)
        base.append(_fresh_run(case, tmp / f"{case}-base-{i}.json", max_time, walls=walls))
        same.append(_fresh_run(case, tmp / f"{case}-same-{i}.json", max_time, walls=walls))
        slow.append(_fresh_run(case, tmp / f"{case}-slow-{i}.json", max_time, pad, walls=walls))
        # The same step as perfsuite measures it: on perfsuite's default torch threads (one on the CPU).
        pyb.append(_pytest_benchmark(CASES[case][2], budget, threads=RunConfig().threads_on("cpu") or 2))
    loads.append(os.getloadavg()[0])
    result = {
        "case": case,
        "runs": runs,
        "budget_s": budget,
        "padding": pad,
        "slowdown_estimated": est,
        "load_1min": loads,
        "wall_s": walls,
        "pytest_benchmark": {**_spread(pyb), "medians": pyb},
    }
    return {**result, **analyse(base, same, slow, walls)}


def _in_seconds(rec):
    """The record without its machine-speed reference and learned drift: `compare` then judges it
    in seconds, as it did before either existed (the contrast in the report)."""
    from dataclasses import replace

    def strip(cond):
        return {k: v for k, v in (cond or {}).items() if k not in ("reference", "machine_drift")}

    procs = [{**p, "conditions": strip(p.get("conditions"))} for p in rec.processes] if rec.processes else None
    return replace(rec, conditions=strip(rec.conditions), processes=procs)


def _with_machine_log(base: list, same: list, slow: list) -> list:
    """The base records as `perfsuite run` reports them with its machine-speed log: each with the
    drift learned from the log it would have read (perfsuite.storage.machine_drift), rebuilt from
    every run of the case (base, unchanged and slowed: all are runs on this machine; the padding
    does not touch the reference) that ended before it, itself included. The child runs keep no
    log of their own, so the same records can be reanalysed under other rules."""
    from dataclasses import replace
    from datetime import datetime

    from perfsuite.storage import machine_drift

    def when(r):
        return datetime.fromisoformat(r.created).timestamp()

    entries = sorted(
        (
            {**machine_drift.run_key(r), "time": when(r), "median_s": r.conditions["reference"]["median_s"]}
            for r in base + same + slow
            if r.conditions.get("reference")
        ),
        key=lambda e: e["time"],
    )
    out = []
    for r in base:
        key = machine_drift.run_key(r)
        drift = key and machine_drift.learned([e for e in entries if e["time"] <= when(r)], key, when(r))
        out.append(replace(r, conditions={**r.conditions, "machine_drift": drift}) if drift else r)
    return out


THRESHOLDS = (0.03, 0.04, 0.05, 0.06, 0.07, 0.08)


def _log_units(r, relative: bool = True) -> list[float]:
    """A record's units (compare's: per reference, or in seconds), as logs; [] when it has none."""
    units = r.relative_units() if relative else r.units()
    return [math.log(u) for u in units or []]


def between_runs(runs: list, relative: bool = True) -> dict | None:
    """Where the spread between separate runs of unchanged code lives, from their records: the SD of
    the runs' log centres (geometric means of their units), the part the runs' own processes
    explain (the pooled within-run variance of log units over their number: what averaging more
    processes removes), and the rest, sqrt(between^2 - explained^2): what moves a whole run with the
    machine's state, which more processes in a run cannot remove and only a reference that follows
    the step, or interleaving, can."""
    per_run = [logs for logs in map(lambda r: _log_units(r, relative), runs) if len(logs) >= 2]
    if len(per_run) < 3:
        return None
    between = statistics.stdev(statistics.fmean(logs) for logs in per_run)
    # Pooled: the mean of the within-run variances is unbiased, where a median of small-sample SDs
    # reads low and would leave process noise in the rest.
    explained = math.sqrt(statistics.fmean(statistics.variance(logs) / len(logs) for logs in per_run))
    return {
        "runs": len(per_run),
        "units": statistics.median(len(logs) for logs in per_run),
        "between_sd": between,
        "explained_by_processes_sd": explained,
        "run_level_sd": math.sqrt(max(0.0, between**2 - explained**2)),
    }


def pair_floor(base: list, same: list, slow: list) -> dict | None:
    """What any rule on a pair's ratio could do with these runs: each pair's log ratio of run
    centres per reference (the geometric mean of the record's relative units, compare's units),
    their spread over the unchanged pairs, and for fixed thresholds how many unchanged and slowed
    pairs lie above. The noise floor of separate runs, not a verdict."""

    def centre(r, relative=True):
        logs = _log_units(r, relative)
        return math.exp(statistics.fmean(logs)) if logs else None

    def logs(news, relative=True):
        out = []
        for b, n in zip(base, news):
            cb, cn = centre(b, relative), centre(n, relative)
            if cb and cn:
                out.append(math.log(cn / cb))
        return out

    unchanged, slowed = logs(same), logs(slow)
    if len(unchanged) < 3 or len(slowed) < 3:
        return None
    # What the padding really added, in seconds, over the 20 pairs: _pad_for estimates it once,
    # from matmuls timed alone, and a matmul's share of a step moves with the machine's state.
    seconds = logs(slow, relative=False)
    return {
        "pairs": len(unchanged),
        "unchanged_sd": statistics.stdev(unchanged),
        "slowed_mean": statistics.fmean(slowed),
        "slowed_sd": statistics.stdev(slowed),
        "slowed_mean_in_seconds": statistics.fmean(seconds) if seconds else None,
        # Unchanged code only: the base runs and their unchanged partners.
        "between_runs": {"per_reference": between_runs(base + same), "seconds": between_runs(base + same, False)},
        "above": [
            {
                "threshold": t,
                "unchanged": sum(x > math.log1p(t) for x in unchanged),
                "slowed": sum(x > math.log1p(t) for x in slowed),
            }
            for t in THRESHOLDS
        ],
    }


def analyse(base: list, same: list, slow: list, walls: list | None = None) -> dict:
    """perfsuite's figures from the records of one case's runs, as today's code reports them."""
    from perfsuite.compare.records import compare_records

    plain = base
    base = _with_machine_log(base, same, slow)

    medians = [r.median_s for r in base]
    center = _spread(medians)["median_of_medians"]

    # A run too short for any interval (a tiny --max-time) counts as not covering.
    def covers(lo, hi):
        return lo is not None and lo <= center <= hi

    covered = sum(covers(r.stats.ci_low, r.stats.ci_high) for r in base)
    covered_without_log = sum(covers(r.stats.ci_low, r.stats.ci_high) for r in plain)
    # The run's own interval (its processes' or builds' spread), before RunConfig.run_drift widens it.
    own = [
        (r.between.ci_low, r.between.ci_high) if r.between is not None else (r.stats.ci_low, r.stats.ci_high)
        for r in base
    ]
    verdicts = {
        kind: [compare_records([b], [n]).cases[0] for b, n in zip(base, news)]
        for kind, news in (("unchanged", same), ("slowed", slow))
    }
    # The same pairs judged against the drift learned from base runs (compare BASE... NEW): each
    # base run with the LEARN_FROM - 1 base runs before it (cyclically: the runs were interleaved,
    # so which came first says nothing), as a user who kept their last few runs would.
    k = min(LEARN_FROM, len(base))
    history = [[base[(i - j) % len(base)] for j in range(k - 1, -1, -1)] for i in range(len(base))]
    learned = {
        kind: [compare_records(h, [n]).cases[0] for h, n in zip(history, news)]
        for kind, news in (("unchanged", same), ("slowed", slow))
    }
    seconds = {
        kind: [compare_records([_in_seconds(b)], [_in_seconds(n)]).cases[0] for b, n in zip(base, news)]
        for kind, news in (("unchanged", same), ("slowed", slow))
    }
    refs = [(r.conditions.get("reference") or {}).get("median_s") for r in base]
    # Each run's centre per reference as compare takes it: the median of its relative units.
    centres = [r.relative_units() for r in base]
    relative = _spread([statistics.median(u) for u in centres]) if all(centres) else None
    return {
        "pair_floor": pair_floor(plain, same, slow),
        "perfsuite": {
            **_spread(medians),
            "covered": covered,
            "covered_without_run_drift": sum(covers(lo, hi) for lo, hi in own),
            "covered_without_machine_log": covered_without_log,
            "machine_drift": [r.machine_drift for r in base],
            "run_drift": [r.config.get("run_drift") for r in base],
            "intervals": [[r.stats.ci_low, r.stats.ci_high] for r in base],
            "own_intervals": [list(x) for x in own],
            "medians": medians,
            "measure_s": [r.config.get("measure_s") for r in base],
            "builds": [r.conditions.get("builds") for r in base],
            "processes": [r.conditions.get("processes") for r in base],
            "process_medians": [r.process_medians or [] for r in base],
            "torch_threads": [r.conditions.get("torch_threads") for r in base],
            "others_cpus": [r.conditions.get("others_cpus") for r in base],
            "wall_s": walls,
            "reference_medians": refs,
            "per_reference": relative,
        },
        "compare": {
            kind: {
                "slower": sum(c.verdict == "slower" for c in cs),
                "verdicts": [c.verdict for c in cs],
                "ratios": [c.ratio for c in cs],
                "noise": [c.noise for c in cs],
                "p": [c.p_value for c in cs],
                "machine": [c.machine for c in cs],
            }
            for kind, cs in verdicts.items()
        },
        "compare_in_seconds": {
            kind: {
                "slower": sum(c.verdict == "slower" for c in cs),
                "verdicts": [c.verdict for c in cs],
                "ratios": [c.ratio for c in cs],
            }
            for kind, cs in seconds.items()
        },
        "compare_learned": {
            "base_runs": k,
            **{
                kind: {
                    "slower": sum(c.verdict == "slower" for c in cs),
                    "verdicts": [c.verdict for c in cs],
                    "noise": [c.noise for c in cs],
                }
                for kind, cs in learned.items()
            },
        },
    }


def reanalyse(out: Path) -> list[dict]:
    """OUT/quality.json's perfsuite and compare figures recomputed by today's code from the records
    kept in OUT/records (pytest-benchmark's, the loads and wall times are kept as measured)."""
    from dataclasses import replace

    from perfsuite.core.config import RunConfig
    from perfsuite.storage.files import load_records

    def today(rec):  # a record measured before run_drift existed is reported with today's default
        if "run_drift" in rec.config:
            return rec
        return replace(rec, config={**rec.config, "run_drift": RunConfig().run_drift})

    results = json.loads((out / "quality.json").read_text())
    for r in results:

        def recs(kind):
            folder = out / r.get("records", "records")  # noqa: B023 - a result may name its own folder of records
            return [today(load_records(folder / f"{r['case']}-{kind}-{i}.json")[0]) for i in range(r["runs"])]  # noqa: B023 - called within this iteration

        walls = r.get("wall_s") or r.get("perfsuite", {}).get("wall_s")
        r.update(analyse(recs("base"), recs("same"), recs("slow"), walls), wall_s=walls)
    return results


def summary(results: list[dict]) -> str:
    lines = [
        "# Numbers that hold across runs (issue 26)",
        "",
        "Written by `python scripts/quality.py`; raw numbers in `quality.json`.",
        "",
        "| case | runs | budget, processes, wall per run, 1-min load | intervals covering the median of medians | "
        "perfsuite CV / range (per reference) | "
        "pytest-benchmark CV / range | unchanged called slower | +10% called slower | "
        f"the same, against {LEARN_FROM} base runs | the same, in seconds (no reference) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        p, b, c = r["perfsuite"], r["pytest_benchmark"], r["compare"]
        lines.append(
            f"| {r['case']} | {r['runs']} | {r['budget_s']:g} s, {p['processes'][0]} processes, "
            f"wall {min(p['wall_s']):.0f}-{max(p['wall_s']):.0f} s, load {min(r['load_1min']):.1f}-"
            f"{max(r['load_1min']):.1f} | {p['covered']}/{r['runs']} "
            f"({p.get('covered_without_machine_log', '-')}/{r['runs']} without the machine-speed log, "
            f"{p['covered_without_run_drift']}/{r['runs']} without either) | "
            f"{p['cv']:.1%} / {p['range_over_median']:.1%}"
            + (
                f" ({p['per_reference']['cv']:.1%} / {p['per_reference']['range_over_median']:.1%})"
                if p.get("per_reference")
                else ""
            )
            + f" | {b['cv']:.1%} / {b['range_over_median']:.1%} | "
            f"{c['unchanged']['slower']}/{r['runs']} | {c['slowed']['slower']}/{r['runs']} "
            f"(injected {r['slowdown_estimated']:.1%}) | "
            + (
                f"{r['compare_learned']['unchanged']['slower']}/{r['runs']} and "
                f"{r['compare_learned']['slowed']['slower']}/{r['runs']} |"
                if "compare_learned" in r
                else "- |"
            )
            + (
                f" {r['compare_in_seconds']['unchanged']['slower']}/{r['runs']} and "
                f"{r['compare_in_seconds']['slowed']['slower']}/{r['runs']} |"
                if "compare_in_seconds" in r
                else " - |"
            )
        )
    lines += [
        "",
        "Goals: >= 90% of intervals cover the median of medians; unchanged code called slower "
        "<= 1 in 20; the 10% slowdown called slower >= 18 in 20.",
    ]
    floors = [r for r in results if r.get("pair_floor")]
    if floors:
        lines += [
            "",
            "What any threshold on a pair's ratio per reference could do with these runs (the log ratio "
            "of run centres, compare's units; not a verdict): pairs above each threshold, unchanged and slowed.",
            "",
            "| case | unchanged pairs: SD of log ratio | slowed: mean (in seconds) | "
            + " | ".join(f"> {1 + t:.2f}" for t in THRESHOLDS)
            + " |",
            "|---|---|---|" + "---|" * len(THRESHOLDS),
        ]
        for r in floors:
            f = r["pair_floor"]
            secs = f.get("slowed_mean_in_seconds")
            lines.append(
                f"| {r['case']} | {f['unchanged_sd']:.1%} | {math.expm1(f['slowed_mean']):+.1%}"
                + (f" ({math.expm1(secs):+.1%})" if secs is not None else "")
                + " | "
                + " | ".join(f"{a['unchanged']}/{f['pairs']}, {a['slowed']}/{f['pairs']}" for a in f["above"])
                + " |"
            )
        splits = [(r["case"], r["pair_floor"].get("between_runs") or {}) for r in floors]
        if any(v for _, split in splits for v in split.values()):
            lines += [
                "",
                "Where the spread between runs of unchanged code lives (log SDs of run centres; "
                "scripts/quality.py's between_runs): what the runs' processes explain falls with more "
                "processes per run, the run-level rest does not.",
                "",
                "| case | unit | runs x units | between runs | explained by processes | run-level rest |",
                "|---|---|---|---|---|---|",
            ]
            for case, split in splits:
                for unit, v in split.items():
                    if v:
                        lines.append(
                            f"| {case} | {unit.replace('_', ' ')} | {v['runs']} x {v['units']:g} | "
                            f"{v['between_sd']:.1%} | {v['explained_by_processes_sd']:.1%} | "
                            f"{v['run_level_sd']:.1%} |"
                        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    one = sub.add_parser("_child", help=argparse.SUPPRESS)
    one.add_argument("case", choices=sorted(CASES))
    one.add_argument("--record", required=True)
    one.add_argument("--pad", default="256:0", help="SIZE:COUNT matmuls after each step")
    one.add_argument("--max-time", type=float, default=None)
    ap.add_argument("--runs", type=int, default=20, help="fresh runs of each kind per case (default 20)")
    ap.add_argument(
        "--max-time",
        type=float,
        default=None,
        help="budget per run in seconds (default: perfsuite's own, 10 s); pytest-benchmark gets the same",
    )
    ap.add_argument("--cases", nargs="*", default=sorted(CASES), choices=sorted(CASES))
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "quality")
    ap.add_argument(
        "--reanalyse",
        action="store_true",
        help="measure nothing: recompute OUT/quality.json from the records kept in OUT/records",
    )
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))  # this checkout's perfsuite, in the parent as in the runs it starts
    if args.cmd == "_child":
        return child(args)
    if args.reanalyse:
        results = reanalyse(args.out)
    else:
        if args.runs < 2:
            raise SystemExit("--runs must be at least 2")
        (args.out / "records").mkdir(parents=True, exist_ok=True)  # every run's record, for --reanalyse
        results = [measure_case(case, args.runs, args.max_time, args.out / "records") for case in args.cases]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "quality.json").write_text(json.dumps(results, indent=1))
    (args.out / "README.md").write_text(summary(results))
    print(summary(results))


if __name__ == "__main__":
    main()
