"""Nsight Compute CSV exports, read into one record per kernel launch.

Two layouts, told apart by the header:
- `ncu --import R --csv --page details`: one row per metric; columns `ID`, ..., `Kernel Name`,
  ..., `Section Name`, `Metric Name`, `Metric Unit`, `Metric Value`; newer ncu versions add rule
  columns that the metric rows leave empty, so rows may be shorter than the header.
- `ncu --import R --csv --page raw`: one row per launch, one column per metric, and a second
  row with the units.
Both give the same numbers (the details page rounds its values to fewer digits). `==PROF==`
lines are skipped, a UTF-8 byte-order mark and CRLF line ends are read normally, and a `.gz`
file is read decompressed. NVTX columns: perfsuite.roofline.nvtx_ranges. Every value the roofline
uses must be a finite, non-negative number in a unit of its metric's kind (times and clock
rates above zero); errors name the file, the 1-based physical line, the column and the metric.
"""

from __future__ import annotations

import csv
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from perfsuite.core.errors import ConfigError
from perfsuite.roofline import nvtx_ranges
from perfsuite.roofline.metrics import DEVICE_NAME, WANTED, kind, optional
from perfsuite.roofline.ncu_units import UnitError, read
from perfsuite.storage.read import MAX_FILE_BYTES, read_bytes


class NcuCsvError(ConfigError):
    pass


@dataclass
class Launch:
    id: str
    kernel: str
    nvtx: str = ""  # the ranges around it, e.g. "train_step > forward"
    ranges: tuple[str, ...] = ()  # every range it counts in
    metrics: dict[str, float] = field(default_factory=dict)
    line: int = 0  # where its first row is
    device: str = ""  # device__attribute_display_name, when the export carries it
    cc: str = ""  # compute capability ("9.0"), from the CC column both pages carry


def _text(p: Path) -> str:
    try:
        data = read_bytes(p, NcuCsvError)  # a regular file of bounded size
        if p.name.endswith(".gz"):
            # Bounded too: a few kB of gzip can expand to gigabytes.
            z = zlib.decompressobj(wbits=31)
            data = z.decompress(data, MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                raise NcuCsvError(f"{p}: expands to more than the {MAX_FILE_BYTES}-byte limit")
        return data.decode("utf-8-sig")  # ncu on Windows, and some editors, write a BOM
    except FileNotFoundError:
        raise NcuCsvError(f"{p}: no such file") from None
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise NcuCsvError(f"{p}: cannot read ({exc})") from None


def read_ncu_csv(path: str | Path) -> list[Launch]:
    p = Path(path)
    lines = _text(p).splitlines()
    table = [(i + 1, line) for i, line in enumerate(lines) if line.strip() and not line.startswith("==")]
    if not table:
        raise NcuCsvError(f"{p}: no CSV table (only ==PROF== lines or nothing)")
    rows = []
    for n, line in table:
        try:
            rows.append((n, next(csv.reader([line]))))
        except csv.Error as exc:  # a field over csv's limit (131072 characters), a stray NUL
            raise NcuCsvError(f"{p} line {n}: not a row Nsight Compute writes ({exc})") from None
    header_line, header = rows[0]
    if "ID" not in header or "Kernel Name" not in header:
        raise NcuCsvError(f"{p} line {header_line}: not an Nsight Compute CSV header (no ID / Kernel Name)")
    dup = sorted({name for name in header if name and header.count(name) > 1})
    if dup:  # which of two `Metric Value` columns holds the value? Neither is a guess worth a chart
        raise NcuCsvError(f"{p} line {header_line}: column {dup[0]!r} appears more than once")
    col = {name: i for i, name in enumerate(header)}
    cols = nvtx_ranges.columns(header)
    details = "Metric Name" in col and "Metric Value" in col
    launches = (_details if details else _raw)(_Ctx(p, header, col, cols), rows[1:])
    if not launches:
        raise NcuCsvError(
            f"{p} line {header_line}: no kernel launch after the header "
            f"({'details' if details else 'raw'} page with no data rows)"
        )
    return launches


@dataclass
class _Ctx:
    path: Path
    header: list[str]
    col: dict
    nvtx_cols: list

    def need(self, line: int, row: list[str], name: str) -> str:
        i = self.col[name]
        if i >= len(row):
            raise NcuCsvError(f"{self.path} line {line}: truncated row, column {i + 1} ({name!r}) is missing")
        return row[i]

    def launch(self, line: int, row: list[str]) -> Launch:
        try:
            shown, ranges = nvtx_ranges.launch_ranges(self.nvtx_cols, row)
        except ValueError as exc:
            raise NcuCsvError(f"{self.path} line {line}, NVTX column: {exc}") from None
        cc_at = self.col.get("CC")
        cc = row[cc_at].strip() if cc_at is not None and cc_at < len(row) else ""
        return Launch(self.need(line, row, "ID"), self.need(line, row, "Kernel Name"), shown, ranges, line=line, cc=cc)

    def number(self, line: int, column: int, metric: str, text: str, unit: str) -> float | None:
        """The value in base units; None for an optional metric shown as "n/a"."""
        where = f"{self.path} line {line}, column {column} ({metric})"
        if optional(metric) and text.strip().lower() == "n/a":
            return None
        try:
            value = read(text, unit, kind(metric))
        except UnitError as exc:
            raise NcuCsvError(f"{where}: {exc}") from None
        except ValueError:
            raise NcuCsvError(f"{where}: {text!r} is not a number") from None
        if not math.isfinite(value):
            raise NcuCsvError(f"{where}: {text!r} is not a finite number")
        if value < 0:
            raise NcuCsvError(f"{where}: {text!r} is negative; counts, bytes and times cannot be")
        if value == 0 and kind(metric) in ("time", "freq"):
            raise NcuCsvError(f"{where}: {text!r} is zero; a launch's time and clock rate are positive")
        return value


def _details(ctx: _Ctx, rows) -> list[Launch]:
    launches: dict[str, Launch] = {}
    for line, row in rows:
        metric = ctx.need(line, row, "Metric Name")
        value = ctx.need(line, row, "Metric Value")
        lid = ctx.need(line, row, "ID")
        if lid not in launches:
            launches[lid] = ctx.launch(line, row)
        if metric == DEVICE_NAME:
            launches[lid].device = value
        elif metric in WANTED:
            unit_at = ctx.col.get("Metric Unit")
            unit = row[unit_at] if unit_at is not None and unit_at < len(row) else ""
            v = ctx.number(line, ctx.col["Metric Value"] + 1, metric, value, unit)
            if v is not None:
                launches[lid].metrics[metric] = v
    return list(launches.values())


def _raw(ctx: _Ctx, rows) -> list[Launch]:
    first = rows[0][1] if rows else []
    if not rows or (ctx.col["ID"] < len(first) and first[ctx.col["ID"]].strip()):
        at = rows[0][0] if rows else "end of file"
        raise NcuCsvError(f"{ctx.path} line {at}: raw page without its units row (the row after the header)")
    _, units = rows[0]
    header = ctx.header
    wanted = [(i, name) for i, name in enumerate(header) if name in WANTED]
    device_at = ctx.col.get(DEVICE_NAME)
    out = []
    for line, row in rows[1:]:
        if len(row) < len(header):
            raise NcuCsvError(
                f"{ctx.path} line {line}: truncated row, column {len(row) + 1} ({header[len(row)]!r}) is missing"
            )
        launch = ctx.launch(line, row)
        for i, name in wanted:
            unit = units[i] if i < len(units) else ""
            v = ctx.number(line, i + 1, name, row[i], unit)
            if v is not None:
                launch.metrics[name] = v
        if device_at is not None:
            launch.device = row[device_at]
        out.append(launch)
    return out
