"""One side of a gate, in a process of its own: `python -m perfsuite.compare.side_worker`.

Two revisions of the user's code cannot share one interpreter's module table (both import
`myproj.model`), so the gate runs each side here, in its own checkout, and drives the two in
alternation (perfsuite.compare.sides). This process builds the side's workload from the files
it is given (under registry capture: its names never clash with the registry's), holds the
heap, and answers requests on a private pipe: call a build once, or time n calls of it.

Requests and answers are JSON lines on the file descriptors given by PERFSUITE_SIDE_FDS; the
user's own prints go to stderr, never into the protocol.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import traceback
from pathlib import Path


def _answer(out, obj: dict) -> None:
    out.write(json.dumps(obj) + "\n")
    out.flush()


def build_side(files: list[str], name: str, params: dict, device: str, builds: int):
    """`builds` built steps of workload `name` declared in `files` (their project root first on sys.path)."""
    from perfsuite.core import registry
    from perfsuite.core.discover import load_file

    captured: list = []
    with registry.capturing(captured):
        for f in files:
            load_file(Path(f))
    matches = [w for w in captured if w.name == name]
    if not matches:
        raise LookupError(f"no workload named {name!r} in {', '.join(files)}")
    w = matches[0]
    w.check(params, device)
    return w, [w.build(params, device) for _ in range(builds)]


def foreign_imports(root: Path) -> list[str]:
    """The checkout's own top-level packages (in root or root/src) that this process imported from
    somewhere else: an editable or a regular install would make the base side run the working
    tree's code (or an installed copy) while claiming to be the base revision."""
    out = []
    for base in (root, root / "src"):
        if not base.is_dir():
            continue
        for pkg in base.iterdir():
            mod = sys.modules.get(pkg.name) if (pkg / "__init__.py").exists() else None
            where = getattr(mod, "__file__", None)
            if where and root.resolve() not in Path(where).resolve().parents:
                out.append(f"{pkg.name} from {where}")
    return out


def serve(inp, out, job: dict) -> int:
    from perfsuite.measure import heap
    from perfsuite.measure.system import pinned
    from perfsuite.measure.timing import clock_for

    heap.apply(job.get("heap", "default"))
    with pinned(None, job.get("threads")):
        try:
            w, built = build_side(job["files"], job["workload"], job["params"], job["device"], job["builds"])
        except Exception as exc:  # noqa: BLE001 - the side's own code: its error goes back to the gate
            _answer(out, {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
            return 1
        foreign = foreign_imports(Path(job["root"])) if job.get("root") else []
        if foreign:
            _answer(out, {"kind": "environment",  # the user's environment, not this case: bad input
                          "error": f"this side must run the code of {job['root']}, but it imported "
                                   f"{'; '.join(foreign)} (an installed copy of the project: an editable "
                                   "install or a regular one shadows the checkout; uninstall it, or gate "
                                   "from an environment without it)"})
            return 1
        steps = [b.fn for b in built]
        clock = clock_for(job["device"], "host")  # host-inclusive, as the in-process gate times
        if heap.held():  # run the builds until they stop faulting, before the parent's budget starts
            heap.settle(steps + steps[::-1], clock.now, job.get("settle_s", 10.0))
        _answer(out, {"ok": True, "work": dataclasses.asdict(built[0].work)})
        for line in inp:
            req = json.loads(line)
            op = req["op"]
            try:
                if op == "call":
                    steps[req["build"]]()
                    _answer(out, {"ok": True})
                elif op == "time":
                    before = heap.minor_faults()
                    s = clock.time_block(steps[req["build"]], req["n"])
                    _answer(out, {"s": s, "faults": heap.minor_faults() - before})
                elif op == "quit":
                    break
                else:
                    _answer(out, {"error": f"unknown request {op!r}"})
            except Exception as exc:  # noqa: BLE001 - a step that raises ends this side with its error
                _answer(out, {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
                return 1
        for b in built:
            if b.teardown is not None:
                b.teardown()
    return 0


def main() -> int:
    rfd, wfd = (int(x) for x in os.environ["PERFSUITE_SIDE_FDS"].split(","))
    inp, out = os.fdopen(rfd, "r"), os.fdopen(wfd, "w")
    os.dup2(2, 1)  # the user's prints go to stderr; the protocol has its own pipe
    job = json.loads(inp.readline())
    return serve(inp, out, job)


if __name__ == "__main__":
    sys.exit(main())
