"""`perfsuite store`: import, push, info, runs, query (the store's part in every measuring
command is perfsuite.cli.stored)."""

from __future__ import annotations

import json

from rich.table import Table
from rich.text import Text

from perfsuite.cli import options, values
from perfsuite.cli.console import make_console
from perfsuite.cli.stored import RUN_KINDS
from perfsuite.compare.kinds import RESULTS
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.text import printable
from perfsuite.core.units import fmt_seconds
from perfsuite.database import select
from perfsuite.database.machine import machine_id

NAME = "store"


def _location(args):
    """The store a `perfsuite store` action uses; a password in a config file others can read is
    warned about here too, as before every measuring command."""
    from perfsuite.database.location import resolve

    err = make_console(stderr=True)
    return resolve(
        getattr(args, "store", None), warn=lambda t: err.print(Text("warning: " + printable(t), style="yellow"))
    )


def command(args, console, recorder) -> int:
    return {"import": _import, "push": _push, "info": _info, "runs": _runs, "query": _query}[args.store_command](
        args, console
    )


def _import(args, console) -> int:
    """Every path given, each imported on its own: a named file that is refused (unreadable, a record
    invalid) is bad input, exit 2, after the others are imported; a refused file found in a folder
    is skipped, named (a folder holds other files too)."""
    from pathlib import Path

    from perfsuite.database.store import Store
    from perfsuite.storage.store_import import ImportReport, import_paths

    total, refused = ImportReport(), []
    with Store(_location(args)) as store:
        for path in args.paths:
            report = import_paths(store, [path], RESULTS)
            named = not Path(path).is_dir()
            for line in report.problems:
                console.print(Text(printable(f"{'refused' if named else 'skipped'}: {line}"), style="yellow"))
            refused += report.problems if named else []
            total.add(report)
    kept = (
        f"; {store.id_clashes} of them under an id already stored for another measurement" if store.id_clashes else ""
    )
    console.print(
        Text(
            f"imported {total.records} new record(s) and {total.documents} document(s) from "
            f"{total.files} file(s) into {store.location.shown} ({total.already} already there{kept})"
        )
    )
    return 2 if refused or (total.problems and not total.files) else 0  # a named file refused: bad input


def _push(args, console) -> int:
    from perfsuite.database.recorder import push

    location = _location(args)
    if location.spool == location.path:
        raise PerfsuiteError(
            f"the store is the spool itself ({location.shown}); name the store to push to with "
            "--store or PERFSUITE_STORE"
        )
    runs, records, documents, problems = push(location)
    for line in problems:
        console.print(Text(printable(f"kept in the spool: {line}"), style="yellow"))
    console.print(
        Text(
            f"pushed {runs} run(s): {records} new record(s), {documents} document(s) to {location.shown}"
            if runs
            else f"nothing pushed ({location.spool} holds no run the store took)"
        )
    )
    return 3 if problems else 0


def _info(args, console) -> int:
    from perfsuite.database.engine import HEAD
    from perfsuite.database.store import Store

    with Store(_location(args), create=False) as store:
        counts, machines = store.counts(), store.machines()
    console.print(Text(f"store {store.location.shown} ({store.location.source}), schema {HEAD}"))
    console.print(Text(", ".join(f"{v} {k}" for k, v in counts.items())))
    me = machine_id()
    for m in machines:
        console.print(Text(printable(f"  machine {m['id']}  {m['name']}{'  (this machine)' if m['id'] == me else ''}")))
    spool = store.location.spool
    if spool.exists() and spool != store.location.path:
        console.print(Text(f"a spool waits in {spool}: `perfsuite store push` sends it", style="yellow"))
    return 0


def _runs(args, console) -> int:
    from perfsuite.database.store import Store

    with Store(_location(args), create=False) as store:
        # A batch's shards ran on several machines: all of them, unless one is named.
        default = None if args.batch else _this()
        runs = store.runs(
            kind=args.kind, batch=args.batch, machine=None if args.machine == "all" else args.machine or default
        )
    if args.json:
        console.print_json(json.dumps(runs, default=str))
        return 0
    t = Table("run", "kind", "state", "machine", "commit", "started", "records", "documents", "shard")
    for r in runs:
        shard = f"{r['shard']}/{r['shards']} of {r['batch']}" if r.get("shards") else ""
        t.add_row(
            *map(
                _cell,
                (
                    r["id"][:12],
                    r["kind"],
                    r["state"],
                    r["machine_id"][:16],
                    (r["commit"] or "")[:10],
                    r["started"][:19],
                    str(r["records"]),
                    str(r["documents"]),
                    shard,
                ),
            )
        )
    console.print(t)
    if args.batch and runs:
        shards = runs[0]["shards"]
        present = sorted({r["shard"] for r in runs if r.get("shard")})
        missing = [k for k in range(1, (shards or 0) + 1) if k not in present]
        console.print(
            Text(
                f"batch {args.batch[:12]}: shards {present} of {shards}"
                + (f"; missing {missing}" if missing else "; complete")
            )
        )
    return 0


def _cell(value) -> Text:
    """A table cell of stored text: shown as written (no rich markup read from it), control
    characters and escape sequences made visible (a workload's name came from a user's file)."""
    return Text(printable(value))


def _this() -> str:
    return machine_id()


def _query(args, console) -> int:
    from perfsuite.database.store import Store

    sel = {"workload": args.workload} if args.workload else {}
    for key in ("machine", "since", "until", "device", "batch"):
        if getattr(args, key, None):
            sel[key] = getattr(args, key)
    if args.range:
        sel["commit"] = args.range
    params = _params(args.param)
    with Store(_location(args), create=False) as store:
        rows = store.rows(params=params, **select.filters(sel, _this()))
    if args.json:
        console.print_json(json.dumps(rows, default=str))
        return 0
    t = Table("created", "machine", "commit", "workload", "params", "device", "median")
    for r in rows[-args.limit :]:
        t.add_row(
            *map(
                _cell,
                (
                    r["created"][:19],
                    r["machine_id"][:16],
                    (r["commit"] or "")[:10] + ("+" if r["dirty"] else ""),
                    r["workload"],
                    ",".join(f"{k}={v}" for k, v in sorted(r["params"].items())),
                    r["device"],
                    fmt_seconds(r["median_s"]),
                ),
            )
        )
    console.print(t)
    console.print(Text(f"{len(rows)} record(s)" + (f", the last {args.limit} shown" if len(rows) > args.limit else "")))
    return 0


def _params(items: list[str]) -> dict:
    """-p key=value filters, values read as JSON where they parse (8 -> 8, fp32 -> "fp32")."""
    out = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise PerfsuiteError(f"-p expects key=value, got {item!r}")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
        except RecursionError:
            raise PerfsuiteError(f"-p {key.strip()[:40]}: a value nested too deeply to be a parameter's") from None
    return out


def add_arguments(sub) -> None:
    st = sub.add_parser(NAME, help="the results store: import files, push a spool, list runs, query records")
    ss = st.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    im = ss.add_parser(
        "import", help="perfsuite, asv and pytest-benchmark results files or folders; importing twice adds nothing"
    )
    im.add_argument("paths", nargs="+", help="files or folders of results")
    ss.add_parser("push", help="send results kept in the local spool (.perfsuite/spool.db) to the store")
    ss.add_parser("info", help="where the store is, its schema, what it holds and which machines reported")
    rn = ss.add_parser("runs", help="the runs in the store (the shards of a suite run with --batch)")
    rn.add_argument("--kind", choices=RUN_KINDS, help=", ".join(RUN_KINDS))
    rn.add_argument("--batch", help="the shards of one suite run")
    rn.add_argument("--machine", help="a machine id, or all (default: this machine)")
    rn.add_argument("--json", action="store_true")
    q = ss.add_parser(
        "query", help="stored records of this machine (or --machine) by workload, parameters, commits and time"
    )
    q.add_argument("workload", nargs="?")
    options.params(q)
    q.add_argument(
        "--machine", help="a machine id, or all (default: this machine: times of different machines are not comparable)"
    )
    q.add_argument("--range", metavar="REV|A..B", help="one commit, or the first-parent commits after A up to B")
    q.add_argument("--since", help="ISO date or time, e.g. 2026-11-01")
    q.add_argument("--until", help="ISO date or time (exclusive)")
    q.add_argument("--device")
    q.add_argument("--batch")
    q.add_argument("--limit", type=values.count("--limit"), default=50, help="rows shown (default 50)")
    q.add_argument("--json", action="store_true", help="every matching row as JSON")
