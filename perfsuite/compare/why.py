"""Why one side is slower (or fatter) than the other: a differential operator profile.

Each side's operators come from torch.profiler windows of the same number of steps
(perfsuite.profiling.ops), taken in rounds that alternate which side goes first (A B, B A, ...),
so drift over the run lands on both. The windows are outside any timed block; the step times the
differences are judged against come from interleaved, unprofiled blocks of the same sides.

The operators of both sides are matched into rows, each with its noise interval
(perfsuite.compare.why_rows). The listed rows outside their noise are then reconciled with the
measured step difference: a share of it, or a plain sentence saying why they are not one (the
measured difference within its noise; a total that points the other way, or is many times it
because the profiler's cost per call weighs most on operators called most often).

Memory, the "fatter" half: the peak of one step on each side (host RSS of the step above its
start on CPU, CUDA max allocated on a GPU) and the operators whose net allocations grew.

The kind of change, exact, as every verdict says it (perfsuite.compare.work): each side's work
signature is taken last, outside the windows and the timed blocks, and the result says "more work:
+1 aten.mm.default (...)", "same work, slower", ... beside the step difference.
"""

from __future__ import annotations

from dataclasses import field
from functools import cached_property

from perfsuite.compare.why_rows import OpRow, align
from perfsuite.core import documents
from perfsuite.core.documents import Count, Name, Params, SampleList, Text
from perfsuite.core.units import fmt_seconds
from perfsuite.profiling.ops import by_kernel, device_rows
from perfsuite.stats import summary as stats

TOP = 20  # rows the table lists; the explained share is of these
# On CUDA, ranked by device time when the device was busy at least this share of the slower step.
DEVICE_BOUND = 0.5
# A measured difference below this share of the step is within what two processes of the same
# code differ by (docs/gate.md): the table then explains noise.
SMALL = 0.02
STEP_CONFIDENCE = 0.95  # the measured difference's interval, one figure: the gate's level
# Listed differences above this multiple of the measured one are not a share of it.
OVER = 1.5
TIMES = ("self_cpu_us", "self_device_us")  # the fields each row keeps per window


@documents.shape("why side", frozen=True)
class WhySide(documents.Result):
    """One side as measured: its label, operators per step, unprofiled step times, peak memory."""

    label: Text
    params: Params
    # perfsuite.profiling.ops rows averaged over the rounds, with per-window times (merge_rounds);
    # documents written before rows kept "windows" load too: their rows have no noise floor.
    ops: list[dict]
    step_s: SampleList  # seconds per step, one per timed block, in the order of the interleaved pairs
    memory: dict

    @property
    def median_step_s(self) -> float:
        return stats.median(self.step_s)

    @property
    def calls(self) -> float:
        """Operator calls per step, all rows."""
        return sum(float(o.get("calls", 0.0)) for o in self.ops)


@documents.shape("why result")
class WhyResult(documents.Result):
    DERIVED = {
        "metric": "metric",
        "measured_delta_us": "measured_delta_us",
        "measured_ci_us": "measured_ci_us",
        "rows": "listed",
        "explained": "explained",
        "reconciliation": "reconciliation",
        "memory_delta_bytes": "memory_delta_bytes",
        "grew": "grew",
    }

    workload: Name
    device: Name
    how: Text  # what differs: "--base REV" or "--vary key=a,b"
    a: WhySide
    b: WhySide
    steps: Count  # profiled steps per window
    rounds: Count  # windows per side
    top: Count = TOP
    notes: list[Text] = field(default_factory=list)
    # What kind of change (perfsuite.compare.work), from the two sides' work signatures: exact, with
    # no interval. "work not recorded" where a side could not take one, and in documents before it.
    work: Name = "work not recorded"
    work_changes: list[Text] = field(default_factory=list)
    # What timed the unprofiled blocks: "wall", or "thread CPU time" (each side's timing thread,
    # where the gate would use it: sides.SideClock.for_sides). None in documents before it.
    clock: Name | None = None

    def kind_said(self) -> str:
        """The kind of change in words, beside the measured difference's direction where its
        interval is off zero: "more work: +1 aten.mm.default (32x256,256x32) float32", "same work,
        slower", as the gate, bisect and history say it."""
        from perfsuite.compare import work

        word = None if self.measured_within_noise else ("slower" if self.measured_delta_us > 0 else "faster")
        return work.said(self.work, self.work_changes, word)

    @property
    def on_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def device_busy(self, side: WhySide) -> float | None:
        """The share of `side`'s unprofiled step its operators kept the device busy (their self
        device time per step over the step's time); None off CUDA or without device time."""
        busy_us = sum(o.get("self_device_us", 0.0) for o in side.ops)
        if not self.on_cuda or busy_us <= 0 or side.median_step_s <= 0:
            return None
        return busy_us / (side.median_step_s * 1e6)

    @property
    def metric(self) -> str:
        """Self device time where the GPU is what the step waits for, self CPU time elsewhere.
        On CUDA a step the host cannot launch fast enough (on an H100, tiny_mlp's step kept the GPU
        busy ~10% of its time) is made of the host's time: ranked by device time, the operators
        explained 18% of a 4.1 ms slowdown. So device time only when the device was busy at least
        DEVICE_BOUND of the slower side's step."""
        slower = self.b if self.b.median_step_s >= self.a.median_step_s else self.a
        busy = self.device_busy(slower)
        return "self_device_us" if busy is not None and busy >= DEVICE_BOUND else "self_cpu_us"

    @property
    def pair_deltas_us(self) -> list[float] | None:
        """B - A of each interleaved pair of blocks (us); None when the blocks do not pair up."""
        a, b = self.a.step_s, self.b.step_s
        return [(y - x) * 1e6 for x, y in zip(a, b)] if a and len(a) == len(b) else None

    @property
    def measured_delta_us(self) -> float:
        """The unprofiled step's difference, B - A, in microseconds: the median of the pairs'
        differences (the two blocks of a pair share the machine's moment, so its drift cancels)."""
        d = self.pair_deltas_us
        return stats.median(d) if d else (self.b.median_step_s - self.a.median_step_s) * 1e6

    @property
    def measured_ci_us(self) -> tuple[float, float] | None:
        """STEP_CONFIDENCE interval of measured_delta_us; None with fewer than 6 pairs."""
        d = self.pair_deltas_us
        return None if not d else stats.median_ci(d, STEP_CONFIDENCE)

    @property
    def measured_within_noise(self) -> bool:
        """The measured difference's interval holds 0 (without one: it is under SMALL of A's step)."""
        ci, m = self.measured_ci_us, self.measured_delta_us
        if ci is None:
            return m == 0 or abs(m) < SMALL * self.a.median_step_s * 1e6
        return ci[0] <= 0 <= ci[1]

    @cached_property
    def rows(self) -> list[OpRow]:
        """Every operator: those outside their own noise first, then by |B - A|."""
        # Memory is the device's on CUDA whichever time ranks the rows (a host-bound step's
        # operators still allocate on the GPU).
        bytes_key = "self_device_bytes" if self.on_cuda else "self_cpu_bytes"
        return align(self.a.ops, self.b.ops, self.metric, bytes_key)

    @property
    def listed(self) -> list[OpRow]:
        return self.rows[: self.top]

    @property
    def listed_delta_us(self) -> float:
        """The total difference of the listed rows outside their own noise (inside it, a row's
        difference is as likely the windows' noise as the change)."""
        return sum(r.delta_us for r in self.listed if not r.within_noise)

    @property
    def explained(self) -> float | None:
        """listed_delta_us over the measured difference; None when it is no share of it (see
        reconciliation): the measured difference within its noise, or the listed total pointing
        the other way or more than OVER times it."""
        m = self.measured_delta_us
        if m == 0 or self.measured_within_noise:
            return None
        share = self.listed_delta_us / m
        return share if 0 <= share <= OVER else None

    @property
    def reconciliation(self) -> str:
        """The listed differences against the measured one, in a sentence."""
        m, s = self.measured_delta_us, self.listed_delta_us
        head = f"listed differences outside their noise {_signed_us(s)} against the measured {_signed_us(m)}: "
        calls = self.b.calls - self.a.calls
        per_call = (
            f" (B makes {abs(calls):.4g} {'more' if calls > 0 else 'fewer'} operator calls per step: "
            f"A {self.a.calls:.4g}, B {self.b.calls:.4g})"
            if abs(calls) >= 0.5
            else ""
        )
        if self.measured_within_noise:
            ci = self.measured_ci_us
            where = (
                f"under {SMALL:.0%} of the step"
                if ci is None
                else f"{STEP_CONFIDENCE:.0%} CI {_signed_us(ci[0])} to {_signed_us(ci[1])}"
            )
            return head + (
                f"the measured difference is within its noise ({where}), so they are no share of it: "
                "the rows say where the sides differ, not what made a step slower or faster"
            )
        if not any(r.within_noise is not True for r in self.listed):
            return head + "no listed operator differs beyond its own noise, so the table does not explain it"
        share = s / m
        if share < 0:
            return head + (
                "they point the other way and cannot be reconciled with it: the profiled windows "
                f"and the unprofiled blocks disagree{per_call}"
            )
        if share > OVER:
            return head + (
                f"{share:.1f} times it, so they cannot be reconciled with it: the profiler's cost per "
                f"call is in every self time and weighs most on operators called most often{per_call}; "
                "the rows rank where the sides differ, their sizes do not add up to the step"
            )
        rest = (
            ""
            if share >= 0.5
            else (
                f" (the rest is outside the operators listed: Python, data loading, "
                f"waiting, or rows below the top {self.top})"
            )
        )
        return head + f"explains {share:.0%} of the measured difference{rest}"

    @property
    def memory_delta_bytes(self) -> int | None:
        key = "cuda_peak_delta_bytes" if self.on_cuda else "host_peak_delta_bytes"
        a, b = self.a.memory.get(key), self.b.memory.get(key)
        return None if a is None or b is None else b - a

    @property
    def grew(self) -> list[OpRow]:
        """Operators that keep more memory per step on B, largest growth first (an operator gone from
        B that freed memory on A is not one: its difference is positive, but B allocates nothing)."""
        grown = [r for r in self.rows if r.delta_bytes > 0 and r.value(r.b, r.bytes_key) > 0]
        return sorted(grown, key=lambda r: -r.delta_bytes)[: self.top]

    def step_summary(self) -> str:
        """A's unprofiled step time and the measured difference (the median of the interleaved
        pairs' differences) with its interval: the figure the table is reconciled with, worded
        once for the console and the report. B's own median is not printed: drift the pairs
        cancel is left in it, and beside the difference it could say B is faster where the pairs
        say slower (the gate's figure, over more pairs, is the one to quote for the size)."""
        ta, m = self.a.median_step_s, self.measured_delta_us
        ci, pairs = self.measured_ci_us, self.pair_deltas_us
        spread = (
            "too few pairs for an interval"
            if ci is None
            else f"{STEP_CONFIDENCE:.0%} CI {ci[0] / (ta * 1e6):+.1%} to {ci[1] / (ta * 1e6):+.1%} "
            f"over {len(pairs or ())} pairs of one process a side"
        )  # (an interval comes from pairs; between processes a step moves too: the gate's rounds)
        sign = "-" if m < 0 else "+"
        timed = f", {self.clock}" if self.clock else ""
        return (
            f"step (unprofiled, interleaved{timed}): A {fmt_seconds(ta)}, "
            f"B - A {sign}{fmt_seconds(abs(m) * 1e-6)} ({m / (ta * 1e6):+.1%}; {spread})"
        )


def _signed_us(us: float) -> str:
    return ("+" if us >= 0 else "-") + fmt_seconds(abs(us) * 1e-6)


def merge_rounds(windows: list[list[dict]]) -> list[dict]:
    """Per-step operator rows averaged over windows, each keeping its times per window under
    "windows" (the spread its noise is read from); an operator missing from a window counts 0 there."""
    n = max(len(windows), 1)
    total: dict[tuple, dict] = {}
    for w, ops in enumerate(windows):
        for o in ops:
            key = (o["name"], o["shapes"])
            acc = total.setdefault(
                key, {"name": o["name"], "shapes": o["shapes"], "windows": {k: [0.0] * n for k in TIMES}}
            )
            for k, v in o.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    acc[k] = acc.get(k, 0.0) + v
            for k in TIMES:
                acc["windows"][k][w] += float(o.get(k, 0.0))
    return [{k: (v / n if isinstance(v, (int, float)) else v) for k, v in acc.items()} for acc in total.values()]


class ProfiledSide:
    """What the differential profile needs of a side: profile a window, time a block, read memory.
    Implemented over a side process (perfsuite.compare.sides.Side) or, in tests, a local step."""

    label: str
    params: dict

    def profile(self, steps: int) -> list[dict]:  # pragma: no cover - an interface
        raise NotImplementedError

    def time(self, n: int) -> float:  # pragma: no cover
        raise NotImplementedError

    def signature(self) -> dict | None:
        """The side's work signature (perfsuite.measuring.signature); None where it has none."""
        return None

    def memory(self) -> dict:  # pragma: no cover
        raise NotImplementedError


def differential_profile(
    a: ProfiledSide,
    b: ProfiledSide,
    now,
    steps: int = 5,
    rounds: int = 4,
    time_budget_s: float = 2.0,
    block_s: float = 0.02,
    min_pairs: int = 6,
) -> tuple[WhySide, WhySide]:
    """Both sides profiled in `rounds` windows of `steps` steps, A B then B A ...; then timed
    unprofiled in interleaved blocks (A B, B A, ...) for about `time_budget_s`; then one step's
    peak memory each. `now`: the clock (seconds) the timing budget is kept with."""
    if steps < 1 or rounds < 1:
        raise ValueError("steps and rounds must be >= 1")
    windows: dict[int, list] = {0: [], 1: []}
    for r in range(rounds):
        for i in (0, 1) if r % 2 == 0 else (1, 0):
            windows[i].append((a, b)[i].profile(steps))
    # Block size from one timed step of the faster side: blocks of about block_s each.
    one = min(a.time(1), b.time(1))
    n = max(1, int(block_s / max(one, 1e-9)))
    times: dict[int, list] = {0: [], 1: []}
    t0, k = now(), 0
    while k < 2 * min_pairs or now() - t0 < time_budget_s:
        for i in (0, 1) if k % 2 == 0 else (1, 0):
            times[i].append((a, b)[i].time(n) / n)
        k += 1
    mem = [a.memory(), b.memory()]
    kernels = by_kernel(windows[0] + windows[1])  # one rule for both sides: rows of one kind are compared
    side_a, side_b = (
        WhySide(s.label, dict(s.params), merge_rounds([device_rows(w, kernels) for w in windows[i]]), times[i], mem[i])
        for i, s in enumerate((a, b))
    )
    return side_a, side_b


def why(
    workload: str,
    device: str,
    how: str,
    a: ProfiledSide,
    b: ProfiledSide,
    now,
    steps: int = 5,
    rounds: int = 4,
    top: int = TOP,
    clock: str | None = None,
) -> WhyResult:
    from perfsuite.compare import work

    side_a, side_b = differential_profile(a, b, now, steps, rounds)
    kind, changes = work.change(a.signature(), b.signature())  # last: outside every window and block
    out = WhyResult(
        workload, device, how, side_a, side_b, steps, rounds, top, work=kind, work_changes=changes, clock=clock
    )
    if abs(out.measured_delta_us) < SMALL * side_a.median_step_s * 1e6:
        out.notes.append(
            f"the sides' step times differ by less than {SMALL:.0%}: the rows show where they "
            "differ, not a cause of a slowdown"
        )
    if rounds < 2:
        out.notes.append("one window per side: no row has a noise floor (--rounds 2 or more gives one)")
    return out
