"""The walk of one `perfsuite run noop` through perfsuite's modules, from the command line to the
first timed call of the step, traced after a first run has imported everything.

    python scripts/walk.py [--path]

Prints the rooms (perfsuite modules entered), the hops (calls from one perfsuite module into
another), the climbs back (hops from a package into one on a higher layer of docs/layout.md: a
callback, the road going back up) and the hops into storage/ and database/ from outside them.
`--path` lists the climbs and the storage hops.
"""

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from structure import layers_from, package_of  # noqa: E402

import perfsuite.workloads.noop as noop  # noqa: E402
from perfsuite.cli import app  # noqa: E402

hops: list[tuple[str, str]] = []


class Reached(Exception):
    pass


def tracer(frame, event, arg):
    if event == "call":
        if frame.f_code is noop._noop.__code__:
            raise Reached
        mod = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back is not None else ""
        if mod.startswith("perfsuite") and caller.startswith("perfsuite") and mod != caller:
            hops.append((caller, mod))
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
    rooms = {m for hop in hops for m in hop}
    climbs = [(a, b) for a, b in hops if rank.get(package_of(b), 0) > rank.get(package_of(a), 0)]
    files = ("storage", "store", "database")  # the database was perfsuite.store before issue 52
    stored = [(a, b) for a, b in hops if package_of(b) in files and package_of(a) not in files]
    print(
        f"rooms {len(rooms)}, hops {len(hops)}, climbs back {len(climbs)}, into storage {len(stored)} "
        f"(command line -> first timed call of the step)"
    )
    # Assembling the parser visits every command module once (each declares its own arguments, as
    # asv's commands do): the road itself is the rest.
    road = [(a, b) for a, b in hops if a != "perfsuite.cli.parser" and b != "perfsuite.cli.options"]
    print(f"without the parser's assembly: rooms {len({m for hop in road for m in hop})}, hops {len(road)}")
    if show_path:
        for a, b in climbs:
            print(f"  climb  {a.removeprefix('perfsuite.')} -> {b.removeprefix('perfsuite.')}")
        for a, b in stored:
            print(f"  store  {a.removeprefix('perfsuite.')} -> {b.removeprefix('perfsuite.')}")


if __name__ == "__main__":
    main("--path" in sys.argv[1:])
