"""Records from the other front-ends' result files, so `perfsuite compare` reads them too.

- pytest-benchmark JSON (`--benchmark-json`, or a file saved by `--benchmark-autosave`): the raw
  per-iteration timings are stored only with `--benchmark-save-data`.
- asv result files (`.asv/results/MACHINE/COMMIT-ENV.json`): raw samples of `time_*`
  benchmarks are stored only with `asv run --record-samples`.
Without raw samples there is nothing to test, and the error says which flag stores them.
"""

from __future__ import annotations

import ast
import itertools
import math
from pathlib import Path
from typing import Any

from perfsuite.core.documents import MAX_INT, MAX_SAMPLES
from perfsuite.core.errors import RecordError
from perfsuite.core.record import Record, Work

# An asv benchmark's parameter grid is the product of its value lists: 10 lists of 10 values are
# 10^10 cases, which would exhaust memory long before a comparison. Real grids are a few hundred.
MAX_COMBINATIONS = 100_000


def is_pytest_benchmark(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list) and "machine_info" in doc


def is_asv_result(doc: Any) -> bool:
    return isinstance(doc, dict) and "result_columns" in doc and isinstance(doc.get("results"), dict)


def _scalar_params(params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        return {}
    # A NaN or infinite value names no case (and would never equal itself as a case key).
    return {
        str(k): v
        for k, v in params.items()
        if isinstance(v, (str, int, float, bool, type(None))) and not (isinstance(v, float) and not math.isfinite(v))
    }


def _numbers(values: Any, where: str) -> list[float]:
    """A list of finite numbers, or a RecordError naming where it is in the file."""
    if not isinstance(values, list) or not values:
        raise RecordError(f"{where}: expected a non-empty list of numbers, got {type(values).__name__}")
    if len(values) > MAX_SAMPLES:
        raise RecordError(f"{where}: {len(values)} samples, more than the limit of {MAX_SAMPLES}")
    out = []
    for x in values:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise RecordError(f"{where}: {x!r} is not a non-negative finite number")
        out.append(float(x))
    return out


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def from_pytest_benchmark(doc: dict[str, Any], path: Path) -> list[Record]:
    env = _mapping(
        _mapping(doc.get("machine_info"), f"{path}: machine_info").get("perfsuite"), f"{path}: machine_info.perfsuite"
    )
    out = []
    for i, b in enumerate(doc["benchmarks"]):
        where = f"{path}: benchmarks[{i}]"
        b = _mapping(b, where)
        stats = _mapping(b.get("stats"), f"{where}.stats")
        data = stats.get("data")
        if not data:
            raise RecordError(
                f"{path}: benchmark {b.get('name')!r} has no raw timings; run pytest with --benchmark-save-data"
            )
        info = _mapping(b.get("extra_info"), f"{where}.extra_info")
        # Absent means one; present, it is the samples' divisor and must be a real count
        # (`iterations: 0` once read as 1).
        iterations = stats.get("iterations", 1)
        if isinstance(iterations, bool) or not isinstance(iterations, int) or not 1 <= iterations <= MAX_INT:
            raise RecordError(f"{where}.stats.iterations: expected a whole number >= 1, got {iterations!r}")
        try:
            out.append(
                Record(
                    workload=str(b.get("group") or b.get("name")),
                    params=_scalar_params(info.get("params") or b.get("params") or {"name": b.get("name")}),
                    device=str(info.get("device", "cpu")),
                    timing_method="pytest-benchmark",
                    block_size=iterations,
                    samples_s=tuple(_numbers(data, f"{where}.stats.data")),
                    work=Work(
                        items_per_step=float(info.get("items_per_step") or 1),
                        item_unit=str(info.get("item_unit") or "calls"),
                        flops_per_step=info.get("flops_per_step"),
                    ),
                    env=env,
                    converged=True,
                )
            )
        except (TypeError, ValueError) as exc:  # a value of the wrong type in extra_info
            raise RecordError(f"{where}: {exc}") from None
        for j, earlier in enumerate(out[:-1]):
            if earlier.case_key() == out[-1].case_key():  # compare would pool or drop one of them
                raise RecordError(
                    f"{where}: the same case as benchmarks[{j}] ({out[-1].label()}): "
                    "give each benchmark its own name, group or params"
                )
    return out


def from_asv(doc: dict[str, Any], path: Path) -> list[Record]:
    cols = doc["result_columns"]
    if not isinstance(cols, list) or "samples" not in cols or "params" not in cols:
        raise RecordError(f"{path}: asv results without params and samples columns")
    i_params, i_samples = cols.index("params"), cols.index("samples")
    env = {"torch": _mapping(doc.get("params"), f"{path}: params").get("torch")}
    # The commit asv measured (issue 50: imported asv records had none, so `store:REV` and a history
    # never found them); a result file that names a malformed one keeps none.
    commit = doc.get("commit_hash")
    if isinstance(commit, str) and 7 <= len(commit) <= 64 and all(c in "0123456789abcdef" for c in commit.lower()):
        env["git_commit"] = commit.lower()
        env["git_dirty"] = False
    out = []
    for name, row in doc["results"].items():
        where = f"{path}: results.{name}"
        if not name.split(".")[-1].startswith("time_"):
            continue
        if not isinstance(row, list):
            raise RecordError(f"{where}: expected a list of columns, got {type(row).__name__}")
        samples = row[i_samples] if i_samples < len(row) else None
        if not samples:
            raise RecordError(f"{path}: {name} has no raw samples; run `asv run --record-samples`")
        params = row[i_params] if i_params < len(row) else None
        params = params or []
        if not isinstance(params, list) or not all(isinstance(p, list) for p in params):
            raise RecordError(f"{where}: params must be a list of value lists, got {params!r}"[:300])
        grid = math.prod(len(p) for p in params)
        if grid > MAX_COMBINATIONS:
            raise RecordError(
                f"{where}: params expand to {grid} combinations, more than the limit of {MAX_COMBINATIONS}"
            )
        combos = list(itertools.product(*params)) if params else [()]
        if not isinstance(samples, list) or len(samples) != len(combos):
            # zip() would silently drop cases or leave some without their samples.
            raise RecordError(
                f"{where}: {len(combos)} parameter combination(s) but "
                f"{len(samples) if isinstance(samples, list) else 'no list of'} sample list(s)"
            )
        for j, (combo, s) in enumerate(zip(combos, samples)):
            if not s:
                continue  # a skipped or failed parameter combination
            values = {f"p{i}": _literal(v) for i, v in enumerate(combo)}
            out.append(
                Record(
                    workload=name,
                    params=values,
                    device="cpu",
                    timing_method="asv",
                    block_size=1,
                    samples_s=tuple(_numbers(s, f"{where}.samples[{j}]")),
                    work=Work(items_per_step=1, item_unit="calls"),
                    env={k: v for k, v in env.items() if v},
                    converged=True,
                )
            )
    if not out:
        raise RecordError(f"{path}: no time_* results with samples")
    return out


def _literal(text: Any) -> str | int | float | bool | None:
    try:
        v = ast.literal_eval(text) if isinstance(text, str) else text
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return str(text)
    return v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
