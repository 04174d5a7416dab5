"""A variant applied to a workload's built steps, in the process that will time them (a gate's side
process): the transformation and its first (cold) call are timed here, apart from the steady state
the gate measures, and every variant's step is the same call on the same inputs, so eager and its
variants differ only by what the variant changed."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from perfsuite.core.errors import Unsupported
from perfsuite.core.workload import BuiltStep
from perfsuite.measuring.timing import synchronize
from perfsuite.variants.builtin import split
from perfsuite.variants.catalog import BASELINE, named, refusal


@dataclass
class Applied:
    """The variant's steps (one per build), a call returning its output on the workload's inputs,
    its evaluation (the workload's metrics for this variant; None without one) and what its build
    cost: {"build_s", "cold_s", "size_bytes", "own_threads"}."""

    steps: list[BuiltStep]
    output: Callable[[], Any]
    evaluate: Callable[[], dict] | None
    facts: dict


def model_bytes(made: Any) -> int | None:
    """What the variant's model takes: a runtime's files, or a torch module's state dict as torch
    saves it (int8 weights count one byte each); None when neither can be read."""
    size = getattr(made, "size_bytes", None)
    if size is not None:
        return int(size)
    try:
        import torch

        if isinstance(made, torch.nn.Module):
            buffer = io.BytesIO()
            torch.save(made.state_dict(), buffer)
            return buffer.tell()
    except Exception:  # noqa: BLE001 - a state dict torch cannot save (a runtime's module): no size
        return None
    return None


def _model_step(made: Any, inputs: Any) -> Callable[[], Any]:
    import torch

    args, kwargs = split(inputs)

    def step():
        with torch.inference_mode():
            return made(*args, **kwargs)

    return step


def apply(built: list[BuiltStep], name: str, device: str) -> Applied:
    """Variant `name` of each build; Unsupported when it cannot run here or the workload does not
    offer what it transforms (a model-level variant needs the Step's `model` and `inputs`)."""
    v = named(name)
    why = refusal(v, device)
    if why:
        raise Unsupported(why)
    if v.level == "model" and built[0].model is None:
        # eager's side comes first in a study: the user asked for the variants, not for eager
        who = (
            "variants rebuild the step from its model (eager too, as their baseline)"
            if name == BASELINE
            else (f"variant {name!r} transforms the model")
        )
        raise Unsupported(
            f"{who}, and this workload's step does not offer one: "
            "return perfsuite.Step(step, model=model, inputs=inputs, ...) to let variants rebuild it"
        )
    steps, made_first = [], None
    t0 = time.perf_counter()
    for b in built:
        if v.level == "model":
            made = v.make(b.model, b.inputs, device, v.option)
            fn = _model_step(made, b.inputs)
        else:
            made = fn = v.make(b.fn, b.inputs, device, v.option)
            if not callable(fn):
                raise Unsupported(f"variant {name!r} returned {type(fn).__name__}, not a step to call")
        made_first = made if made_first is None else made_first
        steps.append(replace(b, fn=fn))
    synchronize(device)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    steps[0].fn()
    synchronize(device)
    cold_s = time.perf_counter() - t0
    evaluate = None
    if v.level == "model" and built[0].evaluate is not None:
        user_eval, model = built[0].evaluate, made_first
        evaluate = lambda: user_eval(model)  # noqa: E731 - the workload's metrics of this variant
    facts = {
        "variant": v.name,
        "build_s": build_s,
        "cold_s": cold_s,
        "size_bytes": model_bytes(made_first) if v.level == "model" else None,
        "own_threads": v.own_threads,
        "items": built[0].work.items_per_step,
        "unit": built[0].work.item_unit,
    }
    return Applied(steps, steps[0].fn, evaluate, facts)
