"""The two sides of `perfsuite why` as processes: two revisions, or two values of one parameter.

Two revisions of one package cannot share an interpreter's module table, so each side runs in a
side process of its own (perfsuite.compare.sides), as the gate's do; `--vary` takes the same
road with one file and two parameter sets, so both modes profile and time alike. The side
processes answer the "profile", "memory" and "signature" requests of perfsuite.compare.side_worker. A
comparison is one case measured through the one case loop (perfsuite.run.execute.run_cases)
with `WhyArms` as its Measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfsuite.compare import revisions, sides
from perfsuite.compare.why import TOP, ProfiledSide, WhyResult, why
from perfsuite.core.case import Case, Context, Measure
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import ConfigError, PerfsuiteError


class ProcessSide(ProfiledSide):
    """A side process holding one build; each request runs there."""

    def __init__(self, side: sides.Side, params: dict, cpu_time: bool = False) -> None:
        self.side, self.label, self.params, self.cpu_time = side, side.label, params, cpu_time

    def profile(self, steps: int) -> list[dict]:
        return self.side.request({"op": "profile", "build": 0, "steps": steps})["ops"]

    def time(self, n: int) -> float:
        return self.side.steps[0].time(n, self.cpu_time)

    def memory(self) -> dict:
        return self.side.request({"op": "memory", "build": 0})["memory"]

    def signature(self) -> dict | None:
        # A side that cannot take one (an older perfsuite in its checkout, a step that refuses the
        # dispatch mode) leaves the result's work "not recorded", as the gate's sides do.
        try:
            return self.side.request({"op": "signature", "build": 0}).get("signature")
        except PerfsuiteError:
            return None


@dataclass(frozen=True)
class WhyArms(Measure):
    """A case measured as a differential profile: side A and side B, each (label, workload file,
    the checkout its project's code must come from or None), one process each; `vary`
    (key, a, b) gives the sides two values of one parameter, else both take the case's."""

    side_a: tuple
    side_b: tuple
    how: str
    vary: tuple | None = None
    threads: int | None = None
    steps: int = 5
    rounds: int = 4
    top: int = TOP
    # The variant both sides build (perfsuite.variants: bisect and history --variant profile the
    # path they found the change on); None: the workload's own step.
    variant: str | None = None
    kind = "why"

    def variants(self, case: Case) -> list[dict[str, Any]]:
        if self.vary is None:
            return [dict(case.params)]
        key, a, b = self.vary
        return [{**case.params, key: a}, {**case.params, key: b}]

    def measure(self, case: Case, cfg: RunConfig, ctx: Context) -> WhyResult:
        from perfsuite.measuring.timing import clock_for

        params = [case.workload.resolve(v) for v in self.variants(case)]
        if len(params) == 1:  # two revisions: both sides take the case's parameters
            params *= 2
        running: list[sides.Side] = []
        try:
            # The heap as malloc keeps it: a held heap would hide the step's memory from its peak RSS.
            specs = [
                dict(
                    label=label,
                    file=file,
                    workload=case.workload.name,
                    params=p,
                    device=cfg.device,
                    builds=1,
                    heap="default",
                    threads=self.threads,
                    root=root,
                    variant=self.variant,
                )
                for (label, file, root), p in zip((self.side_a, self.side_b), params)
            ]
            started = sides.start_all(specs, running)
            # The gate's clock for these sides: each timing thread's CPU time where the step never
            # waits, on one thread (a wall clock under load read nanoGPT's int8 flash-attention
            # commit +62% (95% CI +51% to +66%) slower, where the gates said 7-10% faster).
            cpu_time = sides.SideClock.for_device(cfg.device).for_sides(started, cfg.device, self.threads).cpu_time
            built = [ProcessSide(s, p, cpu_time) for s, p in zip(started, params)]
            return why(
                case.workload.name,
                cfg.device,
                self.how,
                built[0],
                built[1],
                clock_for(cfg.device, "host").now,
                self.steps,
                self.rounds,
                self.top,
                "thread CPU time" if cpu_time else "wall",
            )
        finally:
            for s in running:
                s.close()


def compare(workload, params: dict, arms: WhyArms, device: str) -> WhyResult:
    """One comparison through the case loop; a side that fails is an error naming it (exit 2)."""
    from perfsuite.run.execute import check_cases, run_cases

    with sides.placed(device, arms.threads):  # the driver off the sides' core (sides.side_cpus)
        out = run_cases(check_cases([Case(workload, params)], device, arms), RunConfig(device=device))
    return out.only(
        lambda why: ConfigError(f"{workload.name}: {why}"), lambda error: ConfigError(f"why {workload.name}: {error}")
    )


def why_revision(
    workload, params: dict, base_ref: str, device: str, workloads_from: str = revisions.TREE, **kw: Any
) -> WhyResult:
    """The workload at `base_ref` (A, from a temporary worktree) against the working tree (B), each
    side with the workload file `workloads_from` says (revisions.Revisions)."""
    variant = kw.get("variant")
    with revisions.Revisions(workload, workloads_from) as revs, revs.checkout(base_ref) as base_root:
        arms = WhyArms(
            (f"base {base_ref}", *revs.side(base_root)),
            ("working tree", *revs.side(revs.repo)),
            f"--base {base_ref}" + (f", variant {variant}" if variant else ""),
            **kw,
        )
        return compare(workload, params, arms, device)


def why_commits(
    workload, params: dict, revs: revisions.Revisions, commit_a: str, commit_b: str, device: str, **kw: Any
) -> WhyResult:
    """Two commits of the workload's repository, each from its own temporary worktree (bisect's
    good revision against the commit it named)."""
    variant = kw.get("variant")
    with revisions.worktree(revs.repo, commit_a) as root_a, revisions.worktree(revs.repo, commit_b) as root_b:
        arms = WhyArms(
            (commit_a[:12], *revs.side(root_a)),
            (commit_b[:12], *revs.side(root_b)),
            f"{commit_a[:12]}..{commit_b[:12]}" + (f", variant {variant}" if variant else ""),
            **kw,
        )
        return compare(workload, params, arms, device)


def why_vary(workload, params: dict, key: str, a, b, device: str, **kw: Any) -> WhyResult:
    """Two values of one parameter of the working tree's workload."""
    file_now = revisions.workload_file(workload.source, workload.name)
    variant = kw.get("variant")
    how = f"--vary {key}={a},{b}" + (f", variant {variant}" if variant else "")
    arms = WhyArms((f"{key}={a}", file_now, None), (f"{key}={b}", file_now, None), how, vary=(key, a, b), **kw)
    return compare(workload, params, arms, device)
