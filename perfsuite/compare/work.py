"""What kind of change two records of one case show: more work, less work, other work or the same
work, from their work signatures (perfsuite.measuring.signature), stated exactly: a difference in
the operators dispatched has no interval, so none is given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SAME, MORE, LESS, OTHER, UNKNOWN = "same work", "more work", "less work", "other work", "work not recorded"
# Instructions per step that move by more than this are a change of work in their own right (issue
# 56's default); Callgrind's own spread between processes is far below it (reports/work/).
INSTRUCTION_THRESHOLD = 0.005


def differences(base: Mapping[str, Any], new: Mapping[str, Any], top: int = 5) -> list[str]:
    """What new does that base does not, and the reverse, per (operator, shapes, dtype): "+3
    aten.cumsum.default (64x8192) float32", largest changes first; the bytes allocated last."""
    b = {(op, s, d): n for op, s, d, n in base.get("entries") or []}
    n = {(op, s, d): c for op, s, d, c in new.get("entries") or []}
    moved = [(n.get(k, 0) - b.get(k, 0), k) for k in set(b) | set(n) if n.get(k, 0) != b.get(k, 0)]
    moved.sort(key=lambda x: (-abs(x[0]), x[1]))
    said = [f"{d:+d} {op} ({shapes or 'no tensors'}) {dtype}" for d, (op, shapes, dtype) in moved[:top]]
    if len(moved) > top:
        said.append(f"and {len(moved) - top} more")
    if not moved and base.get("calls") != new.get("calls"):  # entries cut at MAX_ENTRIES
        said.append(f"{new.get('calls', 0) - base.get('calls', 0):+d} operator calls")
    db = _allocated_more(base, new)
    if db:
        said.append(f"{db:+,d} bytes allocated")
    return said


def change(
    base: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
    base_instructions: Mapping[str, Any] | None = None,
    new_instructions: Mapping[str, Any] | None = None,
    threshold: float = INSTRUCTION_THRESHOLD,
) -> tuple[str, list[str]]:
    """(kind, details): SAME; MORE or LESS (more or fewer operator calls; as many, with more or
    fewer bytes allocated; or the same operators with instructions per step moved by more than
    `threshold`: Python between them, or work inside one); OTHER (as many calls and bytes, other
    operators or shapes); UNKNOWN when neither signatures nor instruction counts are on both sides
    (records of before 2026-11-29, or ones it failed on)."""
    kind, details = _signature_change(base, new)
    ok = [c for c in (base_instructions, new_instructions) if c and c.get("status") == "ok"]
    if len(ok) < 2:
        return kind, details
    # A hardware count and a simulated one are different numbers, and so are counts of other calls
    # (method version 3 counts the third call; records before it, a mean of the fourth to sixth,
    # which differ by up to 2% for a small step: reports/work/count-cost/per-call-2026-11-30.json).
    methods = [_method(c) for c in ok]
    if methods[0] != methods[1]:
        return kind, [*details, f"instructions counted by {methods[0]} and by {methods[1]}: not compared"]
    b, n = ok[0]["per_step"], ok[1]["per_step"]
    moved = n / b - 1
    said = f"{moved:+.2%} instructions per step ({b:,.0f} -> {n:,.0f})"
    if abs(moved) > threshold:
        if kind in (SAME, UNKNOWN):
            kind = MORE if moved > 0 else LESS
        details.append(said)
    elif kind == UNKNOWN:
        kind = SAME
        details.append(said)
    return kind, details


def _method(count: Mapping[str, Any]) -> str:
    """How a count was taken, as far as its number depends on it: "callgrind v3", "pmu v3"; a record
    without a version is of before version 3."""
    version = count.get("method_version")
    return f"{count.get('method', 'callgrind')} {'v' + str(version) if version else 'before v3'}"


def _signature_change(base: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> tuple[str, list[str]]:
    if not base or not new:
        return UNKNOWN, []
    launched = _kernels_moved(base, new)
    kernels = [f"{launched:+d} kernel launches a step ({base['kernels']} -> {new['kernels']})"] if launched else []
    if base.get("digest") == new.get("digest"):
        # the same operators, other kernels on the device: a library's choice, which may differ
        # between two runs of the same code (cuDNN's autotuning), so other work, not more or less
        return (OTHER, kernels) if kernels else (SAME, [])
    details = differences(base, new) + kernels
    calls = (new.get("calls") or 0) - (base.get("calls") or 0)
    allocated = _allocated_more(base, new)
    grew = calls > 0 or (calls == 0 and allocated > 0)
    shrank = calls < 0 or (calls == 0 and allocated < 0)
    return (MORE if grew else LESS if shrank else OTHER), details


def _kernels_moved(base: Mapping[str, Any], new: Mapping[str, Any]) -> int:
    """New's kernel launches a step less base's (perfsuite.measuring.signature, on a GPU); 0 where
    either did not count them."""
    if isinstance(base.get("kernels"), int) and isinstance(new.get("kernels"), int):
        return int(new["kernels"]) - int(base["kernels"])
    return 0


# glibc's default M_MMAP_THRESHOLD: a block this large or larger is mapped afresh by a process on
# glibc's default heap, and may be unmapped when freed (glibc raises the threshold as such blocks
# are freed, so whether it is depends on the process's history).
FAULTING_BYTES = 128 * 1024


def _allocated_more(base: Mapping[str, Any], new: Mapping[str, Any]) -> int:
    return int((new.get("bytes_allocated") or 0) - (base.get("bytes_allocated") or 0))


def held_heap_note(base: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str | None:
    """What a CPU gate with a held heap (--heap steady) leaves out when the two steps allocate
    different amounts: those bytes' page faults, which a program on glibc's default heap may pay.
    On six real changes the gate's size missed a default-heap process's in exactly the two that
    allocate more (+10-13% against +19%, +13-19% against +33%: reports/gate/real-changes/). None
    when the signatures are missing or the step's total moved by less than FAULTING_BYTES (a
    total: the signature does not keep each block's size)."""
    if not base or not new:
        return None
    moved = _allocated_more(base, new)
    if abs(moved) < FAULTING_BYTES:
        return None
    # No direction is claimed: a +2 MiB step read 1.17 held and 1.12 on the default heap in one
    # trial here; the real changes above read more.
    return (
        f"the new step allocates {moved / 2**20:+,.2f} MiB a step in all against the base; the held heap "
        "keeps those pages' faults out of these pairs, which a program on glibc's default heap may pay: "
        "its change may differ from this one (--heap default measures it so)"
    )


def said(kind: str, changes: Sequence[str], word: str | None = None, environment_changed: bool = False) -> str:
    """The kind of change in words, beside the time's verdict `word`: "more work: +2
    aten.cumsum.default (16x8) float32; ...", "same work, slower", "same work; environment changed"."""
    out = kind
    if kind == SAME and word in ("slower", "faster"):
        out += f", {word}"
    if changes:
        out += ": " + "; ".join(changes[:3])
    return f"{out}; environment changed" if environment_changed else out
