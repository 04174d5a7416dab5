"""Every variant of a workload's case against eager, on the gate's road: each variant is one gate
(perfsuite.compare.gate_sides.GateArms) whose base side runs eager and whose new side runs the
variant, both from the working tree, in rounds of fresh side processes, built from the same seed
(so the same weights and inputs). After the first round's pairs, outside them, the sides are asked
for their output on the workload's inputs, the workload's evaluation, one-by-one latencies and a
step's peak memory; the driver compares them with eager's and holds each variant to the floor."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from perfsuite.compare import revisions, sides
from perfsuite.compare.gate_sides import GateArms
from perfsuite.compare.paired_gate import across_cases
from perfsuite.compare.settings import GateSettings
from perfsuite.compare.variant_study import VariantRow, VariantStudy
from perfsuite.core.case import Case
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import ConfigError
from perfsuite.run.execute import check_cases, run_cases
from perfsuite.variants import fidelity
from perfsuite.variants.catalog import BASELINE, named, refusal

SEED = 0  # every side's build: the same weights and inputs, so outputs compare
LATENCY_S = 1.0  # one-by-one calls for the latency percentiles: about this long a side, 20-200 calls
LATENCY_CHUNKS = 4


def checked_names(variants: Sequence[str]) -> list[str]:
    """The variants asked for, each known (ConfigError naming an unknown one before anything is
    measured), eager left out (it is every gate's base), duplicates once."""
    out: list[str] = []
    for name in variants:
        named(name)
        if name != BASELINE and name not in out:
            out.append(name)
    if not out:
        raise ConfigError(
            "--variants: name at least one variant besides eager (the baseline every one is gated against)"
        )
    return out


def _latencies(base, new) -> tuple[dict[str, float], dict[str, float]]:
    """p50/p90/p99 of calls timed one by one in each side, in alternating chunks (eager, the
    variant, eager, the variant) so that both meet the same stretch of the machine's load."""
    import numpy as np

    times: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(LATENCY_CHUNKS):
        for i, side in enumerate((base, new)):
            ask = {"op": "latencies", "seconds": LATENCY_S / LATENCY_CHUNKS, "min": 5, "max": 50}
            times[i] += side.request(ask)["latencies"]
    out = []
    for i in (0, 1):
        p50, p90, p99 = (float(q) for q in np.quantile(times[i], (0.5, 0.9, 0.99)))
        out.append({"p50": p50, "p90": p90, "p99": p99})
    return out[0], out[1]


def _memory(side) -> dict[str, float]:
    got = side.request({"op": "memory", "build": 0})["memory"]
    return {k: float(v) for k, v in got.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


class _Asked:
    """What the sides of one case answered after their first round: eager's once, each variant's."""

    def __init__(self) -> None:
        self.eager: dict[str, Any] | None = None
        self.variant: dict[str, Any] = {}

    @staticmethod
    def of(side, latency_s: dict[str, float]) -> dict[str, Any]:
        return {
            "facts": side.variant or {},
            "output": side.request({"op": "output"})["output"],
            "evaluation": side.request({"op": "evaluate"})["evaluation"],
            "latency_s": latency_s,
            "memory": _memory(side),
        }

    def after_first(self, case, base, now) -> None:
        eager_latency, variant_latency = _latencies(base[0], now[0])
        if self.eager is None:
            self.eager = self.of(base[0], eager_latency)
        self.variant = self.of(now[0], variant_latency)
        self.variant["eager_latency_s"] = eager_latency  # measured beside the variant's


def _row(name: str, asked: dict[str, Any], eager: dict[str, Any], items: float, floor: float, verdict) -> VariantRow:
    facts = asked["facts"]
    common = dict(
        build_s=facts.get("build_s"),
        cold_s=facts.get("cold_s"),
        size_bytes=facts.get("size_bytes"),
        latency_s=asked["latency_s"],
        eager_latency_s=asked.get("eager_latency_s", {}),
        items_per_s=items / asked["latency_s"]["p50"] if asked["latency_s"].get("p50") else None,
        memory=asked["memory"],
        metrics=fidelity.metrics_of(asked["evaluation"]),
    )
    try:
        outputs: dict[str, float | None] = fidelity.compare(eager["output"], asked["output"])
    except fidelity.WrongOutput as exc:
        return VariantRow(name, "failed", reason=f"wrong output: {exc}", verdict=verdict, **common)
    eval_top1 = fidelity.prediction_agreement(eager["evaluation"], asked["evaluation"])
    if eval_top1 is not None:
        outputs["eval_top1"] = eval_top1
    kept, below = fidelity.held(outputs, common["metrics"], fidelity.metrics_of(eager["evaluation"]), floor)
    return VariantRow(
        name, "measured", verdict=verdict, outputs=outputs, kept=kept, below=below,
        holds=(not below) if kept else None, **common,
    )  # fmt: skip


def study_case(
    workload,
    case: Mapping[str, Any],
    variants: Sequence[str],
    device: str,
    settings: GateSettings,
    floor: float = fidelity.FLOOR,
    *,
    events=None,
    progress: Callable[[str], None] | None = None,
    on_row: Callable[[VariantRow], None] | None = None,
) -> tuple[VariantStudy | None, Any]:
    """Each of `variants` (checked_names) gated against eager for one case; (the study, or None when
    it was interrupted before its first variant; the KeyboardInterrupt that stopped it, or None). A
    refused or failed variant is a row with its reason; the others go on. Eager's row is None when
    no variant's sides were measured (every one refused, or failed before its pairs)."""
    resolved = workload.resolve(dict(case))
    asked = _Asked()
    rows: list[VariantRow] = []
    interrupted = None
    for name in variants:
        why = refusal(named(name), device)
        row, interrupted = (
            (VariantRow(name, "refused", reason=why), None)
            if why is not None
            else _gate_one(workload, case, name, device, settings, asked, floor, events, progress)
        )
        if row is not None:
            rows.append(row)
            if on_row is not None:
                on_row(row)
        if interrupted is not None:
            break
    if not rows:  # interrupted before the first variant: nothing to keep
        return None, interrupted
    eager = _row(BASELINE, asked.eager, asked.eager, resolved_items(asked), floor, None) if asked.eager else None
    items_unit = (asked.eager or {}).get("facts", {}).get("unit") or "items"
    params = {k: v for k, v in resolved.items() if isinstance(v, (bool, int, float, str)) or v is None}
    unmeasured = []
    for name in variants if interrupted is not None else ():
        if name in {r.variant for r in rows}:
            continue
        why = refusal(named(name), device)  # one this device refuses costs nothing to say
        if why is None:
            unmeasured.append(name)
        else:
            rows.append(VariantRow(name, "refused", reason=why))
    return VariantStudy(workload.name, params, device, floor, items_unit, eager, rows, unmeasured), interrupted


def _gate_one(workload, case, name: str, device: str, settings: GateSettings, asked: _Asked, floor: float,
              events, progress) -> tuple[VariantRow | None, Any]:  # fmt: skip
    """Variant `name` gated against eager (both sides from the working tree's workload file, one
    seed); (its row, or None when interrupted before its verdict; the interrupt, or None)."""
    file_now = revisions.workload_file(workload.source, workload.name)
    arms = GateArms.of(
        settings,
        (file_now, None),
        (file_now, None),
        (BASELINE, name),
        device,
        direction=-1,  # the question a variant answers: is it faster than eager?
        progress=progress,
        side_variants=(BASELINE, name),
        seed=SEED,
        after_first=asked.after_first,
    )
    with sides.placed(device, settings.threads):
        out = run_cases(
            check_cases([Case(workload, case)], device, arms),
            RunConfig(device=device, max_time=settings.max_time),
            events=events,
        )
    across_cases(out.records, settings.fdr)  # the sequential test's decision becomes its word
    if out.unsupported:
        return VariantRow(name, "refused", reason=out.unsupported[0][1]), out.interrupted
    if out.failures:
        return VariantRow(name, "failed", reason=_failure_text(out.failures[0])), out.interrupted
    if out.records:
        return _row(
            name, asked.variant, asked.eager or {}, resolved_items(asked), floor, out.records[0]
        ), out.interrupted
    return None, out.interrupted


def resolved_items(asked: _Asked) -> float:
    return float((asked.eager or {}).get("facts", {}).get("items") or 1.0)


def _failure_text(failure: Mapping[str, Any]) -> str:
    """A failed variant's reason as the document keeps it: its error without terminal colours."""
    text = str(failure.get("error") or failure.get("message") or failure)
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)[:2000]


def study(
    workload,
    cases: Sequence[Mapping[str, Any]],
    variants: Sequence[str],
    device: str,
    settings: GateSettings,
    floor: float = fidelity.FLOOR,
    **kw,
) -> tuple[list[VariantStudy], Any]:
    """study_case for each case in turn; (the studies so far, the interrupt that stopped them)."""
    names = checked_names(variants)
    done: list[VariantStudy] = []
    for case in cases:
        one, interrupted = study_case(workload, case, names, device, settings, floor, **kw)
        if one is not None:
            done.append(one)
        if interrupted is not None:
            return done, interrupted
    return done, None
