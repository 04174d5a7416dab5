"""Instructions from the CPU's own counters (a PMU), through the kernel's perf_event_open.

Where a PMU is exposed, the count of a step's instructions needs no simulation: the kernel counts
the user-space instructions one thread retires (`instructions:u`, as rustc-perf gates on) between
two ioctls, at the step's own speed, where Callgrind runs it 100-400x slower. The count is the
hardware's, so it moves a little from run to run (interrupts' user-space effects, page faults'
retries: rustc-perf reports about 0.2%), unlike Callgrind's; a count of one method is never compared
with a count of the other (perfsuite.measuring.instructions).

Most VMs expose no PMU (this one's kernel answers ENOENT for a hardware event); a kernel may refuse
counters to an unprivileged user (perf_event_paranoid 3 on Debian's kernels, or above 2 without
CAP_PERFMON). `refused()` says which, and perfsuite then counts with Callgrind.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import struct
from collections.abc import Iterator
from pathlib import Path

PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE = 0, 1
HW_INSTRUCTIONS = 1  # PERF_COUNT_HW_INSTRUCTIONS: retired instructions
SW_TASK_CLOCK = 1  # PERF_COUNT_SW_TASK_CLOCK: a software event every Linux has (the tests' stand-in)
_SYSCALL = {"x86_64": 298, "aarch64": 241}  # __NR_perf_event_open
_ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5: the kernel reads this much of the zeroed struct
# perf_event_attr's flag bits: start disabled, count user space only (":u": the step's own code,
# not the kernel's work on its behalf, which the machine's mood moves), no hypervisor.
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6
# read_format: the times the counter was enabled and running come with its value, so a count the
# kernel multiplexed (time-shared with other counters, then scaled) is seen and refused
_TOTAL_TIME_ENABLED, _TOTAL_TIME_RUNNING = 1 << 0, 1 << 1
_IOC_ENABLE, _IOC_DISABLE, _IOC_RESET = 0x2400, 0x2401, 0x2403


class CounterRefused(OSError):
    """The kernel would not open the counter; the message says why and what allows it."""


def _paranoid() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        return None


def _why(code: int) -> str:
    if code in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return "no hardware instruction counter (no PMU: a VM that exposes no virtual counters)"
    if code in (errno.EACCES, errno.EPERM):
        paranoid = _paranoid()
        if paranoid is not None and paranoid <= 2:  # the sysctl allows it: a container's filter does not
            return (
                f"perf_event_open is refused ({errno.errorcode[code]}) though perf_event_paranoid is {paranoid}: "
                "a container's seccomp filter (Docker's default refuses it; --security-opt or CAP_PERFMON allows it)"
            )
        return (
            f"the kernel refuses hardware counters to this user (perf_event_paranoid {paranoid}); "
            "`sysctl kernel.perf_event_paranoid=2` (or CAP_PERFMON) allows counting one's own process"
        )
    if code == errno.ENOSYS:
        return "perf_event_open is not available (an old kernel, or a sandbox's seccomp filter)"
    return f"perf_event_open failed: {errno.errorcode.get(code, code)} ({os.strerror(code)})"


def open_counter(kind: int = PERF_TYPE_HARDWARE, config: int = HW_INSTRUCTIONS) -> int:
    """A disabled counter of the calling thread's user-space events (`kind`, `config`), as a file
    descriptor; CounterRefused says why the kernel would not open it."""
    number = _SYSCALL.get(platform.machine())
    if number is None:
        raise CounterRefused(f"perf_event_open's system call number is not known on {platform.machine()}")
    attr = bytearray(128)
    struct.pack_into("IIQ", attr, 0, kind, _ATTR_SIZE, config)
    struct.pack_into("Q", attr, 32, _TOTAL_TIME_ENABLED | _TOTAL_TIME_RUNNING)
    struct.pack_into("Q", attr, 40, _DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV)
    buf = ctypes.create_string_buffer(bytes(attr), len(attr))
    libc = ctypes.CDLL(None, use_errno=True)
    # pid 0 and cpu -1: this thread, on whichever CPU it runs; no group; no flags
    fd = libc.syscall(ctypes.c_long(number), buf, ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(-1),
                      ctypes.c_ulong(0))  # fmt: skip
    if fd < 0:
        raise CounterRefused(_why(ctypes.get_errno()))
    return fd


def refused() -> str | None:
    """Why this machine's hardware counters cannot count a step's instructions here (None: they can)."""
    try:
        os.close(open_counter())
    except CounterRefused as exc:
        return str(exc)
    return None


class Multiplexed(RuntimeError):
    """The kernel ran the counter for only part of the block (shared with other counters): its
    value would be a scaled estimate, not a count."""


@contextlib.contextmanager
def counting(fd: int) -> Iterator[list[int]]:
    """Counts on `fd` (from open_counter) inside the block only; the list it yields holds the count
    once the block has ended. Multiplexed when the counter did not run the whole block."""
    got: list[int] = []
    fcntl.ioctl(fd, _IOC_RESET, 0)
    fcntl.ioctl(fd, _IOC_ENABLE, 0)
    try:
        yield got
    finally:
        fcntl.ioctl(fd, _IOC_DISABLE, 0)
    value, enabled, running = struct.unpack("QQQ", os.read(fd, 24))
    if running < enabled:
        raise Multiplexed(
            f"the hardware counter ran {running / enabled:.0%} of the counted step (shared with other "
            "counters: perf or another profiler on this machine); its value would be an estimate"
        )
    got.append(value)
