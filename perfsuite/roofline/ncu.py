"""Nsight Compute CSV exports, read into one record per kernel launch.

Two layouts:
- `ncu --import R --csv --page details`: one row per metric; columns `ID`, ..., `Host Name`,
  [two NVTX columns when the report was taken with --nvtx], `Kernel Name`, ..., `Section Name`,
  `Metric Name`, `Metric Unit`, `Metric Value`; newer ncu versions add rule columns to the
  header that the metric rows leave empty, so rows may be shorter than the header.
- `ncu --import R --csv --page raw`: one row per launch, one column per metric, and a second
  header row with the units.
`==PROF==` lines around the table are skipped. Every column between `Host Name` and
`Kernel Name` is taken as an NVTX column; its value is read as the launch's push/pop stack,
range names separated by ':' (a leading `<...>` domain token is dropped). Errors name the file,
the 1-based physical line and the column.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from perfsuite.errors import ConfigError
from perfsuite.roofline.units import UnitError, parse_number, to_base

PRECISIONS = {"d": "double", "f": "single", "h": "half"}
OPS = ("add", "mul", "fma")
# Tensor-core FLOPs: NVIDIA's roofline convention for HMMA, 512 FLOPs per tensor-pipe
# instruction (Volta/Turing/Ampere FP16); other architectures or data types are not handled.
TENSOR_METRIC = "sm__inst_executed_pipe_tensor.sum"
TENSOR_FLOPS_PER_INST = 512.0
TIME = "gpu__time_duration.sum"
CYCLES, CYCLES_PER_S = "gpc__cycles_elapsed.max", "gpc__cycles_elapsed.avg.per_second"
DRAM, DRAM_R, DRAM_W = "dram__bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"
L2, L1 = "lts__t_bytes.sum", "l1tex__t_bytes.sum"


class NcuCsvError(ConfigError):
    pass


def flop_metric_names() -> list[str]:
    return [f"{pre}__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for pre in ("sm", "smsp")
            for p in PRECISIONS for op in OPS]


WANTED = set(flop_metric_names()) | {TENSOR_METRIC, TIME, CYCLES, CYCLES_PER_S, DRAM, DRAM_R, DRAM_W, L2, L1}


@dataclass
class Launch:
    id: str
    kernel: str
    nvtx: tuple[str, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)


def _stack(values: list[str]) -> tuple[str, ...]:
    names: list[str] = []
    for v in values:
        parts = [p.strip() for p in v.split(":") if p.strip()]
        if parts and parts[0].startswith("<") and parts[0].endswith(">"):
            parts = parts[1:]
        names.extend(parts)
    return tuple(names)


def read_ncu_csv(path: str | Path) -> list[Launch]:
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8", errors="strict").splitlines()
    except FileNotFoundError:
        raise NcuCsvError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NcuCsvError(f"{p}: cannot read ({exc})") from None
    table = [(i + 1, line) for i, line in enumerate(lines) if line.strip() and not line.startswith("==")]
    if not table:
        raise NcuCsvError(f"{p}: no CSV table (only ==PROF== lines or nothing)")
    rows = [(n, next(csv.reader([line]))) for n, line in table]
    header_line, header = rows[0]
    if "ID" not in header or "Kernel Name" not in header:
        raise NcuCsvError(f"{p} line {header_line}: not an Nsight Compute CSV header (no ID / Kernel Name)")
    col = {name: i for i, name in enumerate(header)}
    nvtx_cols = list(range(col["Host Name"] + 1, col["Kernel Name"])) if "Host Name" in col else []
    if "Metric Name" in col and "Metric Value" in col:
        return _details(p, rows[1:], col, nvtx_cols)
    return _raw(p, rows[1:], header, col, nvtx_cols)


def _need(p: Path, line: int, row: list[str], col: dict, name: str) -> str:
    i = col[name]
    if i >= len(row):
        raise NcuCsvError(f"{p} line {line}: truncated row, column {i + 1} ({name!r}) is missing")
    return row[i]


def _number(p: Path, line: int, column: int, name: str, text: str, unit: str) -> float:
    try:
        return to_base(parse_number(text), unit)
    except UnitError as exc:
        raise NcuCsvError(f"{p} line {line}, column {column} ({name}): {exc}") from None
    except ValueError:
        raise NcuCsvError(f"{p} line {line}, column {column} ({name}): {text!r} is not a number") from None


def _details(p: Path, rows, col, nvtx_cols) -> list[Launch]:
    launches: dict[str, Launch] = {}
    for line, row in rows:
        metric = _need(p, line, row, col, "Metric Name")
        value = _need(p, line, row, col, "Metric Value")
        lid = _need(p, line, row, col, "ID")
        if lid not in launches:
            launches[lid] = Launch(lid, _need(p, line, row, col, "Kernel Name"),
                                   _stack([row[i] for i in nvtx_cols if i < len(row)]))
        if metric in WANTED:
            unit = row[col["Metric Unit"]] if col.get("Metric Unit", 1 << 30) < len(row) else ""
            launches[lid].metrics[metric] = _number(p, line, col["Metric Value"] + 1, metric, value, unit)
    return list(launches.values())


def _raw(p: Path, rows, header, col, nvtx_cols) -> list[Launch]:
    if not rows:
        raise NcuCsvError(f"{p}: raw page without its units row")
    _, units = rows[0]
    out = []
    for line, row in rows[1:]:
        if len(row) < len(header):
            raise NcuCsvError(f"{p} line {line}: truncated row, column {len(row) + 1} "
                              f"({header[len(row)]!r}) is missing")
        launch = Launch(row[col["ID"]], row[col["Kernel Name"]], _stack([row[i] for i in nvtx_cols]))
        for i, name in enumerate(header):
            if name in WANTED:
                unit = units[i] if i < len(units) else ""
                launch.metrics[name] = _number(p, line, i + 1, name, row[i], unit)
        out.append(launch)
    return out
