"""Workload parameters: their declaration, parsing from `key=value` text and validation."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.core.documents import MAX_INT
from perfsuite.core.errors import ConfigError

# Cases one sweep may expand to (the product of its value lists): 10,000 cases of 0.1 s each are
# 17 minutes; a million would be 28 hours, and a typo.
MAX_CASES = 10_000

_LARGEST = 1.7976931348623157e308  # the largest finite float: a bound beyond it is infinite
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One parameter of a workload: its type, default and what values it allows."""

    name: str
    type: type[Any]
    default: Any
    choices: tuple[Any, ...] | None = None
    min: float | None = None
    max: float | None = None
    help: str = ""

    def __post_init__(self) -> None:
        if self.type not in (int, float, str, bool):
            raise TypeError(f"param {self.name!r}: unsupported type {self.type!r}")
        # Bounds and choices are checked as declared: a NaN bound compares false with everything,
        # so every value would pass it.
        for bound in ("min", "max"):
            v = getattr(self, bound)
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, (int, float)) or not -_LARGEST <= v <= _LARGEST
            ):
                raise ConfigError(f"param {self.name!r}: {bound} must be a finite number, got {v!r}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ConfigError(f"param {self.name!r}: min {self.min!r} is above max {self.max!r}")
        for choice in self.choices or ():
            self._typed(choice)
        # The default must itself be valid, or `perfsuite list` would advertise a broken value.
        self.validate(self.default)

    def allowed(self) -> str:
        """Human-readable description of the values this parameter accepts."""
        if self.choices is not None:
            return "one of " + ", ".join(str(c) for c in self.choices)
        bounds = []
        if self.min is not None:
            bounds.append(f">= {self.min}")
        if self.max is not None:
            bounds.append(f"<= {self.max}")
        kind = self.type.__name__
        return f"{kind} {' and '.join(bounds)}".strip()

    def parse(self, text: str) -> Any:
        """Convert command-line text to this parameter's type and validate it."""
        text = text.strip()
        try:
            if self.type is bool:
                low = text.lower()
                if low in _TRUE:
                    value: Any = True
                elif low in _FALSE:
                    value = False
                else:
                    raise ValueError
            elif self.type is int:
                value = int(text)
            elif self.type is float:
                value = float(text)
            else:
                value = text
        except ValueError:
            raise ConfigError(
                f"parameter {self.name!r} expects {self.type.__name__}, got {text!r} (allowed: {self.allowed()})"
            ) from None
        return self.validate(value)

    def _typed(self, value: Any) -> Any:
        """`value` as this parameter's type (an int as a float), a number finite and within what a
        record keeps; else a ConfigError naming the parameter."""
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            if abs(value) > _LARGEST:
                raise ConfigError(f"parameter {self.name!r}: {str(value)[:40]} is not a finite number")
            value = float(value)
        if not isinstance(value, self.type) or (self.type is int and isinstance(value, bool)):
            raise ConfigError(
                f"parameter {self.name!r} expects {self.type.__name__}, got {str(value)[:80]!r} "
                f"(allowed: {self.allowed()})"
            )
        if self.type is float and not math.isfinite(value):
            raise ConfigError(f"parameter {self.name!r}: {value!r} is not a finite number")
        if self.type is int and not -MAX_INT <= value <= MAX_INT:
            # A record keeps integers a JSON reader in any language keeps exactly (documents.MAX_INT).
            raise ConfigError(
                f"parameter {self.name!r}: {str(value)[:40]} is too large (integers from -2**53 to 2**53)"
            )
        return value

    def validate(self, value: Any) -> Any:
        """Check an already-typed value; return it (ints are accepted for float params).

        A parameter whose default is None takes its value from the workload's `size` preset;
        None stays allowed for it.
        """
        if value is None and self.default is None:
            return None
        value = self._typed(value)
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"parameter {self.name!r}: {value!r} is not allowed ({self.allowed()})")
        if self.min is not None and value < self.min:
            raise ConfigError(f"parameter {self.name!r}: {value!r} is too small ({self.allowed()})")
        if self.max is not None and value > self.max:
            raise ConfigError(f"parameter {self.name!r}: {value!r} is too large ({self.allowed()})")
        return value


def resolve(specs: Iterable[Param], given: Mapping[str, Any], workload: str) -> dict[str, Any]:
    """Fill defaults and validate `given` against `specs`; unknown names are an error."""
    by_name = {p.name: p for p in specs}
    unknown = sorted(set(given) - set(by_name))
    if unknown:
        raise ConfigError(
            f"workload {workload!r} has no parameter {unknown[0]!r}; "
            f"its parameters are: {', '.join(by_name) or '(none)'}"
        )
    out = {}
    for name, spec in by_name.items():
        out[name] = spec.validate(given[name]) if name in given else spec.default
    return out


def parse_assignments(items: Iterable[str], specs: Iterable[Param], workload: str) -> dict[str, list[Any]]:
    """Parse `-p key=v1,v2` items into {key: [typed values]}; a list of several values sweeps."""
    by_name = {p.name: p for p in specs}
    out: dict[str, list[Any]] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"-p expects key=value, got {item!r}")
        key, _, raw = item.partition("=")
        key = key.strip()
        if key not in by_name:
            raise ConfigError(
                f"workload {workload!r} has no parameter {key!r}; its parameters are: {', '.join(by_name) or '(none)'}"
            )
        if key in out:  # `-p n=32 -p n=48`: one of them would be dropped silently
            raise ConfigError(f"parameter {key!r} is given twice; give one list instead (-p {key}=A,B)")
        values = [v for v in raw.split(",")]
        if len(values) > MAX_CASES:  # checked before parsing a million values
            raise ConfigError(f"parameter {key!r}: {len(values)} values, more than the limit of {MAX_CASES} cases")
        if not raw.strip() or any(not v.strip() for v in values):
            raise ConfigError(f"parameter {key!r}: empty value in {item!r}")
        parsed = [by_name[key].parse(v) for v in values]
        seen: set[Any] = set()
        repeated = [v for v in parsed if v in seen or seen.add(v)]  # type: ignore[func-returns-value]
        if repeated:  # `n=32,32` would measure the same case twice
            raise ConfigError(f"parameter {key!r}: value {repeated[0]!r} is listed twice in {item!r}")
        out[key] = parsed
    return out


def expand_sweep(values: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    """Cartesian product of value lists, in the order given (last key varies fastest)."""
    import itertools

    cases = math.prod(len(v) for v in values.values())
    if cases > MAX_CASES:
        sizes = ", ".join(f"{k}: {len(v)} values" for k, v in values.items())
        raise ConfigError(f"the sweep expands to {cases} cases ({sizes}), more than the limit of {MAX_CASES}")
    return [dict(zip(values, combo)) for combo in itertools.product(*values.values())]


def single_values(params: list[str], workload: Any) -> dict[str, Any]:  # a Workload (core.workload imports this)
    """`-p` items for a command that measures one case: a value list is an error, not silently cut."""
    parsed = parse_assignments(params, workload.params, workload.name)
    many = [k for k, v in parsed.items() if len(v) > 1]
    if many:
        raise ConfigError(f"parameter {many[0]!r}: this command takes one value, not a list")
    return {k: v[0] for k, v in parsed.items()}
