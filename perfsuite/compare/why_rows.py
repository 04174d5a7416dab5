"""Both sides' operators as rows of `perfsuite why`: matched, each with its noise interval.

The profiler's rows carry no call site (recording stacks would add its cost to every call), so
operators are matched by name and, among rows of one name, by the closest input shapes: a batch
that doubled is one operator marked "changed", both shapes shown. Only a name one side never runs
is new or gone. Each row keeps its per-window times (perfsuite.compare.why.merge_rounds), and the
spread of those gives its difference an interval; rows outside their own noise rank first, then
by the size of their difference.
"""

from __future__ import annotations

import math
from ast import literal_eval

from perfsuite.core import documents

NEW, GONE, CHANGED = "new", "gone", "changed"
# A row's interval: 99%, not 95%, because a table has hundreds of rows, and at 95% several of the
# unchanged ones would be outside theirs by chance and lead the table, as the noise did before.
ROW_CONFIDENCE = 0.99


@documents.shape("operator row", frozen=True)
class OpRow(documents.Result):
    """One operator on both sides (None where a side has no row for it), per step."""

    DERIVED = {"shapes": "shapes", "delta_us": "delta_us", "within_noise": "within_noise", "delta_bytes": "delta_bytes"}

    name: str
    mark: str  # NEW or GONE (a name one side never runs), CHANGED (other input shapes), "" (same)
    a: dict | None
    b: dict | None
    metric: str  # the time field compared: self_cpu_us, or self_device_us where the GPU is the bound
    bytes_key: str = "self_cpu_bytes"  # the memory the step allocates: the device's on CUDA
    noise_us: float | None = None  # half the ROW_CONFIDENCE interval of delta_us; None: not known

    @property
    def shapes(self) -> str:
        """The input shapes; "A -> B" where they changed ("(none)" for a side without that row)."""
        sa, sb = (None if s is None else str(s["shapes"]) for s in (self.a, self.b))
        if self.mark != CHANGED:
            shown = sa if sb is None else sb
            assert shown is not None  # a row is on one side at least
            return shown
        return f"{sa or '(none)'} -> {sb or '(none)'}"

    def value(self, side: dict | None, key: str) -> float:
        return 0.0 if side is None else float(side.get(key, 0.0))

    @property
    def delta_us(self) -> float:
        return self.value(self.b, self.metric) - self.value(self.a, self.metric)

    @property
    def delta_bytes(self) -> float:
        return self.value(self.b, self.bytes_key) - self.value(self.a, self.bytes_key)

    @property
    def within_noise(self) -> bool | None:
        """Whether the difference is inside its own interval; None without one. A name one side
        never runs is never within noise: however its windows spread, its time on the side that
        runs it is not 0 (its interval says how sure its size is, not whether it differs)."""
        if self.mark in (NEW, GONE):
            return False
        return None if self.noise_us is None else abs(self.delta_us) <= self.noise_us


def align(ops_a: list[dict], ops_b: list[dict], metric: str, bytes_key: str = "self_cpu_bytes") -> list[OpRow]:
    """Both sides' operators matched by name and, among rows of one name, by the closest input
    shapes; rows outside their own noise first, then the largest |B - A| first."""
    names_a, names_b = _by_name(ops_a), _by_name(ops_b)
    rows = []
    for name in dict.fromkeys([*names_a, *names_b]):
        xs, ys = names_a.get(name, []), names_b.get(name, [])
        for x, y in _pair_by_shape(xs, ys):
            if not xs or not ys:
                mark = NEW if not xs else GONE
            else:  # a row without a partner still belongs to an operator both sides run
                mark = "" if x is not None and y is not None and x["shapes"] == y["shapes"] else CHANGED
            rows.append(OpRow(name, mark, x, y, metric, bytes_key, _noise_us(x, y, metric)))
    return sorted(rows, key=lambda r: (r.within_noise is True, -abs(r.delta_us), r.name, r.shapes))


def _by_name(ops: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for o in ops:
        out.setdefault(o["name"], []).append(o)
    return out


def _pair_by_shape(xs: list[dict], ys: list[dict]) -> list[tuple[dict | None, dict | None]]:
    """Rows of one name paired greedily, closest shapes first, then nearest in the profile's
    order (its rows come in the order the step first ran them); the rest each alone."""
    candidates = sorted(
        (_shape_distance(str(x["shapes"]), str(y["shapes"])), abs(i - j), i, j)
        for i, x in enumerate(xs)
        for j, y in enumerate(ys)
    )
    used_a, used_b, pairs = set(), set(), []
    for *_, i, j in candidates:
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            pairs.append((i, j))
    out = [(xs[i], ys[j]) for i, j in sorted(pairs)]
    return (
        out
        + [(x, None) for i, x in enumerate(xs) if i not in used_a]
        + [(None, y) for j, y in enumerate(ys) if j not in used_b]
    )


def _shape_distance(sa: str, sb: str) -> float:
    """How far apart two input-shape lists are: 0 when equal; a size that differs costs the log2
    of its ratio, a rank that differs 10, a missing input 100 (so a batch that doubled pairs with
    its own call before another call's)."""
    if sa == sb:
        return 0.0
    try:
        la, lb = literal_eval(sa), literal_eval(sb)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return 1000.0
    if not isinstance(la, list) or not isinstance(lb, list):
        return 1000.0
    d = 100.0 * abs(len(la) - len(lb))
    for x, y in zip(la, lb):
        if x == y:
            continue
        if _dims(x) and _dims(y) and len(x) == len(y):
            d += sum(abs(math.log2((p + 1) / (q + 1))) for p, q in zip(x, y))
        else:
            d += 10.0
    return d


def _dims(x) -> bool:
    return isinstance(x, list) and all(type(v) is int and v >= 0 for v in x)


def _windows(row: dict | None, metric: str) -> list[float] | None:
    w = None if row is None else row.get("windows", {}).get(metric)
    return None if w is None else [float(v) for v in w]


def _noise_us(x: dict | None, y: dict | None, metric: str) -> float | None:
    """Half the ROW_CONFIDENCE interval of B - A from the per-window times (Welch's t: the sides
    spread differently); a side without the row ran it 0 us in each window. None where a row
    has no per-window times (a document written before they were kept) or one window a side."""
    wa, wb = _windows(x, metric), _windows(y, metric)
    if x is None and wb is not None:
        wa = [0.0] * len(wb)
    if y is None and wa is not None:
        wb = [0.0] * len(wa)
    if wa is None or wb is None or len(wa) < 2 or len(wb) < 2:
        return None
    va, vb = (_variance(w) / len(w) for w in (wa, wb))
    if va + vb <= 0:
        return 0.0  # identical windows: any difference is outside the noise
    df = (va + vb) ** 2 / (va**2 / (len(wa) - 1) + vb**2 / (len(wb) - 1))
    from scipy.stats import t

    return float(t.ppf(0.5 + ROW_CONFIDENCE / 2, df)) * math.sqrt(va + vb)


def _variance(xs: list[float]) -> float:
    mean = sum(xs) / len(xs)
    return sum((v - mean) ** 2 for v in xs) / (len(xs) - 1)
