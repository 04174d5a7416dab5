"""`perfsuite export csv|parquet|tensorboard RESULTS...`: stored results in the formats other
tools read. csv/parquet: the tidy table of perfsuite.storage.table (`--out FILE`)."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from perfsuite.compare.kinds import RESULTS
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.text import printable
from perfsuite.storage import table as results
from perfsuite.storage.write import check_output

FORMATS = ("csv", "parquet", "tensorboard")


NAME = "export"


def add_arguments(sub) -> None:
    exp = sub.add_parser(NAME, help="results as a tidy CSV/Parquet table, or TensorBoard event files")
    exp.add_argument("format", choices=("csv", "parquet", "tensorboard"))
    exp.add_argument("results", type=Path, nargs="+", help="results files or folders")
    exp.add_argument("--out", type=Path, help="csv/parquet: the file to write (must not exist)")
    exp.add_argument("--logdir", type=Path, help="tensorboard: the log directory (one run folder per case)")


def command(args, console, recorder) -> int:
    if args.format == "tensorboard":
        from perfsuite.storage.tensorboard import export_tensorboard

        if args.logdir is None:
            raise PerfsuiteError("export tensorboard needs --logdir DIR")
        if args.out is not None:
            raise PerfsuiteError("export tensorboard writes event files under --logdir DIR, not --out")
        n, problems = export_tensorboard(args.results, args.logdir, RESULTS["amp"])
        for problem in problems:
            console.print(Text(printable(f"skipped: {problem}"), style="yellow"))
        if n == 0:
            raise PerfsuiteError("no records in " + ", ".join(map(str, args.results)))
        console.print(Text(f"{n} case(s) written to {args.logdir} (tensorboard --logdir {args.logdir})"))
        return 0
    if args.out is None:
        raise PerfsuiteError(f"export {args.format} needs --out FILE")
    if args.logdir is not None:
        raise PerfsuiteError("--logdir is for export tensorboard")
    check_output(args.out, "--out")  # before reading every source: a dangling symlink, a full disk
    skipped: list[str] = []
    df = results.load(args.results, skipped=skipped)
    for problem in skipped:
        console.print(Text(printable(f"skipped: {problem}"), style="yellow"))
    if df.empty:
        raise PerfsuiteError("no records in " + ", ".join(map(str, args.results)))
    try:
        results.write(df, args.out, args.format)
    except OSError as exc:
        raise PerfsuiteError(f"--out {args.out}: cannot write ({exc.strerror or exc})") from None
    console.print(Text(f"{len(df)} case(s), {len(df.columns)} columns -> {args.out}"))
    return 0
