"""`perfsuite gate`: the interleaved regression gate against a base revision."""

from __future__ import annotations

from rich.text import Text

from perfsuite.compare.gate import gate_revisions
from perfsuite.core.errors import PerfsuiteError
from perfsuite.measure import heap


def gate_command(args, console) -> int:
    """`perfsuite gate`: the self-check (--slowdown), learning noise floors, or the gate itself."""
    from perfsuite.core import registry
    from perfsuite.core.config import resolve_device
    from perfsuite.measure.system import pinned

    if args.threshold < 0:
        raise PerfsuiteError(f"--threshold must be >= 0, got {args.threshold}")
    if args.builds < 1:
        raise PerfsuiteError(f"--builds must be >= 1, got {args.builds}")
    if args.json is not None and args.json.exists():
        raise PerfsuiteError(f"--json {args.json}: file exists; refusing to overwrite")
    new = registry.get(args.workload)
    device = resolve_device(args.device)
    threads = args.threads  # None: torch's own (see the module's docstring for when 1 helps)
    held = heap.apply(args.heap)  # process-wide; this process only gates
    if args.heap == "steady" and held["heap"] != "steady":
        console.print(Text(f"--heap steady: not held ({held['reason']}); page faults stay in the pairs",
                           style="yellow"))
    with pinned(None, threads):
        return gate_revisions(args, console, new, device, threads)
