"""Whether this host lets glibc's heap be held (perfsuite.measuring.heap), asked once in a fresh process."""

import functools
import json
import subprocess
import sys

import pytest


@functools.lru_cache(maxsize=1)
def fresh_hold() -> dict:
    """hold() in a fresh process that has imported torch, as a measuring process has: whether this
    host lets the heap be held at all (a preloaded jemalloc/tcmalloc or GLIBC_TUNABLES can refuse;
    on the H100 machine of 2026-11-25 it was refused) and why not."""
    code = "import json, torch; from perfsuite.measuring import heap; print(json.dumps(heap.hold()))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def require_a_holdable_heap() -> None:
    """Skip, with the host's reason, where glibc's heap cannot be held: the tests that need it
    measure what holding does, which such a host cannot show. The reason is hold()'s own."""
    held = fresh_hold()
    if held["heap"] != "steady":
        pytest.skip(f"the heap cannot be held on this host: {held.get('reason')}")
