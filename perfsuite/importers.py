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
from pathlib import Path

from perfsuite.errors import RecordError
from perfsuite.record import Record, Work


def is_pytest_benchmark(doc) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list) and "machine_info" in doc


def is_asv_result(doc) -> bool:
    return isinstance(doc, dict) and "result_columns" in doc and isinstance(doc.get("results"), dict)


def _scalar_params(params) -> dict:
    if not isinstance(params, dict):
        return {}
    return {str(k): v for k, v in params.items() if isinstance(v, (str, int, float, bool, type(None)))}


def from_pytest_benchmark(doc: dict, path: Path) -> list[Record]:
    env = (doc.get("machine_info") or {}).get("perfsuite") or {}
    out = []
    for b in doc["benchmarks"]:
        stats = b.get("stats") or {}
        data = stats.get("data")
        if not data:
            raise RecordError(f"{path}: benchmark {b.get('name')!r} has no raw timings; "
                              "run pytest with --benchmark-save-data")
        info = b.get("extra_info") or {}
        out.append(Record(
            workload=str(b.get("group") or b.get("name")),
            params=_scalar_params(info.get("params") or b.get("params") or {"name": b.get("name")}),
            device=str(info.get("device", "cpu")),
            timing_method="pytest-benchmark",
            block_size=int(stats.get("iterations") or 1),
            samples_s=[float(x) for x in data],
            work=Work(items_per_step=float(info.get("items_per_step") or 1),
                      item_unit=str(info.get("item_unit") or "calls"),
                      flops_per_step=info.get("flops_per_step")),
            env=env,
            converged=True,
        ))
    return out


def from_asv(doc: dict, path: Path) -> list[Record]:
    cols = doc["result_columns"]
    if "samples" not in cols:
        raise RecordError(f"{path}: asv results without a samples column")
    i_params, i_samples = cols.index("params"), cols.index("samples")
    env = {"torch": (doc.get("params") or {}).get("torch")}
    out = []
    for name, row in doc["results"].items():
        if not name.split(".")[-1].startswith("time_"):
            continue
        samples = row[i_samples] if i_samples < len(row) else None
        if not samples:
            raise RecordError(f"{path}: {name} has no raw samples; run `asv run --record-samples`")
        params = row[i_params] or []
        combos = list(itertools.product(*params)) if params else [()]
        for combo, s in zip(combos, samples):
            if not s:
                continue  # a skipped or failed parameter combination
            values = {f"p{i}": _literal(v) for i, v in enumerate(combo)}
            out.append(Record(workload=name, params=values, device="cpu", timing_method="asv", block_size=1,
                              samples_s=[float(x) for x in s], work=Work(items_per_step=1, item_unit="calls"),
                              env={k: v for k, v in env.items() if v}, converged=True))
    if not out:
        raise RecordError(f"{path}: no time_* results with samples")
    return out


def _literal(text):
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return str(text)
    return v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
