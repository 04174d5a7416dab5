"""What makes numbers unstable on this machine, read from /proc and /sys (pyperf's `system show`).

Readers take the text or the folder they read, so tests feed them fake /proc and /sys trees.
`CpuUsage` is an instrument: a context manager that reads /proc/stat and this process's CPU
time before and after a region and says how much of the machine the hypervisor stole and how
many CPUs other processes used meanwhile. `pinned` applies `--cpus`/`--threads` for a region
and puts the old settings back. `check` turns readings into warnings.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
SYS_CPU = Path("/sys/devices/system/cpu")
# Environment variables that set or place the threads of OpenMP, MKL and OpenBLAS.
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "KMP_AFFINITY",
    "GOMP_CPU_AFFINITY",
)
# Warning thresholds: steal above 2% of the machine, other processes using more than half a CPU,
# a load average above half a load per usable CPU, another process above 10% of one CPU.
STEAL_WARN = 0.02
OTHERS_WARN_CPUS = 0.5
LOAD_WARN_PER_CPU = 0.5
BUSY_PROCESS_SHARE = 0.10


def clock_ticks() -> int:
    """Jiffies per second of /proc's CPU times (USER_HZ, 100 on Linux)."""
    try:
        return os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return 100


@dataclass(frozen=True)
class CpuTimes:
    """The machine-wide `cpu` line of /proc/stat, in jiffies (guest time is inside user)."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        return self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal

    @property
    def busy(self) -> int:
        """Jiffies some process (or the kernel for one) ran: not idle, not waiting, not stolen."""
        return self.total - self.idle - self.iowait - self.steal


def parse_proc_stat(text: str) -> CpuTimes:
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = [int(x) for x in line.split()[1:]]
            fields += [0] * (8 - len(fields))  # kernels before 2.6.11 have no steal column
            return CpuTimes(*fields[:8])
    raise ValueError("/proc/stat has no aggregate 'cpu' line")


def read_cpu_times(proc: Path = PROC) -> CpuTimes | None:
    try:
        return parse_proc_stat((proc / "stat").read_text())
    except (OSError, ValueError):
        return None


def read_load_average(proc: Path = PROC) -> list[float] | None:
    """1, 5 and 15-minute load averages."""
    try:
        return [float(x) for x in (proc / "loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        return None


def read_governors(sys_cpu: Path = SYS_CPU) -> dict[str, str]:
    """Frequency governor per CPU, where cpufreq is visible (often not inside a VM)."""
    out = {}
    for path in sorted(sys_cpu.glob("cpu[0-9]*/cpufreq/scaling_governor")):
        try:
            out[path.parts[-3]] = path.read_text().strip()
        except OSError:
            continue
    return out


def read_turbo(sys_cpu: Path = SYS_CPU) -> bool | None:
    """Whether turbo/boost is on: intel_pstate's no_turbo, or cpufreq's boost; None if neither is visible."""
    for rel, on_when in (("intel_pstate/no_turbo", "0"), ("cpufreq/boost", "1")):
        try:
            return (sys_cpu / rel).read_text().strip() == on_when
        except OSError:
            continue
    return None


def parse_pid_stat(text: str) -> tuple[str, int]:
    """(command name, user + system jiffies) from /proc/PID/stat. The name sits in parentheses
    and may itself hold spaces and parentheses, so the fields are counted from the last ')'."""
    lpar, rpar = text.index("("), text.rindex(")")
    rest = text[rpar + 2 :].split()
    # rest[0] is field 3 (state); utime and stime are fields 14 and 15.
    return text[lpar + 1 : rpar], int(rest[11]) + int(rest[12])


def process_cpu(proc: Path = PROC) -> dict[int, tuple[str, int]]:
    """pid -> (name, CPU jiffies so far) of every process visible now."""
    out = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            out[int(entry.name)] = parse_pid_stat((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile, or not ours to read
    return out


def busy_processes(
    window_s: float = 0.5,
    proc: Path = PROC,
    sleep: Callable[[float], None] = time.sleep,
    exclude: tuple[int, ...] = (),
    min_share: float = BUSY_PROCESS_SHARE,
) -> list[dict]:
    """Other processes that used more than `min_share` of one CPU over `window_s`, busiest first."""
    hz = clock_ticks()
    before = process_cpu(proc)
    sleep(window_s)
    after = process_cpu(proc)
    skip = {os.getpid(), *exclude}
    out = []
    for pid, (name, ticks) in after.items():
        if pid in skip or pid not in before:
            continue
        share = (ticks - before[pid][1]) / hz / window_s
        if share >= min_share:
            out.append({"pid": pid, "name": name, "cpu": round(share, 3), "command": _command(proc, pid)})
    return sorted(out, key=lambda p: -p["cpu"])


def _command(proc: Path, pid: int, limit: int = 120) -> str | None:
    """The command line of `pid`, shortened: `python` alone says little about who is busy."""
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    text = raw.replace(b"\0", b" ").decode(errors="replace").strip()
    return hide_credentials(text)[:limit] or None


# scheme://user:PASSWORD@host, and a password=... option: another process's command line may carry
# a store's URL (perfsuite --store postgresql://ci:secret@db ...), and records keep these lines.
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@]+@")
_OPTION_PASSWORD = re.compile(r"((?:password|passwd|pwd)=)[^\s&]+", re.IGNORECASE)


def hide_credentials(text: str) -> str:
    """`text` with the passwords of URLs and of password= options replaced by ***."""
    return _OPTION_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


class CpuUsage:
    """Instrument: steal and other processes' CPU use over a region, from /proc/stat.

    `others_cpus` is the machine's busy time less this process's own CPU time, per second of
    the region: 1.0 means another process kept one CPU busy throughout."""

    def __init__(
        self,
        proc: Path = PROC,
        clock: Callable[[], float] = time.perf_counter,
        own_cpu: Callable[[], float] = _own_cpu_s,
    ) -> None:
        self.proc, self.clock, self.own_cpu = proc, clock, own_cpu
        self.readings: dict = {"status": "not measured"}

    def __enter__(self) -> CpuUsage:
        self._t0, self._own0, self._cpu0 = self.clock(), self.own_cpu(), read_cpu_times(self.proc)
        return self

    def __exit__(self, *exc) -> None:
        wall, own = self.clock() - self._t0, self.own_cpu() - self._own0
        cpu1 = read_cpu_times(self.proc)
        if self._cpu0 is None or cpu1 is None or wall <= 0:
            self.readings = {"status": "unavailable", "wall_s": wall}
            return
        d = {name: getattr(cpu1, name) - getattr(self._cpu0, name) for name in ("total", "busy", "steal")}
        hz = clock_ticks()
        self.readings = {
            "status": "ok",
            "wall_s": wall,
            # Fractions of all the machine's CPU time in the region (0 when /proc/stat did not tick).
            "steal_fraction": d["steal"] / d["total"] if d["total"] > 0 else 0.0,
            "busy_fraction": d["busy"] / d["total"] if d["total"] > 0 else 0.0,
            "own_cpus": own / wall,
            "others_cpus": max(0.0, d["busy"] / hz - own) / wall,
        }


@contextlib.contextmanager
def pinned(cpus: tuple[int, ...] | None = None, threads: int | None = None) -> Iterator[None]:
    """This process on `cpus` (os.sched_setaffinity) with torch on `threads` threads, for the
    region only; what was set before is put back afterwards."""
    old_cpus = old_threads = None
    try:
        if cpus:
            old_cpus = os.sched_getaffinity(0)
            try:
                os.sched_setaffinity(0, cpus)
            except OSError as exc:
                from perfsuite.core.errors import ConfigError

                raise ConfigError(
                    f"--cpus {','.join(map(str, cpus))}: cannot pin to them ({exc.strerror}); "
                    f"this process may use CPUs {cpu_ranges(sorted(old_cpus))}"
                ) from None
        if threads:
            import torch

            old_threads = torch.get_num_threads()
            torch.set_num_threads(threads)
        yield
    finally:
        if old_threads is not None:
            import torch

            torch.set_num_threads(old_threads)
        if old_cpus is not None:
            os.sched_setaffinity(0, old_cpus)


# Linux's largest configurable CPU count (NR_CPUS) is 8192; anything above is not a CPU.
MAX_CPU = 8191


def parse_cpus(text: str) -> tuple[int, ...]:
    """`0,2-3` -> (0, 2, 3): the list syntax of taskset and /sys."""
    out: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not (lo.isascii() and lo.isdigit()) or (dash and not (hi.isascii() and hi.isdigit())):
            raise ValueError(f"expected CPU numbers like 0,2-3, got {text!r}")
        if len(lo) > 6 or len(hi) > 6:  # `0-100000000000` would build a list of 10^11 CPUs first
            raise ValueError(f"CPU numbers above {MAX_CPU} do not exist, got {text!r}")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last > MAX_CPU:
            raise ValueError(f"CPU numbers above {MAX_CPU} do not exist, got {text!r}")
        if last < first:
            raise ValueError(f"CPU range {part.strip()!r} runs backwards")
        out.extend(range(first, last + 1))
    if len(set(out)) != len(out):
        raise ValueError(f"CPU {text!r} lists a CPU twice")
    return tuple(out)


def cpu_ranges(cpus: list[int]) -> str:
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


def check(readings: dict) -> list[str]:
    """Warnings about what in `readings` (env.collect_* keys) can make numbers unstable."""
    out = []
    governors = set(readings.get("cpu_governors") or ())
    if governors - {"performance"}:
        out.append(
            f"CPU frequency governor is {', '.join(sorted(governors))}, not performance: "
            "the clock speed follows the load"
        )
    if readings.get("cpu_turbo"):
        out.append("turbo/boost is on: the clock speed depends on temperature and on the other cores")
    usable = len(readings.get("cpu_affinity") or []) or readings.get("logical_cores") or 1
    load = readings.get("load_avg")
    if load and load[0] > LOAD_WARN_PER_CPU * usable:
        out.append(f"load average {load[0]:.2f} on {usable} usable CPU(s): other work competes for them")
    steal = readings.get("steal_fraction")
    if steal is not None and steal > STEAL_WARN:
        out.append(f"hypervisor steal {steal:.1%} of CPU time: the VM's neighbours take cycles")
    busy = readings.get("busy_processes") or []
    if busy:
        names = ", ".join(f"{p['name']} ({p['pid']}) {p['cpu']:.0%}" for p in busy[:5])
        out.append(f"{len(busy)} other busy process(es): {names}")
    threads = readings.get("torch_threads")
    if threads and threads > usable:
        out.append(f"torch uses {threads} threads on {usable} usable CPU(s): oversubscribed")
    return out
