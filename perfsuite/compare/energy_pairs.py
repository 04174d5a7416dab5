"""Energy paired like time (issue 54): after a gate's timed pairs, each side runs its step for about
a second between two readings of the device's energy counter (NVML's total energy on a GPU, RAPL's
packages on the CPU: perfsuite.measuring.energy.step_energy), in turns A B B A ..., and the pairs'
ratios of joules per step give a ratio with its interval, so "same speed, 10% more energy" is a
verdict too. The counter updates every 20-100 ms, hence second-long regions, not the timed blocks.
A side whose counter cannot be read ends it after the first turn, saying why."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import field
from typing import Annotated

from pydantic import Field

from perfsuite.core import documents
from perfsuite.core.documents import Name, Positive, Text
from perfsuite.core.errors import PerfsuiteError
from perfsuite.stats import verdict

PAIRS = 6  # a t interval on 5 degrees of freedom: about ±4% for a 3% spread between pairs
REGION_S = 1.0  # each side's region: the counter's 20-100 ms updates are a few percent of it
# Pairs stop once this long has gone (a step of seconds: each region is a warm call and one step at
# least), with two pairs at least; fewer pairs give a wider interval, which the verdict shows.
MAX_S = 30.0
MORE, LESS, SAME, UNDECIDED = "more energy", "less energy", "same energy", "energy undecided"


@documents.shape("paired energy", frozen=True)
class EnergyVerdict(documents.Result):
    """Joules per step of new against base over `ratios` (one per pair, new / base), the counter
    they were read from, and the threshold and alpha the word is read at; `reason` says why there
    are none (no counter here, a region too short)."""

    DERIVED = {"ratio": "ratio", "interval": "interval", "word": "word"}

    source: Name = "none"
    ratios: Annotated[list[Positive], Field(max_length=documents.MAX_GROUPS)] = field(default_factory=list)
    base_j: Positive | None = None
    new_j: Positive | None = None
    threshold: Annotated[float, Field(ge=0)] = 0.01
    alpha: Annotated[float, Field(gt=0, lt=0.5)] = 0.01
    reason: Text = ""

    @property
    def ratio(self) -> float:
        return math.exp(sum(map(math.log, self.ratios)) / len(self.ratios)) if self.ratios else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        """The t interval of the mean log ratio, each end one-sided at `alpha`, on one fewer degrees
        of freedom than pairs ((0, inf) with fewer than two pairs)."""
        # Each pair is its own unit (stats.verdict.pairings needs several pairs a unit).
        if len(self.ratios) < 2:
            return 0.0, math.inf
        logs = [math.log(r) for r in self.ratios]
        mean, k = statistics.fmean(logs), len(logs)
        q = float(verdict._t(k).ppf(1 - self.alpha)) * statistics.stdev(logs) / math.sqrt(k)
        return math.exp(mean - q), math.exp(mean + q)

    @property
    def word(self) -> str:
        """more / less energy when the interval lies wholly beyond the threshold, same when wholly
        inside it, undecided otherwise."""
        if not self.ratios:
            return UNDECIDED
        lo, hi = self.interval
        if lo > 1 + self.threshold:
            return MORE
        if hi < 1 / (1 + self.threshold):
            return LESS
        if lo >= 1 / (1 + self.threshold) and hi <= 1 + self.threshold:
            return SAME
        return UNDECIDED

    def describe(self) -> str:
        if not self.ratios:
            return f"energy not measured: {self.reason}"
        lo, hi = self.interval
        hi_txt = "inf" if math.isinf(hi) else f"{hi:.3f}"
        joules = f"; {self.base_j:.4g} J -> {self.new_j:.4g} J a step" if self.base_j and self.new_j else ""
        return (
            f"{self.word}, ratio {self.ratio:.3f} ({1 - 2 * self.alpha:.0%} CI {lo:.3f}-{hi_txt}) "
            f"over {len(self.ratios)} pairs of {self.source} readings{joules}"
        )


def sides_energy(
    base, new, threshold: float, alpha: float, pairs: int = PAIRS, seconds: float = REGION_S
) -> EnergyVerdict:
    """`pairs` turns of both sides' energy requests, A B then B A ...; the first reading that is not
    "ok" ends it with its reason (a side of an older perfsuite, without the request, likewise)."""
    ratios: list[float] = []
    joules: dict[int, list[float]] = {0: [], 1: []}
    source = "none"
    t0 = time.monotonic()
    for k in range(pairs):
        if k >= 2 and time.monotonic() - t0 > MAX_S:
            break
        got: dict[int, float] = {}
        for i in (0, 1) if k % 2 == 0 else (1, 0):
            try:
                reading = (base, new)[i].request({"op": "energy", "build": 0, "seconds": seconds}).get("energy") or {}
            except PerfsuiteError as exc:
                reading = {"status": "unavailable", "reason": f"a side could not measure it: {exc}"}
            if reading.get("status") != "ok" or not reading.get("per_step_j"):
                why = reading.get("reason") or (
                    "the counter did not advance over the region" if reading.get("status") == "ok" else "not read"
                )
                return EnergyVerdict(threshold=threshold, alpha=alpha, reason=str(why))
            got[i] = float(reading["per_step_j"])
            source = str(reading.get("source", "none"))
        ratios.append(got[1] / got[0])
        joules[0].append(got[0])
        joules[1].append(got[1])
    mean = {i: sum(v) / len(v) for i, v in joules.items()}
    return EnergyVerdict(source, ratios, mean[0], mean[1], threshold, alpha)
