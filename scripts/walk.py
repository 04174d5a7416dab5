"""The walk of one `perfsuite run noop` through perfsuite's modules, from the command line to the
first timed call of the step, traced after a first run has imported everything.

    python scripts/walk.py [--path]

Prints the rooms (perfsuite modules entered), the climbs back (a call from a package into one on
a higher layer of docs/layout.md: the road going back up), the returns (entering a module already
left) and the entries into storage/ and store/ on the way. `--path` lists the modules in order.
"""
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from structure import layers_from, package_of  # noqa: E402

from perfsuite.cli import app  # noqa: E402
import perfsuite.workloads.noop as noop  # noqa: E402

seq: list[str] = []


class Reached(Exception):
    pass


def tracer(frame, event, arg):
    if event == "call":
        if frame.f_code is noop._noop.__code__:
            raise Reached
        mod = frame.f_globals.get("__name__", "")
        if mod.startswith("perfsuite") and (not seq or seq[-1] != mod):
            seq.append(mod)
    return None


def main(show_path: bool = False) -> None:
    d = tempfile.mkdtemp()
    argv = ["run", "noop", "--max-time", "0.3", "--device", "cpu", "--processes", "1"]
    app.main(argv + ["--out", f"{d}/warm.json"])  # imports and first-call caches done
    sys.settrace(tracer)
    try:
        app.main(argv + ["--out", f"{d}/r.json"])
    except Reached:
        pass
    finally:
        sys.settrace(None)
    layers = layers_from(ROOT / "docs" / "layout.md")
    rank = {p: len(layers) - i for i, layer in enumerate(layers) for p in layer}
    left, returns, climbs, prev = set(), 0, 0, None
    for m in seq:
        if m in left:
            returns += 1
        if prev is not None and rank.get(package_of(m), 0) > rank.get(package_of(prev), 0):
            climbs += 1
        if prev is not None and prev != m:
            left.add(prev)
        prev = m
    storage = sum(1 for a, b in zip([None] + seq, seq) if package_of(b) in ("storage", "store")
                  and (a is None or package_of(a) not in ("storage", "store")))
    print(f"rooms {len(set(seq))}, climbs back {climbs}, returns {returns}, storage entered {storage} times "
          f"(command line -> first timed call of the step)")
    if show_path:
        print(" -> ".join(m.removeprefix("perfsuite.") for m in seq))


if __name__ == "__main__":
    main("--path" in sys.argv[1:])
