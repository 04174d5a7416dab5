"""perfsuite beside pytest-benchmark and torch.utils.benchmark, with the protocol of
../shared/ANCHORS.md: per-call overhead on an empty function (W0), and the spread of the
reported median over 7 fresh processes for a 256x256 matmul (W1) and a ResNet18 batch-8
training step (W2), every tool with the same time budget.

    python scripts/peers.py overhead
    python scripts/peers.py spread [--runs 7] [--budget 5] [--workers 4] [--out reports/peers/spread.json]

`perfsuite-workers` is perfsuite's worker mode (`--processes N`): the same total budget spread
over N fresh spawned workers, the reported median the median of their medians. The spread run
records the machine's load average before and after each measurement and the steal and other
processes' CPU use over the whole run (perfsuite.system). Writes a markdown table to stdout.
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
    from perfsuite.record import Work
    from perfsuite.workload import BuiltStep

    return BuiltStep(fn=make_step(params["w"], params["threads"]), work=Work(items_per_step=1, item_unit="steps"))


def measure_once(tool: str, workload: str, budget: float, workers: int = WORKERS, threads: int = 2,
                 heap: str = "default") -> float:
    """Median seconds per call reported by `tool` in this process (or its workers); `heap` is
    perfsuite's --heap for the perfsuite tools (the peers have no such setting)."""
    if tool == "perfsuite-workers":
        from perfsuite.config import RunConfig
        from perfsuite.params import Param
        from perfsuite.workers import run_in_workers
        from perfsuite.workload import Workload

        peer = Workload("peer", "the protocol's W0/W1/W2 step", (Param("w", str, "W1"), Param("threads", int, 2)),
                        _build)
        rec = run_in_workers(peer, {"w": workload, "threads": threads},
                             RunConfig(max_time=budget, processes=workers, device="cpu", heap=heap))
        print(json.dumps({"medians": list(rec.spread.medians), "between_share": rec.spread.between_share}),
              file=sys.stderr)
        return rec.median_s
    if tool in ("perfsuite", "perfsuite-min-time"):
        from perfsuite.config import RunConfig
        from perfsuite.measure.timing import PerfCounterClock
        from perfsuite.runner import measure
        from perfsuite.stats import median

        # perfsuite-min-time: keep measuring for 60% of the budget even once the CI has converged.
        min_time = 0.6 * budget if tool == "perfsuite-min-time" else 0.0
        from perfsuite.measure import heap as heap_setting

        heap_setting.apply(heap)
        m = measure(make_step(workload, threads), PerfCounterClock(), RunConfig(max_time=budget, min_time=min_time))
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
        call = ("benchmark.pedantic(step, rounds=20000, iterations=1)" if pedantic else "benchmark(step)")
        test.write_text(textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from peers import make_step
            step = make_step({workload!r}, {threads})
            def test_peer(benchmark):
                {call}
        """))
        out = Path(d) / "out.json"
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test), "-o", "addopts=",
             "-W", "ignore", f"--benchmark-max-time={budget}", f"--benchmark-json={out}", "-c", "/dev/null"],
            check=True, capture_output=True, cwd=d,
        )
        return json.loads(out.read_text())["benchmarks"][0]["stats"]["median"]


def fresh_process(tool: str, workload: str, budget: float, workers: int = WORKERS, threads: int = 2,
                  heap: str = "default") -> float:
    res = subprocess.run([sys.executable, __file__, "one", tool, workload, str(budget), "--workers", str(workers),
                          "--threads", str(threads), "--heap", heap],
                         check=True, capture_output=True, text=True)
    return float(res.stdout.strip().splitlines()[-1])


def _load() -> list[float] | None:
    from perfsuite.system import read_load_average

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

    from perfsuite.env import collect_activity
    from perfsuite.system import CpuUsage

    results: dict = {}
    loads: list = []
    before = collect_activity(2.0)
    start = time.time()
    with CpuUsage() as usage:
        # Interleave tools run by run so that machine drift spreads evenly over them.
        for run in range(args.runs):
            for workload in ("W1", "W2"):
                for tool in args.tools.split(","):
                    load0 = _load()
                    v = fresh_process(tool, workload, args.budget, args.workers, args.threads, args.heap)
                    loads.append({"run": run, "workload": workload, "tool": tool, "load_before": load0,
                                  "load_after": _load()})
                    results.setdefault(workload, {}).setdefault(tool, []).append(v)
                    print(f"run {run} {workload} {tool}: {v * 1e6:.1f} us (load {load0[0] if load0 else '?'})",
                          file=sys.stderr, flush=True)
    machine = {"wall_s": time.time() - start, "before": before, "whole_run": usage.readings, "loads": loads,
               "workers": args.workers, "threads": args.threads, "budget_s": args.budget, "runs": args.runs,
               "heap": args.heap}
    if args.out:
        Path(args.out).write_text(json.dumps({"medians": results, "machine": machine}, indent=1))
    one_min = [x["load_before"][0] for x in loads if x["load_before"]]
    r = usage.readings
    print(f"Machine during the run ({machine['wall_s'] / 60:.1f} min): 1-min load average "
          f"{min(one_min):.2f}-{max(one_min):.2f} (median {statistics.median(one_min):.2f}) on 2 CPUs; "
          f"steal {r.get('steal_fraction', 0):.1%}; this run's own processes and everyone else kept "
          f"{r.get('busy_fraction', 0):.0%} of the CPUs busy.\n")
    print(f"| workload | tool | median of medians | CV | (max-min)/median |\n|---|---|---|---|---|")
    for workload, by_tool in results.items():
        for tool, vals in by_tool.items():
            med = statistics.median(vals)
            cv = statistics.stdev(vals) / statistics.mean(vals)
            print(f"| {workload} | {tool} | {med * 1e6:.1f} us | {cv:.1%} | {(max(vals) - min(vals)) / med:.1%} |")


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
    s.add_argument("--heap", choices=("default", "steady"), default="default",
                   help="perfsuite's --heap for the perfsuite tools")
    s.add_argument("--threads", type=int, default=2, help="torch threads in every tool (the protocol: 2)")
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
    elif args.cmd == "overhead":
        cmd_overhead(args)
    else:
        cmd_spread(args)


if __name__ == "__main__":
    main()
