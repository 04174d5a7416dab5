"""Why one side is slower (or fatter) than the other: a differential operator profile.

Each side's operators come from torch.profiler windows of the same number of steps
(perfsuite.profiling.ops), taken in rounds that alternate which side goes first (A B, B A, ...),
so drift over the run lands on both. The windows are outside any timed block; the step times the
differences are judged against come from interleaved, unprofiled blocks of the same sides. Rows
are aligned by operator name and input shapes and sorted by their contribution to the
difference in step time; an operator only one side runs is marked new or gone. The sum of the
listed differences over the measured difference says how much of the change the table explains
(self times carry the profiler's own cost per call, so an operator called much more often can
explain more than 100%).

Memory, the "fatter" half: the peak of one step on each side (host RSS of the step above its
start on CPU, CUDA max allocated on a GPU) and the operators whose net allocations grew.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfsuite.stats import summary as stats

NEW, GONE = "new", "gone"
TOP = 20  # rows the table lists; the explained share is of these
# On CUDA, ranked by device time when the device was busy at least this share of the slower step.
DEVICE_BOUND = 0.5
# A measured difference below this share of the step is within what two processes of the same
# code differ by (docs/gate.md): the table then explains noise.
SMALL = 0.02


@dataclass(frozen=True)
class WhySide:
    """One side as measured: its label, operators per step, unprofiled step times, peak memory."""

    label: str
    params: dict
    ops: list[dict]  # perfsuite.profiling.ops rows, averaged over the rounds
    step_s: list[float]  # seconds per step, one per timed block
    memory: dict

    @property
    def median_step_s(self) -> float:
        return stats.median(self.step_s)

    def to_dict(self) -> dict:
        return {"label": self.label, "params": self.params, "ops": self.ops, "step_s": self.step_s,
                "memory": self.memory}

    @classmethod
    def from_dict(cls, d: dict) -> "WhySide":
        return cls(d["label"], dict(d["params"]), list(d["ops"]), [float(x) for x in d["step_s"]], dict(d["memory"]))


@dataclass(frozen=True)
class OpRow:
    """One operator on both sides (None where a side does not run it), per step."""

    name: str
    shapes: str
    a: dict | None
    b: dict | None
    metric: str  # the time field compared: self_cpu_us, or self_device_us where the GPU is the bound
    bytes_key: str = "self_cpu_bytes"  # the memory the step allocates: the device's on CUDA

    @property
    def mark(self) -> str:
        return NEW if self.a is None else GONE if self.b is None else ""

    def value(self, side: dict | None, key: str) -> float:
        return 0.0 if side is None else float(side.get(key, 0.0))

    @property
    def delta_us(self) -> float:
        return self.value(self.b, self.metric) - self.value(self.a, self.metric)

    @property
    def delta_bytes(self) -> float:
        return self.value(self.b, self.bytes_key) - self.value(self.a, self.bytes_key)

    def to_dict(self) -> dict:
        return {"name": self.name, "shapes": self.shapes, "a": self.a, "b": self.b, "mark": self.mark,
                "delta_us": self.delta_us, "delta_bytes": self.delta_bytes}


@dataclass
class WhyResult:
    workload: str
    device: str
    how: str  # what differs: "--base REV" or "--vary key=a,b"
    a: WhySide
    b: WhySide
    steps: int  # profiled steps per window
    rounds: int  # windows per side
    top: int = TOP
    notes: list[str] = field(default_factory=list)

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
    def measured_delta_us(self) -> float:
        """The unprofiled step's difference, B - A, in microseconds."""
        return (self.b.median_step_s - self.a.median_step_s) * 1e6

    @property
    def rows(self) -> list[OpRow]:
        """Every operator, sorted by its contribution in the direction of the measured difference."""
        # Memory is the device's on CUDA whichever time ranks the rows (a host-bound step's
        # operators still allocate on the GPU).
        bytes_key = "self_device_bytes" if self.on_cuda else "self_cpu_bytes"
        return align(self.a.ops, self.b.ops, self.metric, self.measured_delta_us, bytes_key)

    @property
    def listed(self) -> list[OpRow]:
        return self.rows[:self.top]

    @property
    def explained(self) -> float | None:
        """The listed rows' total difference over the measured one (None when nothing differs)."""
        m = self.measured_delta_us
        return None if m == 0 else sum(r.delta_us for r in self.listed) / m

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
        return sorted(grown, key=lambda r: -r.delta_bytes)[:self.top]

    DERIVED = ("measured_delta_us", "explained", "memory_delta_bytes", "rows", "grew", "metric")

    def to_dict(self) -> dict:
        return {"workload": self.workload, "device": self.device, "how": self.how, "a": self.a.to_dict(),
                "b": self.b.to_dict(), "steps": self.steps, "rounds": self.rounds, "top": self.top,
                "notes": self.notes,
                # Derived, for readers without perfsuite; from_dict recomputes them from the sides.
                "metric": self.metric, "measured_delta_us": self.measured_delta_us, "explained": self.explained,
                "memory_delta_bytes": self.memory_delta_bytes,
                "rows": [r.to_dict() for r in self.listed], "grew": [r.to_dict() for r in self.grew]}

    @classmethod
    def from_dict(cls, d: dict) -> "WhyResult":
        return cls(d["workload"], d["device"], d["how"], WhySide.from_dict(d["a"]), WhySide.from_dict(d["b"]),
                   int(d["steps"]), int(d["rounds"]), int(d.get("top", TOP)), list(d.get("notes", [])))


def align(ops_a: list[dict], ops_b: list[dict], metric: str, direction: float = 1.0,
          bytes_key: str = "self_cpu_bytes") -> list[OpRow]:
    """Rows of both sides' operators by (name, shapes), the largest contribution to a difference
    of sign `direction` first (a speed-up lists what got faster first)."""
    a = {(o["name"], o["shapes"]): o for o in ops_a}
    b = {(o["name"], o["shapes"]): o for o in ops_b}
    keys = list(dict.fromkeys([*a, *b]))
    rows = [OpRow(n, s, a.get((n, s)), b.get((n, s)), metric, bytes_key) for n, s in keys]
    sign = -1.0 if direction < 0 else 1.0
    return sorted(rows, key=lambda r: (-sign * r.delta_us, r.name, r.shapes))


def merge_rounds(windows: list[list[dict]]) -> list[dict]:
    """Per-step operator rows averaged over windows; an operator missing from a window counts 0 there."""
    total: dict[tuple, dict] = {}
    for ops in windows:
        for o in ops:
            key = (o["name"], o["shapes"])
            acc = total.setdefault(key, {"name": o["name"], "shapes": o["shapes"]})
            for k, v in o.items():
                if isinstance(v, (int, float)):
                    acc[k] = acc.get(k, 0.0) + v
    n = max(len(windows), 1)
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

    def memory(self) -> dict:  # pragma: no cover
        raise NotImplementedError


def differential_profile(a: ProfiledSide, b: ProfiledSide, now, steps: int = 5, rounds: int = 4,
                         time_budget_s: float = 2.0, block_s: float = 0.02, min_pairs: int = 6
                         ) -> tuple[WhySide, WhySide]:
    """Both sides profiled in `rounds` windows of `steps` steps, A B then B A ...; then timed
    unprofiled in interleaved blocks (A B, B A, ...) for about `time_budget_s`; then one step's
    peak memory each. `now`: the clock (seconds) the timing budget is kept with."""
    if steps < 1 or rounds < 1:
        raise ValueError("steps and rounds must be >= 1")
    windows: dict[int, list] = {0: [], 1: []}
    for r in range(rounds):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            windows[i].append((a, b)[i].profile(steps))
    # Block size from one timed step of the faster side: blocks of about block_s each.
    one = min(a.time(1), b.time(1))
    n = max(1, int(block_s / max(one, 1e-9)))
    times: dict[int, list] = {0: [], 1: []}
    t0, k = now(), 0
    while k < 2 * min_pairs or now() - t0 < time_budget_s:
        for i in ((0, 1) if k % 2 == 0 else (1, 0)):
            times[i].append((a, b)[i].time(n) / n)
        k += 1
    mem = [a.memory(), b.memory()]
    return tuple(WhySide(s.label, dict(s.params), merge_rounds(windows[i]), times[i], mem[i])
                 for i, s in enumerate((a, b)))


def why(workload: str, device: str, how: str, a: ProfiledSide, b: ProfiledSide, now, steps: int = 5,
        rounds: int = 4, top: int = TOP) -> WhyResult:
    side_a, side_b = differential_profile(a, b, now, steps, rounds)
    out = WhyResult(workload, device, how, side_a, side_b, steps, rounds, top)
    if abs(out.measured_delta_us) < SMALL * side_a.median_step_s * 1e6:
        out.notes.append(f"the sides' step times differ by less than {SMALL:.0%}: the rows show where they "
                         "differ, not a cause of a slowdown")
    return out
