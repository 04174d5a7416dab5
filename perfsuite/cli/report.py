"""`perfsuite report`: Markdown and figures from stored results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from perfsuite.cli import values
from perfsuite.compare.kinds import load_result
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.text import printable
from perfsuite.report.markdown import write_report
from perfsuite.storage.files import document_failures, load_document, load_many, writable_dir

NAME = "report"


def add_arguments(sub) -> None:
    rep = sub.add_parser(NAME, help="markdown report with plots from results files")
    rep.add_argument("results", type=Path, nargs="+")
    rep.add_argument("--out-dir", type=Path, default=Path("reports") / "latest")
    rep.add_argument("--amp", type=Path, action="append", default=[], help="`perfsuite amp --out` JSON to include")
    rep.add_argument("--pair", type=Path, action="append", default=[], help="`perfsuite pair --out` JSON to include")
    rep.add_argument(
        "--variants",
        type=Path,
        action="append",
        default=[],
        help="`perfsuite variants --json` JSON to include (also *.variants.json in the folders given)",
    )
    rep.add_argument(
        "--why",
        type=Path,
        action="append",
        default=[],
        help="`perfsuite why --json` JSON to include (also found among the results given)",
    )
    rep.add_argument(
        "--latency-bound",
        type=values.positive_float("--latency-bound"),
        default=None,
        metavar="MS",
        help="qwen: the optimal batch size must keep p90 latency within this many ms",
    )


def command(args, console, recorder) -> int:
    writable_dir(args.out_dir, "--out-dir")  # checked before reading anything

    files = _document_files(args)
    # A why or variants document given among the results is a section of the report, not a results file.
    inputs = [f for f in args.results if f not in files["why"] and f not in files["variants"]]
    records, problems = load_many(inputs) if inputs else ([], [])
    not_timed = _not_timed(args.results)
    for problem in problems:
        console.print(Text(printable(f"skipped: {problem}"), style="yellow"))
    read: dict[str, list[Any]] = {kind: [] for kind in files}  # the documents' results (perfsuite.compare's classes)
    for kind, paths in files.items():
        for path in paths:
            try:
                read[kind].extend(load_result(path, kind))
            except PerfsuiteError as exc:  # like a bad results file: named, the report goes on
                console.print(Text(printable(f"skipped: {exc}"), style="yellow"))
    amp, pairs, why, variants = read["amp"], read["pair"], read["why"], read["variants"]
    if not records and why:  # differential profiles alone
        from perfsuite.report.why_section import write_page

        page = write_page(why, args.out_dir, args.results)
        console.print(f"report written to {page}", highlight=False)
        return 0
    if not records and variants:  # variant studies alone
        from perfsuite.report import variants_section

        page = variants_section.write_page(variants, args.out_dir, args.results)
        console.print(f"report written to {page}", highlight=False)
        return 0
    if not records:
        raise PerfsuiteError("no records in " + ", ".join(map(str, args.results)))
    page = write_report(
        records,
        args.out_dir,
        sources=args.results,
        amp=amp,
        pairs=pairs,
        latency_bound_ms=args.latency_bound,
        why=why,
        variants=variants,
        not_timed=not_timed,
    )
    console.print(f"report written to {page}", highlight=False)
    return 0


def _document_files(args) -> dict[str, list[Path]]:
    """The documents of each kind a report includes: named by their flags, found in the folders
    given (*.KIND.json), and why or variants documents given among the results."""
    files = {"amp": list(args.amp), "pair": list(args.pair), "why": list(args.why), "variants": list(args.variants)}
    for given in args.results:
        if given.is_dir():
            for kind in files:
                files[kind] += sorted(given.rglob(f"*.{kind}.json"))
    for kind in ("why", "variants"):
        files[kind] += [f for f in args.results if f.is_file() and _is_kind(f, kind)]
    return files


def _not_timed(given) -> list[str]:
    """What a results folder says was not timed, and why: failed correctness checks (its
    checks.json; the suite measures nothing of such a workload) and failed cases (each results
    document's `failures`). A file that cannot be read adds nothing here: the loader names it."""
    out: list[str] = []
    for folder in (g for g in given if g.is_dir()):
        checks = folder / "checks.json"
        try:
            failed = [c for c in load_document(checks, "checks") if not c.get("ok")] if checks.is_file() else []
        except PerfsuiteError:
            failed = []
        out += [f"{c['workload']}: not timed, its check failed: {c['name']}: {c['detail']}" for c in failed]
        for path in sorted(folder.glob("*.json")):
            if path.name == "checks.json":
                continue
            try:
                failures = document_failures(path)
            except PerfsuiteError:
                continue
            out += [f"{f['workload']} {f.get('params') or {}}: failed: {f.get('error', '')}" for f in failures]
    return out


def _is_kind(path, kind: str) -> bool:
    """Whether a file is a document of `kind` (`perfsuite why`, `perfsuite variants`), by its format
    field; anything else is left to the results loader, which names what is wrong with it."""
    import json

    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("format") == f"perfsuite.{kind}"
