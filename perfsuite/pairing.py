"""Two variants of one workload that differ in a single parameter, measured interleaved in one
process (A B, B A, ...), so drift cancels: the time ratio with its 95% interval, and the ratio
of bytes autograd saves for backward."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from perfsuite import stats
from perfsuite.errors import PerfsuiteError
from perfsuite.gate import paired_ratios
from perfsuite.measure.saved import saved_tensor_bytes
from perfsuite.measure.timing import Clock
from perfsuite.workload import Workload


@dataclass(frozen=True)
class PairResult:
    workload: str
    params: dict  # the shared parameters
    vary: str
    a: str
    b: str
    ratios: list[float]  # per pair: time_a / time_b
    saved_bytes_a: int
    saved_bytes_b: int

    @property
    def time_ratio(self) -> float:
        return stats.median(self.ratios)

    @property
    def time_ratio_ci(self) -> tuple[float, float] | None:
        return stats.median_ci(self.ratios)

    @property
    def saved_ratio(self) -> float | None:
        return self.saved_bytes_a / self.saved_bytes_b if self.saved_bytes_b else None

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.update(time_ratio=self.time_ratio, time_ratio_ci=self.time_ratio_ci, saved_ratio=self.saved_ratio)
        return d


def pair(workload: Workload, params: dict, vary: str, a, b, device: str, clock: Clock, budget_s: float) -> PairResult:
    pa, pb = workload.resolve({**params, vary: a}), workload.resolve({**params, vary: b})
    step_a, step_b = workload.build(pa, device).fn, workload.build(pb, device).fn
    saved = [saved_tensor_bytes(s) for s in (step_a, step_b)]
    run = paired_ratios(step_b, step_a, clock, budget_s)  # ratio = time_a / time_b
    shared = {k: v for k, v in pa.items() if k != vary}
    return PairResult(workload.name, shared, vary, str(a), str(b), run.ratios, saved[0], saved[1])


def pair_command(args, console) -> int:
    """`perfsuite pair`: each case's time ratio A/B with its CI, written case by case with --out."""
    from perfsuite import registry
    from perfsuite.config import resolve_device
    from perfsuite.measure.timing import clock_for
    from perfsuite.pairing import pair
    from perfsuite.params import expand_sweep, parse_assignments
    from perfsuite.storage import atomic_write_text, document

    w = registry.get(args.workload)
    varied = parse_assignments([args.vary], w.params, w.name)
    (key, values), = varied.items()
    if len(values) != 2:
        raise PerfsuiteError(f"--vary expects exactly two values of {key!r}, got {len(values)}")
    sweep = parse_assignments(args.param, w.params, w.name)
    if key in sweep:
        raise PerfsuiteError(f"parameter {key!r} is given both by --vary and -p")
    if args.out is not None and args.out.exists():
        raise PerfsuiteError(f"--out {args.out}: file exists; refusing to overwrite")
    if args.out is not None:  # checked before measuring, so no finished pair is thrown away
        from perfsuite.storage import writable_dir

        writable_dir(args.out.parent, "--out folder")
    device = resolve_device(args.device)
    cases = expand_sweep(sweep)
    for case in cases:
        for v in values:
            w.check({**case, key: v}, device)
    results = []
    for case in cases:
        r = pair(w, case, key, values[0], values[1], device, clock_for(device, "host"), args.budget)
        results.append(r)
        ci = r.time_ratio_ci
        ci_txt = "" if ci is None else f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})"
        saved = "" if r.saved_ratio is None else f"; saved for backward {r.a}/{r.b} = {r.saved_ratio:.2f}"
        console.print(Text(f"{w.name} {case}: time {r.a}/{r.b} = {r.time_ratio:.3f}{ci_txt} over "
                           f"{len(r.ratios)} pairs{saved}"))
        if args.out is not None:
            atomic_write_text(args.out, document("pair", [x.to_dict() for x in results]))
    return 0
