"""A fake, seeded clock for driving the runner's timing logic without real time or a GPU."""

from __future__ import annotations

import numpy as np


class FakeClock:
    """Models a device whose step takes `step_s`, with multiplicative noise per block and a
    fixed cost `sync_s` per reading (the synchronisation/event cost a CUDA clock adds).

    Cold start, two shapes: a plateau (the first `cold_steps` steps take `cold_factor` x), or
    a decay (step i takes 1 + (decay_factor - 1) * decay**i times as long). Time advances only
    when blocks run, plus `bookkeeping_s` per reading. `speed(fn)` scales the time of one callable
    (builds of a step that differ in speed)."""

    method = "fake"

    def __init__(
        self,
        step_s: float,
        sync_s: float = 0.0,
        noise: float = 0.0,
        seed: int = 0,
        cold_steps: int = 0,
        cold_factor: float = 1.0,
        decay_factor: float = 1.0,
        decay: float = 0.0,
        bookkeeping_s: float = 1e-6,
        speed=None,
    ) -> None:
        self.step_s = step_s
        self.sync_s = sync_s
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.cold_left = cold_steps
        self.cold_factor = cold_factor
        self.decay_factor = decay_factor
        self.decay = decay
        self.bookkeeping_s = bookkeeping_s
        # speed(fn) -> a factor on the step time of that callable: builds of one step that run at
        # different speeds (where their memory landed), as separate runs do.
        self.speed = speed
        self.t = 0.0
        self.steps_run = 0
        self.readings = 0

    def time_block(self, fn, n: int) -> float:
        cold = min(self.cold_left, n)
        self.cold_left -= cold
        work = (cold * self.cold_factor + (n - cold)) * self.step_s
        if self.decay_factor != 1.0 and n:
            # Closed form of sum_{k=i}^{i+n-1} decay**k.
            geo = self.decay**self.steps_run * (1 - self.decay**n) / (1 - self.decay)
            work += (self.decay_factor - 1.0) * geo * self.step_s
        if self.speed is not None:
            work *= self.speed(fn)
        if self.noise and n:
            work *= max(0.05, 1.0 + self.rng.normal(0.0, self.noise))
        reading = work + self.sync_s
        self.t += reading + self.bookkeeping_s
        self.steps_run += n
        self.readings += 1
        return reading

    def now(self) -> float:
        return self.t


def build_spread_case(
    seed: int,
    step_s: float = 1e-3,
    spread: float = 0.05,
    noise: float = 0.01,
    machine: float = 1.0,
    reference_s: float | None = None,
):
    """One simulated fresh run of a toy workload: every build of its step that the runner makes
    runs at its own speed, a factor drawn lognormal(0, `spread`) (median 1) when it is built, as
    builds in separate runs differ (where their memory landed). `machine` scales every block of
    the run, the step's and any other callable's (the machine-speed reference kernel, whose call
    takes `reference_s`, default `step_s`): how fast the machine ran during this run. Returns
    (workload, clock); the step's true median over runs is `step_s` x `machine`."""
    from perfsuite.core.record import Work
    from perfsuite.core.workload import BuiltStep, Workload

    rng = np.random.default_rng(seed)
    factors: dict = {}

    def build(params, device):
        def step():
            return None

        factors[step] = float(rng.lognormal(0.0, spread))
        return BuiltStep(fn=step, work=Work(items_per_step=1, item_unit="calls"))

    other = (reference_s or step_s) / step_s
    clock = FakeClock(step_s=step_s, noise=noise, seed=seed, speed=lambda fn: machine * factors.get(fn, other))
    return Workload("toy", "builds that differ in speed", (), build), clock


def process_spread_case(
    seed: int,
    step_s: float = 1e-3,
    spread: float = 0.05,
    build_spread: float = 0.005,
    noise: float = 0.01,
    reference_s: float = 1e-4,
):
    """One simulated fresh *process* of a toy workload: its speed factor, drawn lognormal(0, `spread`)
    (median 1), moves every build made in it alike (where the process's memory and threads landed),
    and each build adds only lognormal(0, `build_spread`) of its own. Builds inside one process then
    agree closely while processes do not: the case a one-process run cannot see. Returns (workload,
    clock); the step's true median over processes is `step_s`."""
    from perfsuite.core.record import Work
    from perfsuite.core.workload import BuiltStep, Workload

    rng = np.random.default_rng(seed)
    process = float(rng.lognormal(0.0, spread))
    factors: dict = {}

    def build(params, device):
        def step():
            return None

        factors[step] = process * float(rng.lognormal(0.0, build_spread))
        return BuiltStep(fn=step, work=Work(items_per_step=1, item_unit="calls"))

    # Any other callable is the machine-speed reference kernel: what moved the process (where its
    # memory landed) does not move it, and neither does a slower step.
    clock = FakeClock(step_s=step_s, noise=noise, seed=seed, speed=lambda fn: factors.get(fn, reference_s / step_s))
    return Workload("toy", "processes that differ in speed", (), build), clock


def multi_process_run(seed: int, processes: int = 5, slower: float = 1.0, max_time: float = 4.0):
    # 0.8 s a process: enough for the machine-speed reference's three blocks (reference.MIN_BLOCKS).
    """One simulated `perfsuite run` over `processes` worker processes, as perfsuite.measuring.workers
    does it (each worker measures its share with the runner, one build; the parent merges), but with
    every process simulated in this one by process_spread_case: no real time, no fork."""
    from dataclasses import replace

    from perfsuite.core.config import RunConfig
    from perfsuite.measuring import workers
    from perfsuite.measuring.runner import time_case

    cfg = RunConfig(max_time=max_time, device="cpu", processes=processes)
    share = replace(cfg, processes=1, max_time=max_time / processes, builds=1)
    records = []
    for i in range(processes):
        workload, clock = process_spread_case(1000 * seed + i, step_s=1e-3 * slower)
        records.append(time_case(workload, {}, share, clock=clock))
    return workers.merge(records, list(range(processes)), cfg)
