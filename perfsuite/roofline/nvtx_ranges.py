"""NVTX columns of an Nsight Compute CSV export (`ncu --nvtx`), parsed into ranges.

Real exports carry two columns whose headers spell out each entry's fields:
- `Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg`: the start/end
  ranges open around the launch, one quoted entry each, space separated:
  ` "0:<default domain>:train_step:none:none:none:none:none:none"  "1:<default domain>:forward:…" `.
  Start/end ranges are process-wide and may overlap; each is a range of its own.
- `thread Domain:Push/Pop_Range:PL_Type:…`: the launching thread's id, then its push/pop stack,
  outermost first: `7  "<default domain>:train_step:none:…"  "<default domain>:forward:none:…"`.
  Push/pop ranges nest: the inner one is reported as `train_step > forward`.
The range name is what lies between the leading fields (id, domain) and the six trailing
payload/colour/message fields, so a name may itself contain ':'. A cell with no quoted entry
is read the way hand-written files put a stack: `<domain>:outer:inner`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_DOMAIN = "<default domain>"
_QUOTED = re.compile(r'"([^"]*)"')


@dataclass(frozen=True)
class Column:
    index: int
    push_pop: bool
    lead: int  # fields before the range name (Id and Domain, or Domain)
    tail: int  # fields after it (payload, colour, message)


def columns(header: list[str]) -> list[Column]:
    """The NVTX columns of a header: any column whose name is a ':'-list with a `*_Range` field."""
    out = []
    for i, name in enumerate(header):
        fields = [f.strip() for f in name.split(":")]
        at = next((j for j, f in enumerate(fields) if f.endswith("_Range")), None)
        if at is None or len(fields) < 2:
            continue
        out.append(Column(i, "Push/Pop" in fields[at], at, len(fields) - at - 1))
    return out


@dataclass(frozen=True)
class Range:
    domain: str
    name: str

    @property
    def label(self) -> str:
        """`name`, or ncu's `domain@name` for a range outside the default domain."""
        return self.name if self.domain in ("", DEFAULT_DOMAIN) else f"{self.domain}@{self.name}"


def _entry(col: Column, text: str) -> Range:
    fields = text.split(":")
    if len(fields) < col.lead + 1 + col.tail:
        raise ValueError(
            f"NVTX entry {text!r} has {len(fields)} ':'-fields; its header names {col.lead + 1 + col.tail}"
        )
    domain = fields[col.lead - 1] if col.lead else ""
    name = ":".join(fields[col.lead : len(fields) - col.tail]).strip()
    msg = fields[-1].strip() if col.tail else ""
    if name in ("", "none") and msg not in ("", "none"):  # a range named by its message only
        name = msg
    if not name:
        raise ValueError(f"NVTX entry {text!r} has no range name")
    return Range(domain.strip(), name)


def parse(col: Column, cell: str) -> list[Range]:
    """The ranges of one cell, outermost first; ValueError says what is malformed."""
    entries = _QUOTED.findall(cell)
    if entries:
        return [_entry(col, e) for e in entries]
    parts = [p.strip() for p in cell.split(":") if p.strip()]
    domain = ""
    if parts and parts[0].startswith("<") and parts[0].endswith(">"):
        domain = parts.pop(0)
    return [Range(domain, p) for p in parts]


def launch_ranges(cols: list[Column], row: list[str]) -> tuple[str, tuple[str, ...]]:
    """(path shown for the launch, the ranges it counts in). Start/end ranges count by name;
    a push/pop stack a > b counts in `a` and in `a > b`, so a name nested under two parents
    stays two ranges."""
    shown: list[str] = []
    keys: list[str] = []
    for col in sorted(cols, key=lambda c: c.push_pop):  # process-wide start/end ranges first
        if col.index >= len(row):
            continue
        ranges = parse(col, row[col.index])
        labels = [r.label for r in ranges]
        shown.extend(labels)
        if col.push_pop:
            keys.extend(" > ".join(labels[: i + 1]) for i in range(len(labels)))
        else:
            keys.extend(labels)
    return " > ".join(shown), tuple(dict.fromkeys(keys))
