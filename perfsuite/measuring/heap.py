"""The C heap held steady, so that page faults stop being part of a CPU step's time.

glibc's malloc serves large blocks (>= 128 KiB at first, a threshold it then moves) with fresh
mmap()s and gives memory back to the kernel when the top of the heap is free. A training step
that frees and re-allocates tens of MiB of activations and gradients then pays for new zeroed
pages on every call: a ResNet18 batch-8 step on one thread took ~2,400 minor page faults per
A/B pair, and the per-pair time ratio had an SD of 10-18% in the first process-minute, against
2-3% once no page faulted (measured 2026-11-24, reports/gate/README.md). Where faults come and
go with what else the heap holds, they are noise, and they differ between two builds and
between processes.

`hold()` fixes both thresholds with mallopt(3), as MALLOC_MMAP_THRESHOLD_ and
MALLOC_TRIM_THRESHOLD_ would at start-up: blocks up to 32 MiB (glibc's largest mmap threshold)
come from the heap and freed memory stays mapped. It is process-wide and cannot be undone
(glibc stops moving the threshold once it is set), so it is for processes that measure: the
gate, worker processes, `run --heap steady`. `settle()` then runs the steps until the heap has
grown to what they need: eight rotations in a row whose minor faults cost at most 0.1% of their
time (three were not enough: a ResNet18 gate still faulted in bursts of 9 MiB, one layer-4
weight, afterwards; a steady trickle of a few dozen pages a rotation is not growth).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import sys
from collections.abc import Callable, Sequence
from typing import Any

from perfsuite.core.config import HEAP_MODES

MMAP_THRESHOLD = 32 * 1024 * 1024  # the largest glibc accepts on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
TRIM_THRESHOLD = 1 << 30
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # from <malloc.h>

_held: dict | None = None  # what hold() set in this process; None until it has


def minor_faults() -> int:
    """Minor page faults of this process so far (getrusage): a fresh zeroed page each."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def hold() -> dict:
    """Fix glibc's mmap and trim thresholds for this process; what was done, for the record.
    Where it cannot be done (off glibc, another allocator serving malloc, mallopt refusing) nothing
    is changed and the record says why: `reason`, and `probe()`'s facts about this host."""
    global _held
    if _held is not None:
        return dict(_held)
    if not sys.platform.startswith("linux"):
        return _refuse(f"mallopt is glibc's; this is {sys.platform}")
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError) as exc:
        return _refuse(f"no mallopt in this C library ({exc})")
    # jemalloc or tcmalloc preloaded (LD_PRELOAD, common with PyTorch) serve every malloc: glibc's
    # thresholds would be set on a heap that torch never uses. Asked of glibc itself (its counters
    # grow by a block the process's malloc hands out), not by comparing addresses: an interposer
    # that wraps malloc and passes it on to glibc (a profiler, a sandbox) still uses glibc's heap.
    serves = _glibc_serves_malloc(libc)
    if serves is False:
        return _refuse(
            f"malloc is not glibc's here: it comes from {_malloc_owner() or 'an unknown library'} "
            f"(LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r})"
        )
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success, 0 on error (glibc refuses an mmap threshold above half its
    # largest heap, which glibc.malloc.hugetlb=2 in GLIBC_TUNABLES makes 4 MiB).
    if mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1:
        return _refuse(
            f"mallopt refused the mmap threshold {MMAP_THRESHOLD} (glibc {_glibc_version(libc)}, "
            f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '')!r})"
        )
    if mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1:
        # The mmap threshold is already fixed: say so rather than claim glibc's default.
        _held = {"heap": "partial", "mmap_threshold": MMAP_THRESHOLD, "reason": "mallopt refused the trim threshold"}
        return dict(_held)
    _held = {"heap": "steady", "mmap_threshold": MMAP_THRESHOLD, "trim_threshold": TRIM_THRESHOLD}
    return dict(_held)


def _refuse(reason: str) -> dict:
    """Holding is refused for good in this process (the C library will not change): kept, so that
    state() and every record after it carry the reason, and hold() does not ask again."""
    global _held
    _held = {"heap": "default", "reason": reason}
    return dict(_held)


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _glibc_serves_malloc(libc, nbytes: int = 1 << 20) -> bool | None:
    """Whether the process's malloc (the symbol every library resolves) allocates from glibc's
    heap: glibc's own mallinfo2 must count a fresh block of `nbytes` (in the heap or mapped). None
    where glibc has no mallinfo2 (before 2.33): then only the addresses can be compared."""
    info = getattr(libc, "mallinfo2", None)
    if info is None:
        return (
            ctypes.cast(ctypes.CDLL(None).malloc, ctypes.c_void_p).value
            == ctypes.cast(libc.malloc, ctypes.c_void_p).value
        )
    info.argtypes, info.restype = [], _Mallinfo2
    process = ctypes.CDLL(None)  # the global scope: LD_PRELOAD first, as every caller of malloc sees it
    malloc, free = process.malloc, process.free
    malloc.argtypes, malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    free.argtypes, free.restype = [ctypes.c_void_p], None
    before = info()
    block = malloc(nbytes)
    after = info()
    free(block)
    used = lambda m: m.uordblks + m.hblkhd  # noqa: E731 - in-use bytes, heap and mapped
    return used(after) - used(before) >= nbytes


def _malloc_owner() -> str | None:
    """The file of the library whose malloc the process uses (dladdr), e.g. libjemalloc.so.2."""

    class DlInfo(ctypes.Structure):
        _fields_ = [
            ("dli_fname", ctypes.c_char_p),
            ("dli_fbase", ctypes.c_void_p),
            ("dli_sname", ctypes.c_char_p),
            ("dli_saddr", ctypes.c_void_p),
        ]

    try:
        process = ctypes.CDLL(None)
        dladdr = process.dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes, dladdr.restype = [ctypes.c_void_p, ctypes.POINTER(DlInfo)], ctypes.c_int
    info = DlInfo()
    if not dladdr(ctypes.cast(process.malloc, ctypes.c_void_p), ctypes.byref(info)) or not info.dli_fname:
        return None
    return info.dli_fname.decode(errors="replace")


def _glibc_version(libc) -> str:
    try:
        fn = libc.gnu_get_libc_version
    except AttributeError:
        return "unknown"
    fn.argtypes, fn.restype = [], ctypes.c_char_p
    return fn().decode()


def probe() -> dict:
    """This host's facts that decide whether the heap can be held: the C library, the library
    that serves malloc, the environment that can change either, and this process's heap state."""
    facts: dict[str, Any] = {
        "platform": sys.platform,
        "state": state(),
        "env": {
            k: v for k, v in os.environ.items() if k in ("LD_PRELOAD", "GLIBC_TUNABLES") or k.startswith("MALLOC_")
        },
    }
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError as exc:
            return {**facts, "libc": f"not loadable ({exc})"}
        facts.update(
            glibc=_glibc_version(libc), malloc_from=_malloc_owner(), glibc_serves_malloc=_glibc_serves_malloc(libc)
        )
    return facts


RESERVE_BYTES = 256 * 1024 * 1024
_RESERVE_CHUNK = 16 * 1024 * 1024  # under MMAP_THRESHOLD: from the heap, not a mapping of its own


def reserve(nbytes: int = RESERVE_BYTES) -> int:
    """Grow the held heap by `nbytes` (whole 16 MiB chunks) of touched, free memory at its top:
    later growth (a freed gradient that no longer fits its old hole) is then served without
    faulting. Only with the heap held (else glibc would trim it straight back). Returns the page
    faults it took: about nbytes / 4 KiB when the reserve was made (if the heap could not grow by
    brk, glibc maps the chunks instead and unmaps them on free: then no reserve is left)."""
    if not held() or nbytes < _RESERVE_CHUNK:
        return 0
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    libc.free.argtypes, libc.free.restype = [ctypes.c_void_p], None
    before = minor_faults()
    chunks = [libc.malloc(_RESERVE_CHUNK) for _ in range(nbytes // _RESERVE_CHUNK)]
    for p in chunks:
        if p:
            ctypes.memset(p, 0, _RESERVE_CHUNK)  # touch every page now, outside any timed region
    for p in chunks:
        if p:
            libc.free(p)
    return minor_faults() - before


def held() -> bool:
    """Whether this process's heap is held steady (both thresholds fixed): settle and reserve then apply."""
    return _held is not None and _held["heap"] == "steady"


def state() -> dict:
    """How this process's heap is set: `steady` after hold() (`partial` when glibc took only the mmap
    threshold), else glibc's own behaviour (with the `reason` when hold() was refused)."""
    return dict(_held) if _held is not None else {"heap": "default"}


def apply(mode: str) -> dict:
    """`steady`: hold(); `default`: leave malloc alone. Returns the process's heap state."""
    if mode not in HEAP_MODES:
        raise ValueError(f"heap must be one of {', '.join(HEAP_MODES)}, got {mode!r}")
    return hold() if mode == "steady" else state()


class FaultCount:
    """Minor page faults of this process inside the region (an instrument for the timed blocks)."""

    def __init__(self, faults: Callable[[], int] = minor_faults) -> None:
        self._faults, self._start, self.count = faults, 0, 0

    def __enter__(self) -> FaultCount:
        self._start = self._faults()
        return self

    def __exit__(self, *exc) -> None:
        self.count += self._faults() - self._start


# What one minor fault costs: a trap and a zeroed 4 KiB page, 4.9-5.4 us on this 2-core VM
# (2026-11-27, 20,000 fresh pages touched from Python); bare metal is faster, so this errs long.
FAULT_COST_S = 5e-6
# A rotation is quiet when its faults cost at most this share of its time: a ResNet18 side faulted
# 29-45 pages per 0.5-1.5 s rotation for ever (2026-11-26, reports/bisect/), 0.01-0.05% of its
# time, and a rule of no fault at all then ran every side to its time cap.
QUIET_SHARE = 1e-3


def settle(
    steps: Sequence[Callable[[], object]],
    now: Callable[[], float],
    max_s: float,
    quiet_rounds: int = 8,
    max_rounds: int = 500,
    faults: Callable[[], int] = minor_faults,
) -> dict:
    """Call every step in turn until `quiet_rounds` whole rotations in a row are quiet (their minor
    page faults cost at most QUIET_SHARE of the rotation's time, at FAULT_COST_S each: none at
    all for a step of microseconds), or `max_s` (or `max_rounds` rotations) has passed. Returns
    rotations, seconds, faults seen and whether it settled."""
    start, rounds, quiet, total = now(), 0, 0, 0
    while quiet < quiet_rounds and now() - start < max_s and rounds < max_rounds:
        before, t0 = faults(), now()
        for step in steps:
            step()
        new = faults() - before
        total += new
        rounds += 1
        quiet = quiet + 1 if new * FAULT_COST_S <= QUIET_SHARE * (now() - t0) else 0
    # Settled, the heap can still grow in rare bursts (a 9 MiB gradient that no longer fits the hole
    # it left): a touched reserve at the top serves them without faulting.
    reserved = reserve()
    return {
        "rotations": rounds,
        "seconds": now() - start,
        "faults": total,
        "settled": quiet >= quiet_rounds,
        "reserve_faults": reserved,
    }


if __name__ == "__main__":  # the probe for a GPU machine: python -m perfsuite.measuring.heap
    import json

    import torch  # noqa: F401 - as in a measuring process: whatever torch loads is loaded

    heap_state = hold()
    print(json.dumps({"hold": heap_state, **probe()}, sort_keys=True))
