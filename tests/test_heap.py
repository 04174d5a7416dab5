"""perfsuite.measuring.heap: glibc's heap held steady, the settle loop, the fault counter, and the
setting carried into a record. hold() is process-wide and for good, so every test that holds the
heap does it in a fresh process."""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from heaphold import require_a_holdable_heap

from perfsuite.core.config import RunConfig
from perfsuite.core.errors import ConfigError
from perfsuite.measuring import heap

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's (Linux)")


# 180 MiB of new 9 MiB tensors (ResNet18's largest gradient) in a process whose heap is held, with
# and without a reserve made first: the reserve's touched pages serve them without faulting.
GROW = textwrap.dedent("""
    import json, sys, torch
    from perfsuite.measuring import heap
    held = heap.hold()
    reserve_faults = heap.reserve() if sys.argv[1] == "reserve" else 0
    f0 = heap.minor_faults()
    ts = [torch.ones(9 * 2**18) for _ in range(20)]
    print(json.dumps({"held": held, "faults": heap.minor_faults() - f0, "reserve_faults": reserve_faults}))
""")


def _grow(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", GROW, mode], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@linux_only
@pytest.mark.slow
def test_a_held_heap_with_a_reserve_grows_without_faulting():
    require_a_holdable_heap()
    bare, reserved = _grow("none"), _grow("reserve")
    assert reserved["held"]["heap"] == "steady" and reserved["held"]["mmap_threshold"] == 32 * 2**20
    pages = 180 * 2**20 // 4096
    assert bare["faults"] > pages // 2  # new heap pages, each faulted in on first touch
    assert reserved["reserve_faults"] > pages // 2 and reserved["faults"] < pages // 50


def test_no_reserve_without_a_held_heap():
    """glibc would trim a reserve straight back: nothing is made unless the heap is held."""
    if heap.state()["heap"] == "steady":
        pytest.skip("this test process already holds its heap")
    assert heap.reserve() == 0


class Faults:
    """A fake fault counter: returns the next reading of a script, then stays at the last."""

    def __init__(self, readings):
        self.readings = list(readings)

    def __call__(self):
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


class Clock:
    def __init__(self, step_s=0.01):
        self.t, self.step_s = 0.0, step_s

    def now(self):
        return self.t

    def step(self):
        self.t += self.step_s


def test_settle_runs_until_enough_quiet_rotations_in_a_row():
    clock = Clock()
    # Readings before/after each rotation: faults in rotations 1 and 3, none from 4 on.
    faults = Faults([0, 100, 100, 100, 100, 150] + [150] * 40)
    res = heap.settle([clock.step, clock.step], clock.now, max_s=60, quiet_rounds=4, faults=faults)
    assert res["settled"] and res["faults"] == 150
    assert res["rotations"] == 3 + 4  # the quiet run restarts after the fault in rotation 3
    assert res["seconds"] == pytest.approx(7 * 2 * 0.01)


def test_settle_gives_up_at_its_time_or_rotation_limit_and_says_so():
    clock = Clock(step_s=0.5)
    always = iter(range(0, 10**9, 700))  # 3.5 ms of faults in a 0.5 s rotation: not quiet
    res = heap.settle([clock.step], clock.now, max_s=3.0, faults=lambda: next(always))
    assert not res["settled"] and res["rotations"] == 6 and res["seconds"] == pytest.approx(3.0)
    res = heap.settle([lambda: None], lambda: 0.0, max_s=3.0, max_rounds=25, faults=lambda: next(always))
    assert not res["settled"] and res["rotations"] == 25  # a clock that never moves cannot spin for ever


def test_settle_takes_a_trickle_of_faults_that_costs_nothing_for_quiet_but_not_for_a_fast_step():
    # 40 pages per rotation: 0.2 ms of a 0.5 s rotation is quiet; of a 10 ms rotation it is not.
    for step_s, settled in ((0.5, True), (0.01, False)):
        clock, trickle = Clock(step_s=step_s), iter(range(0, 10**9, 40))
        res = heap.settle([clock.step], clock.now, max_s=60 * step_s, faults=lambda: next(trickle))  # noqa: B023 - called within this iteration
        assert res["settled"] is settled
        assert res["rotations"] == (8 if settled else 60)
        assert res["faults"] == 40 * res["rotations"]


def test_fault_count_adds_up_every_region_it_wraps():
    count = heap.FaultCount(Faults([10, 15, 40, 41]))
    with count:
        pass
    with count:
        pass
    assert count.count == 5 + 1


def test_heap_mode_is_validated_where_it_is_given():
    with pytest.raises(ConfigError, match="heap must be one of default, steady, got 'huge'"):
        RunConfig(heap="huge")
    with pytest.raises(ValueError, match="heap must be one of"):
        heap.apply("huge")


@linux_only
@pytest.mark.slow
def test_run_with_a_steady_heap_records_it_and_the_faults_it_timed(tmp_path):
    require_a_holdable_heap()
    out = tmp_path / "r.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "perfsuite",
            "run",
            "matmul",
            "-p",
            "n=64",
            "--device",
            "cpu",
            "--max-time",
            "2",
            "--heap",
            "steady",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    from perfsuite.storage.files import load_records

    (rec,) = load_records(out)
    assert rec.conditions["heap"] == "steady"
    assert rec.conditions["minor_faults_per_step"] < 1  # settled before the budget: nothing left to fault
    assert rec.warmup["heap_settle"]["settled"] and rec.warmup["heap_settle"]["reserve_faults"] > 1000


def test_a_default_run_records_the_default_heap_and_counts_faults(tmp_path):
    from perfsuite.core import registry
    from perfsuite.measuring.runner import time_case

    if heap.state()["heap"] != "default":
        pytest.skip("this test process already holds its heap")
    rec = time_case(registry.get("matmul"), {"n": 32}, RunConfig(device="cpu", max_time=0.3))
    assert rec.conditions["heap"] == "default" and "heap_settle" not in rec.warmup
    assert isinstance(rec.conditions["minor_faults_per_step"], float)


# Two stand-in allocators for LD_PRELOAD, built with the C compiler at test time: one that wraps
# malloc and passes every call on to glibc (as profilers and sandboxes do: glibc's heap still
# serves the process), one that serves malloc itself from its own mapping (as jemalloc does).
FORWARD_C = r"""
#include <stddef.h>
extern void *__libc_malloc(size_t); extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t); extern void *__libc_realloc(void *, size_t);
void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
void *calloc(size_t a, size_t b) { return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
"""
OWN_HEAP_C = r"""
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
static char *top, *end;
static void *grab(size_t n, size_t align) {
  if (!top) { top = mmap(0, (size_t)8 << 30, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                         -1, 0);
              if (top == MAP_FAILED) { top = 0; return 0; } end = top + ((size_t)8 << 30); }
  if (align < 16) align = 16;
  char *p = (char *)((((size_t)top + 16) + align - 1) & ~(align - 1));
  if (p + n > end) return 0;
  ((size_t *)p)[-1] = n; top = p + n; return p;
}
void *malloc(size_t n) { return grab(n, 16); }
void free(void *p) { (void)p; }
void *calloc(size_t a, size_t b) { return grab(a * b, 16); }
void *realloc(void *p, size_t n) {
  void *q = grab(n, 16); if (p && q) { size_t o = ((size_t *)p)[-1]; memcpy(q, p, o < n ? o : n); } return q; }
void *memalign(size_t a, size_t n) { return grab(n, a); }
void *aligned_alloc(size_t a, size_t n) { return grab(n, a); }
int posix_memalign(void **r, size_t a, size_t n) { *r = grab(n, a); return *r ? 0 : 12; }
void *valloc(size_t n) { return grab(n, 4096); }
size_t malloc_usable_size(void *p) { return p ? ((size_t *)p)[-1] : 0; }
"""


def _preload(tmp_path, name: str, source: str) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a stand-in allocator for LD_PRELOAD")
    src, lib = tmp_path / f"{name}.c", tmp_path / f"lib{name}.so"
    src.write_text(source)
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(src)], check=True, capture_output=True)
    return str(lib)


def _hold_under(lib: str) -> dict:
    import os

    code = "import json; from perfsuite.measuring import heap; print(json.dumps({'hold': heap.hold(), **heap.probe()}))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env={**os.environ, "LD_PRELOAD": lib}
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def require_dladdr_names_malloc_library() -> None:
    """Where python is a non-PIE executable that takes malloc's address, the symbol resolves to the
    executable's own PLT entry and dladdr names the executable, whatever library is behind it
    (seen on the H100 host, /opt/torch/.venv/bin/python3): the library cannot be named there."""
    owner = _hold_under("")["malloc_from"] or ""
    if Path(owner).resolve() == Path(sys.executable).resolve() or Path(owner).name.startswith("python"):
        pytest.skip(f"dladdr names the executable ({owner}) for malloc on this host, not the library serving it")


@linux_only
def test_an_interposer_that_passes_malloc_to_glibc_still_gets_a_held_heap(tmp_path):
    """Comparing malloc's address with glibc's refused this: glibc's heap serves every block."""
    require_a_holdable_heap()
    require_dladdr_names_malloc_library()
    res = _hold_under(_preload(tmp_path, "forward", FORWARD_C))
    assert res["malloc_from"].endswith("libforward.so") and res["glibc_serves_malloc"] is True
    assert res["hold"]["heap"] == "steady"


@linux_only
@pytest.mark.slow
def test_another_allocator_is_named_in_the_refusal_and_in_the_record(tmp_path):
    require_dladdr_names_malloc_library()
    lib = _preload(tmp_path, "ownheap", OWN_HEAP_C)
    res = _hold_under(lib)
    assert res["glibc_serves_malloc"] is False and res["malloc_from"] == lib
    assert res["hold"]["heap"] == "default" and lib in res["hold"]["reason"]
    assert res["state"] == res["hold"]  # kept: the records after it carry the reason
    import os

    out = tmp_path / "r.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "perfsuite",
            "run",
            "noop",
            "--device",
            "cpu",
            "--max-time",
            "0.3",
            "--heap",
            "steady",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "LD_PRELOAD": lib},
    )
    from perfsuite.storage.files import load_records

    (rec,) = load_records(out)
    assert rec.conditions["heap"] == "default" and lib in rec.conditions["heap_reason"]
    assert any("heap steady was asked for but not held" in w and lib in w for w in rec.warnings)
