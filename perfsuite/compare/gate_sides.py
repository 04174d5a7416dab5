"""The gate on revisions: each side in processes of its own (perfsuite.compare.sides), the base
in a worktree of its revision (perfsuite.compare.revisions), measured as the gate's two arms
through the one case loop, and the noise floor learned the same way (the working tree against
itself). The paired test itself is perfsuite.compare.paired_gate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from perfsuite.compare import energy_pairs, revisions, sides
from perfsuite.compare.paired_gate import (
    MIN_PAIRS,
    ROUNDS,
    GateVerdict,
    across_cases,
    look_decision,
    paired_ratios,
    pooled,
    round_looks,
    rounds_fitting,
    rounds_for,
)
from perfsuite.compare.settings import GateSettings
from perfsuite.core.case import Case, Context, Measure
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import PerfsuiteError
from perfsuite.measuring.timing import Clock
from perfsuite.stats import sequential, verdict
from perfsuite.stats import summary as stats


def side_clock(clock, processes: list, device: str, threads: int | None):
    """The clock a case's side processes are timed with (sides.SideClock.for_sides); a clock that
    cannot choose (a test's fake) is used as it is."""
    return clock.for_sides(processes, device, threads) if hasattr(clock, "for_sides") else clock


def allowed_builds(workload, builds: int) -> int:
    """Processes a side may start at once: `builds`, at most the workload's `max_builds` (issue 54:
    a 7B model that declares one copy got six on one GPU, ran out of memory, and history and
    bisect then skipped every commit)."""
    most = getattr(workload, "max_builds", None)
    return max(1, min(builds, most)) if most else builds


def sides_settle(processes: list) -> dict | None:
    """Each side process's heap.settle account (None where its heap is not held), for the verdict."""
    accounts = [dict(s.settle, side=s.label) for s in processes if getattr(s, "settle", None)]
    return {"sides": accounts} if accounts else None


def _side_processes(
    sides,
    file_a,
    file_b,
    labels,
    name: str,
    params: dict,
    device: str,
    k: int,
    heap_mode: str,
    threads: int | None,
    running: list,
    pool=None,
    pool_b=None,
    variants: tuple = (None, None),
    seed: int | None = None,
) -> tuple[list, list]:
    """k processes for each side, started together (A B A B ...); each holds one build. `file_a`, `file_b`:
    (workload file, the checkout its project's code must come from, or None). Two processes of the
    same code differ by a few percent (where their memory lands), so the pairs rotate through k
    of each, as the in-process gate rotates through builds. With a `pool` (sides.SidePool), side
    A's processes are the pool's, kept alive for its owner (bisect's good revision); with `pool_b`,
    B's are that pool's (a history keeps a commit's sides for the pair after, where it is A).
    `variants`: each side's variant of the step (perfsuite.variants; None: the workload's own);
    `seed`: every side builds from seeded generators (the same weights and inputs)."""
    for p in (pool, pool_b):
        if p is not None:
            p.next_case()
    specs = [
        dict(
            label=label,
            file=f,
            workload=name,
            params=params,
            device=device,
            builds=1,
            heap=heap_mode,
            threads=threads,
            root=root,
            keep=keep,
            variant=variant,
            seed=seed,
        )
        for _ in range(k)
        for (f, root), label, keep, variant in (
            (file_a, labels[0], pool, variants[0]),
            (file_b, labels[1], pool_b, variants[1]),
        )
    ]
    started = sides.start_all(specs, running, pool)
    return started[0::2], started[1::2]


@dataclass(frozen=True)
class GateArms(Measure):
    """A case measured as the gate's two arms: the workload from the base revision's checkout and
    from the working tree, each side in `builds` processes of its own (perfsuite.compare.sides),
    started, gated for the case's budget and stopped before the next case's."""

    file_base: Any  # (workload file, the checkout its project's code comes from, or None)
    file_now: Any
    labels: tuple[str, str]
    builds: int
    heap_mode: str
    threads: int | None
    threshold: float
    fdr: float
    clock: Clock
    floors: dict = field(default_factory=dict)
    base_pool: Any = None  # sides.SidePool keeping the base side's processes across cases (bisect)
    new_pool: Any = None  # the same for the new side (a history: this commit is the next pair's base)
    looks: tuple = sequential.LOOKS  # fractions of the case's budget at which its test is read
    direction: int = 1  # 1: is the working tree slower? -1: faster? (bisect --faster)
    progress: Any = None  # called with one line of what is happening (the console's status line)
    rounds: int = ROUNDS  # rounds of fresh side processes the budget is split into
    side_variants: tuple = (None, None)  # each side's variant of the step (gate --variant, perfsuite variants)
    seed: int | None = None  # every side's build seeded (a variant study compares outputs)
    # Called after the first round's pairs with that round's (base, new) sides, outside the pairs:
    # what else the caller asks of them (a variant study's outputs, evaluation and latencies).
    after_first: Any = None
    energy: bool = False  # joules per step paired after the first round's pairs (perfsuite.compare.energy_pairs)
    kind = "gate"

    @classmethod
    def of(cls, settings: GateSettings, file_base, file_now, labels: tuple[str, str], device: str, **kw) -> GateArms:
        """Arms measured as `settings` say (builds, heap, threads, threshold, fdr, and the variant
        both sides time), timed by the driver's clock for `device`; `kw`: the rest of the fields."""
        kw.setdefault("side_variants", (settings.variant, settings.variant))
        kw.setdefault("energy", settings.energy_on(device))
        return cls(file_base, file_now, labels, settings.builds, settings.heap, settings.threads,
                   settings.threshold, settings.fdr, sides.SideClock.for_device(device), **kw)  # fmt: skip

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(text)

    def look_said(self, case: Case, earlier: int, round_no: int):
        """The pairs' progress as one line: the round, how many pairs, their median so far."""
        if self.progress is None:
            return None

        def said(ratios: list[float], read: int, looks: int) -> None:
            self.say(
                f"{case.label}: round {round_no}, {earlier + len(ratios)} pairs, "
                f"this round's median ratio {stats.median(ratios):.3f}"
            )

        return said

    def look_bounds(self, rounds: int) -> dict[int, float]:
        """The rounds after which the sequential test is read, each with its boundary (O'Brien-
        Fleming alpha spending over the looks as fractions of `rounds`)."""
        at = round_looks(self.looks, rounds)
        return dict(zip(at, sequential.boundaries(tuple(k / rounds for k in at), self.fdr)))

    @contextlib.contextmanager
    def side_processes(self, case: Case, cfg: RunConfig, pools: bool = True):
        """The case's side processes while they are used: (base's, the working tree's), each a list
        of `builds` sides; the ones started for this case are closed on the way out (a pool's stay).
        `pools=False`: fresh processes for both sides, whatever pools the arms keep."""
        running: list = []
        k = allowed_builds(case.workload, self.builds)
        try:
            self.say(f"{case.label}: starting {2 * k} side processes (builds, then the heap settling)")
            started = _side_processes(
                sides,
                self.file_base,
                self.file_now,
                self.labels,
                case.workload.name,
                case.resolved,
                cfg.device,
                k,
                self.heap_mode,
                self.threads,
                running,
                self.base_pool if pools else None,
                self.new_pool if pools else None,
                self.side_variants,
                self.seed,
            )
            self.say(f"{case.label}: sides ready; calibrating")
            yield started
        finally:
            for s in running:
                s.close()

    def measure(self, case: Case, cfg: RunConfig, ctx: Context) -> GateVerdict:
        """The budget in `rounds` rounds, each in fresh side processes (the first may take a pool's)
        filling its share with pairs; the sequential test is read over every round's pairs so far
        at the round ends its looks fall on (round_looks), each pairing of each round a unit of
        the interval (perfsuite.stats.verdict.pairings).

        Why rounds: every side process draws its own memory layout (side_worker.shifted_layout),
        and under load the processes of one round share the load's moment, so the rounds'
        disagreement is the error of the estimate, on k - 1 degrees of freedom (paired_gate.pooled: each
        round one unit). One round of three pairings gave t(2) intervals of 0.90-1.12 around an
        unchanged step; twelve rounds of one process a side give t(11) from the same budget.
        Starting the processes again costs a fork and a build per side a round (issue 49)."""
        threshold = max(self.threshold, self.floors.get(case.label, 0.0))
        rounds = rounds_for(cfg.max_time, self.rounds)
        refitted = None
        bounds = self.look_bounds(rounds)
        runs: list = []
        read: list[dict] = []
        energy_said = None
        decision, p_scaled, t0 = None, 1.0, self.clock.now()
        clock = self.clock
        r = 0
        while r < rounds:  # `rounds` may shrink after the first (rounds_fitting)
            r += 1
            with self.side_processes(case, cfg, pools=r == 1) as (base, now):
                if r == 1:  # one clock for every round of the case: the first round's sides decide
                    clock = side_clock(self.clock, base + now, cfg.device, self.threads)
                run = paired_ratios(
                    [s.steps[0] for s in base],
                    [s.steps[0] for s in now],
                    clock,
                    cfg.max_time / rounds,
                    on_look=self.look_said(case, sum(len(x.ratios) for x in runs), r),
                )
                if r == 1:  # a long step's least pairs may not fit a round's share: fewer rounds
                    # In the clock the shares are spent in (the sides' CPU time on a CPU: under load
                    # the wall time is longer, as it is for every round).
                    least = max(MIN_PAIRS, verdict.MIN_UNIT_PAIRS * len(base))  # paired_ratios' floor
                    pair_s = _pair_seconds(run)
                    least_s = least * pair_s
                    fits = rounds_fitting(cfg.max_time, rounds, pair_s, least)
                    if fits < rounds:
                        refitted = (
                            f"a round's least {least} pairs take {least_s:.1f} s: {fits} rounds, not {rounds}"
                            + (
                                f" (the fewest; about {fits * least_s:.0f} s of pairs, over the {cfg.max_time:g} s budget)"
                                if fits * least_s > cfg.max_time
                                else f", in the {cfg.max_time:g} s budget"
                            )
                        )
                        self.say(f"{case.label}: {refitted}")
                        rounds = fits  # before any look is read: the new schedule spends alpha afresh
                        bounds = self.look_bounds(rounds)
                if r == 1:  # after the round's pairs, outside them: what each side's step dispatches
                    held = (
                        self.heap_mode == "steady"
                        and cfg.device == "cpu"
                        and any(getattr(side, "settle", None) for side in base + now)
                    )  # the note is about glibc's heap, held in fact
                    work_said = sides_work(base[0], now[0], held)
                    if self.energy:  # and its joules per step, in second-long regions of their own
                        self.say(
                            f"{case.label}: pairing energy per step ({energy_pairs.PAIRS} pairs of about 1 s a side)"
                        )
                        energy_said = energy_pairs.sides_energy(base[0], now[0], threshold, self.fdr)
                    if self.after_first is not None:
                        self.after_first(case, base, now)
                # The faults that matter happen in the sides' timed blocks, not in this process.
                runs.append(
                    replace(
                        run,
                        faults_per_pair=sum(s.faults for s in base + now) / max(len(run.ratios), 1),
                        settle=sides_settle(base + now),
                    )
                )
            if r not in bounds:
                continue
            every = pooled(runs)
            decision, p = look_decision(
                every.ratios, every.units, threshold, bounds[r], r == rounds, self.fdr, self.direction
            )
            p_scaled = sequential.p_on_alpha_scale(p, bounds[r], self.fdr)
            read.append(
                {
                    "pairs": len(every.ratios),
                    "p": p,
                    "boundary": bounds[r],
                    "seconds": self.clock.now() - t0,
                    "round": r,
                }
            )
            self.say(f"{case.label}: {len(every.ratios)} pairs after round {r} of {rounds}; look read")
            if decision is not None:
                break
        return GateVerdict(
            case.label,
            threshold,
            replace(pooled(runs), looks=tuple(read), decision=decision, p=p_scaled),
            alpha=self.fdr,
            direction=self.direction,
            work=work_said[0],
            work_changes=work_said[1],
            notes=work_said[2] + ([refitted] if refitted else []),
            energy=energy_said,
        )


def _pair_seconds(run) -> float:
    """Seconds of one pair of `run`'s timed blocks (A's block, then B's: A's time times 1 + ratio)."""
    if not run.seconds_a:
        return 0.0
    total = sum(a * (1 + x) for a, x in zip(run.seconds_a, run.ratios))
    return run.block_size * total / len(run.seconds_a)


def sides_work(base, new, heap_held: bool = False) -> tuple[str, list[str], list[str]]:
    """(kind, details, notes) of the change between two sides' steps, from their work signatures
    (perfsuite.compare.work); a side that cannot take one (an older perfsuite in its checkout, a
    step that refuses the dispatch mode) leaves it "work not recorded". `heap_held`: the sides
    hold their heap steady, and a change in the bytes a step allocates gets a note saying what
    that leaves out (work.held_heap_note)."""
    from perfsuite.compare import work

    signatures = []
    for side in (base, new):
        try:
            signatures.append(side.request({"op": "signature", "build": 0}).get("signature"))
        except PerfsuiteError:
            signatures.append(None)
    note = work.held_heap_note(*signatures) if heap_held else None
    return (*work.change(*signatures), [note] if note else [])


def gate_sides(
    new,
    cases: Sequence[Mapping[str, Any]],
    base_ref: str,
    device: str,
    floors: dict,
    settings: GateSettings,
    *,
    workloads_from: str = "tree",
    events=None,
    progress=None,
    commit: str | None = None,
):
    """Gate each case of `new` at `base_ref` against the working tree through the one case loop
    (perfsuite.run.execute.run_cases, measuring GateArms); Benjamini-Hochberg then runs across the
    cases that were gated. Each side loads the workload file `workloads_from` says
    (revisions.Revisions: the working tree's by default) beside its own revision's code. Returns
    run_cases' Outcome: `records` holds the verdicts, a case whose side failed is in `failures`.
    `progress(text)` hears what is happening (sides starting, pairs so far). `commit`: gate that
    commit against its first parent instead (both in worktrees; `base_ref` is not used)."""
    from perfsuite.run.execute import check_cases, run_cases

    with contextlib.ExitStack() as held:
        revs = held.enter_context(revisions.Revisions(new, workloads_from))
        if commit is None:
            base_root, new_root = held.enter_context(revs.checkout(base_ref)), revs.repo
            labels = (f"base {base_ref}", "working tree")
            shas = (revisions.resolve_commit(base_ref, revs.repo), revisions.resolve_commit("HEAD", revs.repo))
        else:
            sha = revisions.resolve_commit(commit, revs.repo, "--commit")
            base_root = held.enter_context(revs.checkout(f"{sha}^", "--commit's parent"))
            new_root = held.enter_context(revs.checkout(commit, "--commit"))
            labels = (f"parent of {commit}", f"commit {commit}")
            shas = (revisions.resolve_commit(f"{sha}^", revs.repo, "--commit's parent"), sha)
        arms = GateArms.of(settings, revs.side(base_root), revs.side(new_root), labels, device, floors=floors,
                           progress=progress)  # fmt: skip
        with sides.placed(device, settings.threads):
            out = run_cases(
                check_cases([Case(new, c) for c in cases], device, arms),
                RunConfig(device=device, max_time=settings.max_time),
                events=events,
            )
    across_cases(out.records, settings.fdr)
    out.records[:] = [replace(v, base_commit=shas[0], new_commit=shas[1]) for v in out.records]
    return out


@dataclass(frozen=True)
class NoiseFloor(Measure):
    """A case measured as its noise floor: the working tree against itself (floor_sides)."""

    runs: int
    builds: int
    heap_mode: str
    threads: int | None
    kind = "noise-floors"

    def measure(self, case: Case, cfg: RunConfig, ctx: Context) -> float:
        return floor_sides(
            case.workload,
            dict(case.params),
            cfg.device,
            self.runs,
            cfg.max_time,
            self.builds,
            self.heap_mode,
            self.threads,
        )


def floor_sides(
    new, case: dict, device: str, runs: int, budget_s: float, builds: int, heap_mode: str, threads: int | None
) -> float:
    """The noise floor as the gate sees it: the working tree against itself, each side in fresh
    processes (so the floor holds the difference between processes), the largest |median - 1|."""

    file_now = revisions.workload_file(new.source, new.name)
    clock = sides.SideClock.for_device(device)
    worst = 0.0
    with sides.placed(device, threads):
        for _ in range(runs):
            running: list = []
            try:
                a, b = _side_processes(
                    sides,
                    (file_now, None),
                    (file_now, None),
                    ("A", "A'"),
                    new.name,
                    new.resolve(case),
                    device,
                    allowed_builds(new, builds),
                    heap_mode,
                    threads,
                    running,
                )
                run = paired_ratios(
                    [s.steps[0] for s in a], [s.steps[0] for s in b], clock.for_sides(a + b, device, threads), budget_s
                )
                worst = max(worst, abs(run.median - 1.0))
            finally:
                for s in running:
                    s.close()
    return worst
