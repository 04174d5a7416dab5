"""`perfsuite report`: Markdown and figures from stored results."""

from __future__ import annotations

from rich.text import Text

from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.text import printable


def cmd_report(args, console) -> int:
    from perfsuite.report.markdown import write_report
    from perfsuite.storage.files import load_document, load_many, writable_dir

    writable_dir(args.out_dir, "--out-dir")  # checked before reading anything

    for given in args.results:
        if given.is_dir():
            args.amp += sorted(given.rglob("*.amp.json"))
            args.pair += sorted(given.rglob("*.pair.json"))
    records, problems = load_many(args.results)
    for problem in problems:
        console.print(Text(printable(f"skipped: {problem}"), style="yellow"))
    if not records:
        raise PerfsuiteError("no records in " + ", ".join(map(str, args.results)))
    amp, pairs = [], []
    for kind, paths, into in (("amp", args.amp, amp), ("pair", args.pair, pairs)):
        for path in paths:
            try:
                into.extend(load_document(path, kind))
            except PerfsuiteError as exc:  # like a bad results file: named, the report goes on
                console.print(Text(printable(f"skipped: {exc}"), style="yellow"))
    page = write_report(records, args.out_dir, sources=args.results, amp=amp, pairs=pairs,
                        latency_bound_ms=args.latency_bound)
    console.print(f"report written to {page}", highlight=False)
    return 0
