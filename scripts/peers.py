"""perfsuite beside pytest-benchmark and torch.utils.benchmark, with the protocol of
docs/peers.md: per-call overhead on an empty function (W0), and the spread of the
reported median over 7 fresh processes for a 256x256 matmul (W1) and a ResNet18 batch-8
training step (W2), every tool with the same time budget.

    python scripts/peers.py overhead
    python scripts/peers.py spread [--runs 7] [--budget 5] [--workers 4] [--out reports/peers/spread.json]
    python scripts/peers.py pool reports/peers/spread-a.json reports/peers/spread-b.json

`perfsuite-workers` is perfsuite's worker mode (`--processes N`): the same total budget spread
over N fresh spawned workers, the reported median the median of their medians. The spread run
records the machine's load average before and after each measurement and the steal and other
processes' CPU use over the whole run (perfsuite.measuring.system). Around every slot this (long-lived)
process times the slot's step itself for --probe-s seconds before and after: the machine's speed
at that moment. The table gives each tool's CV, its ratio to the best other peer's (90% bootstrap
interval over the runs), the CV of its values divided by the probe, and the probe's own CV: how
far the machine moved between slots (timed around the slots, not during them, and with noise of
its own: an indication, no lower bound). Writes a markdown table to stdout.
Takes ~10-15 minutes for `spread` on 2 cores (importing torch in every fresh process dominates).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

TOOLS = ("perfsuite", "perfsuite-workers", "pytest-benchmark", "torch.utils.benchmark")
WORKERS = 4  # perfsuite-workers: processes the budget is spread over (--workers)
WORKLOADS = ("W0", "W1", "W2")


def make_step(workload: str, threads: int = 2):
    """The step, built outside any timing."""
    if workload == "W0":

        def noop():
            return None

        return noop
    import torch

    torch.set_num_threads(threads)
    if workload == "W1":
        a, b = torch.randn(256, 256), torch.randn(256, 256)
        return lambda: torch.mm(a, b)
    if workload == "W2":
        import torchvision

        torch.manual_seed(0)
        model = torchvision.models.resnet18(num_classes=10)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
        loss_fn = torch.nn.CrossEntropyLoss()

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()

        return step
    raise SystemExit(f"unknown workload {workload}")


def _build(params, device):
    """The protocol's step as a perfsuite workload, so that worker processes build it themselves."""
    from perfsuite.core.record import Work
    from perfsuite.core.workload import BuiltStep

    return BuiltStep(fn=make_step(params["w"], params["threads"]), work=Work(items_per_step=1, item_unit="steps"))


def measure_once(
    tool: str, workload: str, budget: float, workers: int = WORKERS, threads: int = 2, heap: str = "default"
) -> float:
    """Median seconds per call reported by `tool` in this process (or its workers); `heap` is
    perfsuite's --heap for the perfsuite tools (the peers have no such setting)."""
    if tool == "perfsuite-workers":
        from perfsuite.core.config import RunConfig
        from perfsuite.core.params import Param
        from perfsuite.core.workload import Workload
        from perfsuite.measuring.workers import run_in_workers

        peer = Workload(
            "peer", "the protocol's W0/W1/W2 step", (Param("w", str, "W1"), Param("threads", int, 2)), _build
        )
        rec = run_in_workers(
            peer,
            {"w": workload, "threads": threads},
            RunConfig(max_time=budget, processes=workers, device="cpu", heap=heap),
        )
        print(
            json.dumps({"medians": list(rec.spread.medians), "between_share": rec.spread.between_share}),
            file=sys.stderr,
        )
        return rec.median_s
    if tool in ("perfsuite", "perfsuite-min-time"):
        from perfsuite.core.config import RunConfig
        from perfsuite.measuring.runner import time_blocks
        from perfsuite.measuring.timing import PerfCounterClock
        from perfsuite.stats.summary import median

        # perfsuite-min-time: keep measuring for 60% of the budget even once the CI has converged.
        min_time = 0.6 * budget if tool == "perfsuite-min-time" else 0.0
        from perfsuite.measuring import heap as heap_setting

        heap_setting.apply(heap)
        m = time_blocks(make_step(workload, threads), PerfCounterClock(), RunConfig(max_time=budget, min_time=min_time))
        return median(m.samples_s)
    if tool == "torch.utils.benchmark":
        import torch
        import torch.utils.benchmark as tb

        step = make_step(workload, threads)
        # Timer defaults to one thread; every tool runs with the same threads (the protocol: 2).
        timer = tb.Timer(stmt="step()", globals={"step": step}, num_threads=torch.get_num_threads())
        return timer.blocked_autorange(min_run_time=budget).median
    if tool == "pytest-benchmark":
        return _pytest_benchmark(workload, budget, threads=threads)
    raise SystemExit(f"unknown tool {tool}")


def _pytest_benchmark(workload: str, budget: float, pedantic: bool = False, threads: int = 2) -> float:
    with tempfile.TemporaryDirectory() as d:
        test = Path(d) / "test_peer.py"
        call = "benchmark.pedantic(step, rounds=20000, iterations=1)" if pedantic else "benchmark(step)"
        test.write_text(
            textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from peers import make_step
            step = make_step({workload!r}, {threads})
            def test_peer(benchmark):
                {call}
        """)
        )
        out = Path(d) / "out.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(test),
                "-o",
                "addopts=",
                "-W",
                "ignore",
                f"--benchmark-max-time={budget}",
                f"--benchmark-json={out}",
                "-c",
                "/dev/null",
            ],
            check=True,
            capture_output=True,
            cwd=d,
        )
        return json.loads(out.read_text())["benchmarks"][0]["stats"]["median"]


def fresh_process(
    tool: str, workload: str, budget: float, workers: int = WORKERS, threads: int = 2, heap: str = "default"
) -> tuple[float, list[float] | None]:
    """The tool's median in a fresh process, and perfsuite-workers' process medians (else None)."""
    res = subprocess.run(
        [
            sys.executable,
            __file__,
            "one",
            tool,
            workload,
            str(budget),
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--heap",
            heap,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    process_medians = None
    for line in res.stderr.splitlines():
        if line.startswith('{"medians"'):
            process_medians = json.loads(line)["medians"]
    return float(res.stdout.strip().splitlines()[-1]), process_medians


class DriftProbe:
    """The machine's speed at the moment of a slot: the slot's own step, built once in this
    (long-lived) parent process and timed call by call for `seconds` just before and just after
    the tool's fresh process measures. One process and one memory layout for the whole run, so
    what moves the probe from slot to slot is the machine over time (and the probe's own short
    window), nothing between processes. A plain fixed-window loop, not perfsuite's runner: the
    probe must not depend on one of the tools it is set beside, nor stop early on convergence."""

    def __init__(self, workloads, threads: int, seconds: float) -> None:
        self.steps = {w: make_step(w, threads) for w in workloads}
        self.seconds = seconds

    def __call__(self, workload: str) -> float:
        import time

        step, clock = self.steps[workload], time.perf_counter
        end = clock() + 0.2 * self.seconds  # warm-up: caches, the OpenMP pool
        while clock() < end:
            step()
        times, end = [], clock() + 0.8 * self.seconds
        while True:
            t0 = clock()
            step()
            t1 = clock()
            times.append(t1 - t0)
            if t1 >= end:
                return statistics.median(times)


PEER_TOOLS = ("pytest-benchmark", "torch.utils.benchmark")


def _cv(xs) -> float:
    return statistics.stdev(xs) / statistics.mean(xs)


def spread_table(results: dict, probes: dict | None = None, resamples: int = 4000, seed: int = 0) -> list[dict]:
    """One row per workload and tool: the CV of the reported medians over the runs; the CV of
    each value divided by its slot's probe (the machine's speed around the slot,
    `probes[w][tool][i]`); the ratio of the tool's CV to the best other peer's with a 90%
    bootstrap interval (runs resampled together, so every tool keeps the same slots; with 7-10
    runs that share drift the interval is, if anything, too narrow); and a `probe` row per
    workload, the mean of the probe series' CVs. The probe is timed around the slot, not during
    it, and has noise of its own: it shows how far the machine moved, it is no lower bound.
    Workloads with fewer than two runs are left out (no CV)."""
    rows = []
    for workload, by_tool in results.items():
        n = min(len(v) for v in by_tool.values())
        if n < 2:
            continue
        flat = {t: v[:n] for t, v in by_tool.items()}
        if probes and workload in probes:
            # Each tool's slots have their own probe series: the row gives their CVs' mean.
            series = [probes[workload][t][:n] for t in flat if t in probes[workload]]
            rows.append(
                {
                    "workload": workload,
                    "tool": "probe (the machine's speed)",
                    "median": statistics.median([x for s in series for x in s]),
                    "cv": statistics.mean(_cv(s) for s in series),
                    "resid_cv": None,
                    "ratio": None,
                    "ratio_ci": None,
                }
            )
        # The ratio and its interval: the pooled table of this one session (its pooled CV is the CV).
        pooled = {r["tool"]: r for r in pooled_table([{workload: flat}], resamples, seed)}
        for tool, vals in flat.items():
            resid = None
            if probes and workload in probes and tool in probes[workload]:
                resid = _cv([v / p for v, p in zip(vals, probes[workload][tool][:n])])
            ratio, ratio_ci = pooled[tool]["ratio"], pooled[tool]["ratio_ci"]
            rows.append(
                {
                    "workload": workload,
                    "tool": tool,
                    "median": statistics.median(vals),
                    "cv": _cv(vals),
                    "range": (max(vals) - min(vals)) / statistics.median(vals),
                    "resid_cv": resid,
                    "ratio": ratio,
                    "ratio_ci": ratio_ci,
                }
            )
    return rows


def _pooled_cv(groups: list[list[float]]) -> float:
    """The CV (SD over mean, as `_cv`) with each group's deviations taken relative to its own
    mean and pooled over the groups (degrees of freedom n - groups): a difference between
    sessions does not inflate it. For one group it is `_cv`."""
    import math

    ss = dof = 0.0
    for g in groups:
        m = statistics.mean(g)
        ss += sum((x / m - 1) ** 2 for x in g)
        dof += len(g) - 1
    return math.sqrt(ss / dof) if dof > 0 else float("nan")


def pooled_table(sessions: list[dict], resamples: int = 4000, seed: int = 0) -> list[dict]:
    """Several spread runs (each one's `medians`) taken together: per workload and tool, the CV
    pooled over the runs within each session, and its ratio to the best other peer's with a 90%
    bootstrap interval (runs resampled within each session, all tools together)."""
    import random

    rng = random.Random(seed)
    rows = []
    for workload in dict.fromkeys(w for s in sessions for w in s):  # every workload, first-seen order
        having = [s for s in sessions if workload in s]
        tools = [t for t in having[0][workload] if all(t in s[workload] for s in having)]
        dropped = {t for s in having for t in s[workload]} - set(tools)
        if dropped:  # a missing peer changes what "best other peer" means: say so
            print(f"{workload}: left out {', '.join(sorted(dropped))} (not in every session)", file=sys.stderr)
        peers = [t for t in tools if t in PEER_TOOLS]
        groups = {t: [s[workload][t][: min(len(s[workload][u]) for u in tools)] for s in having] for t in tools}
        cvs = {t: _pooled_cv(g) for t, g in groups.items()}
        boots = []
        for _ in range(resamples if peers else 0):
            picks = [[rng.randrange(len(g)) for _ in g] for g in groups[tools[0]]]
            boots.append({t: _pooled_cv([[g[i] for i in idx] for g, idx in zip(groups[t], picks)]) for t in tools})
        for t in tools:
            others = [o for o in peers if o != t]
            ratio = ratio_ci = None
            if others:
                ratio = cvs[t] / min(cvs[o] for o in others)
                ratio_ci = _ratio_ci(boots, t, others)
            rows.append(
                {
                    "workload": workload,
                    "tool": t,
                    "runs": sum(len(g) for g in groups[t]),
                    "sessions": len(groups[t]),
                    "cv": cvs[t],
                    "ratio": ratio,
                    "ratio_ci": ratio_ci,
                }
            )
    return rows


def _ratio_text(row: dict) -> str:
    if row["ratio"] is None:
        return ""
    ci = row["ratio_ci"]
    return f"{row['ratio']:.2f}x" + (f" ({ci[0]:.2f}-{ci[1]:.2f})" if ci else "")


def _ratio_ci(boots: list[dict], tool: str, others: list[str]) -> tuple[float, float] | None:
    """90% percentile interval of tool's CV over the best other peer's, from bootstrap CVs."""
    import math

    from perfsuite.stats.summary import percentile

    rs = [
        b[tool] / min(b[o] for o in others)
        for b in boots
        if not any(math.isnan(b[t]) or b[t] == 0 for t in (tool, *others))
    ]
    return (percentile(rs, 5), percentile(rs, 95)) if rs else None


def format_pooled(rows: list[dict]) -> str:
    out = [
        "| workload | tool | runs (sessions) | pooled CV | CV / best other peer's (90% CI) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = _ratio_text(r)
        out.append(f"| {r['workload']} | {r['tool']} | {r['runs']} ({r['sessions']}) | {r['cv']:.1%} | {ratio} |")
    return "\n".join(out)


def format_table(rows: list[dict]) -> str:
    out = [
        "| workload | tool | median of medians | CV | CV / best other peer's (90% CI) | CV against the probe |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = _ratio_text(r)
        resid = "" if r["resid_cv"] is None else f"{r['resid_cv']:.1%}"
        out.append(
            f"| {r['workload']} | {r['tool']} | {r['median'] * 1e6:.1f} us | {r['cv']:.1%} | {ratio} | {resid} |"
        )
    return "\n".join(out)


def _load() -> list[float] | None:
    from perfsuite.measuring.system import read_load_average

    return read_load_average()


def cmd_overhead(args) -> None:
    rows = []
    for tool in TOOLS:
        vals = [fresh_process(tool, "W0", args.budget) for _ in range(args.runs)]
        rows.append((tool, min(vals), max(vals)))
    pedantic = [_pytest_benchmark("W0", args.budget, pedantic=True) for _ in range(args.runs)]
    print("| tool | W0 per-call cost (ns), min-max over runs |\n|---|---|")
    for tool, lo, hi in rows:
        print(f"| {tool} | {lo * 1e9:.0f}-{hi * 1e9:.0f} |")
    print(f"| pytest-benchmark pedantic(iterations=1) | {min(pedantic) * 1e9:.0f}-{max(pedantic) * 1e9:.0f} |")


def cmd_spread(args) -> None:
    import time

    from perfsuite.measuring.fingerprint import collect_activity
    from perfsuite.measuring.system import CpuUsage

    results: dict = {}
    probes: dict = {}
    process_medians: dict = {}
    loads: list = []
    if args.heap == "steady":  # the probe's process holds its heap like perfsuite's tools
        from perfsuite.measuring import heap as heap_setting

        heap_setting.apply("steady")
    probe = DriftProbe(("W1", "W2"), args.threads, args.probe_s) if args.probe_s > 0 else None
    before = collect_activity(2.0)
    start = time.time()
    with CpuUsage() as usage:
        # Interleave tools run by run so that machine drift spreads evenly over them.
        for run in range(args.runs):
            for workload in ("W1", "W2"):
                for tool in args.tools.split(","):
                    load0 = _load()
                    p0 = probe(workload) if probe else None
                    v, medians = fresh_process(tool, workload, args.budget, args.workers, args.threads, args.heap)
                    if probe:  # the machine's speed around the slot: mean of the probes before and after
                        probes.setdefault(workload, {}).setdefault(tool, []).append((p0 + probe(workload)) / 2)
                    loads.append(
                        {"run": run, "workload": workload, "tool": tool, "load_before": load0, "load_after": _load()}
                    )
                    results.setdefault(workload, {}).setdefault(tool, []).append(v)
                    if medians:
                        process_medians.setdefault(workload, {}).setdefault(tool, []).append(medians)
                    print(
                        f"run {run} {workload} {tool}: {v * 1e6:.1f} us (load {load0[0] if load0 else '?'})",
                        file=sys.stderr,
                        flush=True,
                    )
    machine = {
        "wall_s": time.time() - start,
        "before": before,
        "whole_run": usage.readings,
        "loads": loads,
        "workers": args.workers,
        "threads": args.threads,
        "budget_s": args.budget,
        "runs": args.runs,
        "heap": args.heap,
        "probe_s": args.probe_s,
    }
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {"medians": results, "probes": probes, "process_medians": process_medians, "machine": machine}, indent=1
            )
        )
    one_min = [x["load_before"][0] for x in loads if x["load_before"]]
    r = usage.readings
    print(
        f"Machine during the run ({machine['wall_s'] / 60:.1f} min): 1-min load average "
        f"{min(one_min):.2f}-{max(one_min):.2f} (median {statistics.median(one_min):.2f}) on 2 CPUs; "
        f"steal {r.get('steal_fraction', 0):.1%}; this run's own processes and everyone else kept "
        f"{r.get('busy_fraction', 0):.0%} of the CPUs busy.\n"
    )
    print(format_table(spread_table(results, probes or None)))


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("overhead")
    o.add_argument("--runs", type=int, default=3)
    o.add_argument("--budget", type=float, default=2.0)
    s = sub.add_parser("spread")
    s.add_argument("--runs", type=int, default=7)
    s.add_argument("--budget", type=float, default=5.0)
    s.add_argument("--out")
    s.add_argument("--tools", default=",".join(TOOLS))
    s.add_argument("--workers", type=int, default=WORKERS)
    s.add_argument(
        "--heap", choices=("default", "steady"), default="default", help="perfsuite's --heap for the perfsuite tools"
    )
    s.add_argument("--threads", type=int, default=2, help="torch threads in every tool (the protocol: 2)")
    s.add_argument(
        "--probe-s",
        type=float,
        default=0.6,
        help="seconds of each drift probe, before and after every slot, in this process (0: none)",
    )
    pool = sub.add_parser("pool", help="pool several spread JSON files (sessions) into one table")
    pool.add_argument("files", nargs="+")
    one = sub.add_parser("one")
    one.add_argument("tool")
    one.add_argument("workload")
    one.add_argument("budget", type=float)
    one.add_argument("--workers", type=int, default=WORKERS)
    one.add_argument("--heap", choices=("default", "steady"), default="default")
    one.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    if args.cmd == "one":
        print(measure_once(args.tool, args.workload, args.budget, args.workers, args.threads, args.heap))
    elif args.cmd == "pool":
        print(format_pooled(pooled_table([json.loads(Path(f).read_text())["medians"] for f in args.files])))
    elif args.cmd == "overhead":
        cmd_overhead(args)
    else:
        cmd_spread(args)


if __name__ == "__main__":
    main()
