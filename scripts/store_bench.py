"""What the results store costs: a write per case on the run road, the bytes per record, and
queries over a store of N records (default 100,000: a month of a team's nightly suites), on
SQLite and on a PostgreSQL server started for the purpose (tests/pgserver.py) or given by --url.

    .venv/bin/python scripts/store_bench.py --backend sqlite --out reports/store/sqlite.json
    .venv/bin/python scripts/store_bench.py --backend postgresql --out reports/store/postgresql.json

The store is filled with copies of real records (reports/**, the repository's own runs) under
new ids, times, machines, commits and parameters; every query is timed 7 times, median reported.
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from perfsuite.database import schema  # noqa: E402
from perfsuite.database.location import resolve  # noqa: E402
from perfsuite.database.machine import Machine  # noqa: E402
from perfsuite.database.recorder import Recorder  # noqa: E402
from perfsuite.database.store import Store, canonical, new_run  # noqa: E402


def templates():
    from perfsuite.storage.files import load_many

    recs, _ = load_many(sorted(glob.glob(str(ROOT / "reports" / "**" / "*.json"), recursive=True)))
    return [r for r in recs if r.processes is None][:50] or recs[:50]


def timed(fn, repeats=7):
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        value = fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out), min(out), max(out), value


def fill(store: Store, n: int, recs) -> dict:
    """n rows: 10 machines x 30 nights x the cases of a suite, copies of real records."""
    machines = [Machine(f"runner-{i}", f"runner-{i}", "f" * 16, {}) for i in range(10)]
    workloads = ["resnet18", "resnet34", "autoencoder", "qwen2", "swish", "dataloader", "matmul"]
    start = datetime(2026, 10, 28, tzinfo=timezone.utc)
    per_night = max(1, n // (len(machines) * 30))
    templ = [dict(r.to_dict()) for r in recs]
    t0 = time.perf_counter()
    written = 0
    for night in range(30):
        commit = uuid.uuid5(uuid.NAMESPACE_OID, str(night)).hex + "00000000"
        for m in machines:
            run = new_run("suite", m, commit=commit)
            run["started"] = (start + timedelta(days=night)).isoformat()
            store.begin_run(run, m)
            rows = []
            for i in range(per_night):
                if written >= n:
                    break
                doc = dict(templ[(written + i) % len(templ)])
                doc["id"] = uuid.uuid4().hex
                doc["created"] = (start + timedelta(days=night, seconds=i)).isoformat()
                doc["workload"] = workloads[i % len(workloads)]
                doc["params"] = {
                    "batch_size": [8, 16, 32, 64, 128][i % 5],
                    "precision": ["fp32", "bf16"][i // 5 % 2],
                    "size": i // 10,
                }
                body = canonical(doc)
                rows.append(
                    {
                        "id": doc["id"],
                        "digest": uuid.uuid4().hex + uuid.uuid4().hex,
                        "run_id": run["id"],
                        "machine_id": m.id,
                        "workload": doc["workload"],
                        "params": canonical(doc["params"]),
                        "device": "cuda",
                        "commit": commit,
                        "dirty": False,
                        "created": doc["created"],
                        "median_s": 0.01 + i * 1e-6,
                        "doc": body,
                    }
                )
                written += 1
            with store._write() as conn:
                for k in range(0, len(rows), 500):
                    conn.execute(schema.records.insert(), rows[k : k + 500])
    return {
        "records": written,
        "fill_s": time.perf_counter() - t0,
        "machines": 10,
        "nights": 30,
        "commits": [uuid.uuid5(uuid.NAMESPACE_OID, str(k)).hex + "00000000" for k in range(30)],
    }


def size_of(store: Store, loc) -> float | None:
    import sqlalchemy as sa

    with store.engine.connect() as conn:
        if loc.is_server:
            return conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar()
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL's pages into the file, then counted
    return sum(p.stat().st_size for p in loc.path.parent.glob(loc.path.name + "*"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--url", help="a PostgreSQL URL to use instead of a server started here")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    server = None
    tmp = Path(tempfile.mkdtemp(prefix="store-bench-"))
    if args.backend == "sqlite":
        url = str(tmp / "results.db")
    elif args.url:
        url = args.url
    else:
        import pgserver

        server = pgserver.Server().start()
        url = server.url()
    try:
        loc = resolve(url)
        recs = templates()
        out = {"backend": args.backend, "date": datetime.now(timezone.utc).isoformat(), "template_records": len(recs)}

        # 1. The run road's write: one record per transaction, through the recorder, as `perfsuite run` does.
        rec = Recorder(loc, "run", {"bench": True}, machine=Machine("bench", "bench", "f" * 16, {}), cwd=tmp)
        per = []
        for r in recs[:40]:
            r.to_dict()  # derived numbers computed once, as the record's own writer does before the store
            t = time.perf_counter()
            rec.add_record(r)
            per.append(time.perf_counter() - t)
        rec.finish()
        out["write_per_record_s"] = {
            "median": statistics.median(per[1:]),
            "max": max(per[1:]),
            "first": per[0],
            "n": len(per) - 1,
        }
        store = Store(loc)
        before = size_of(store, loc)
        info = fill(store, args.records, recs)
        out["fill"] = {k: v for k, v in info.items() if k != "commits"}
        after = size_of(store, loc)
        out["bytes_per_record"] = (after - before) / info["records"] if after and before is not None else None
        sizes = [len(canonical(r.to_dict())) for r in recs]
        out["doc_bytes"] = {"median": statistics.median(sizes), "mean": statistics.mean(sizes), "max": max(sizes)}

        month = "2026-10-28"
        q = {
            "one case, one machine, a month (rows)": lambda: store.rows(
                workload="resnet18", machine="runner-3", since=month, params={"batch_size": 128, "precision": "bf16"}
            ),
            "one case, one machine, a month (records decoded)": lambda: store.records(
                workload="resnet18", machine="runner-3", since=month, params={"batch_size": 128, "precision": "bf16"}
            ),
            "one workload, all machines, a month (rows)": lambda: store.rows(workload="resnet18", since=month),
            "one machine, 10 commits (rows)": lambda: store.rows(machine="runner-7", commits=info["commits"][10:20]),
            "every run of a machine": lambda: store.runs(machine="runner-1"),
            "counts": store.counts,
        }
        out["queries"] = {}
        for name, fn in q.items():
            med, lo, hi, value = timed(fn)
            out["queries"][name] = {
                "median_s": med,
                "min_s": lo,
                "max_s": hi,
                "rows": len(value) if isinstance(value, list) else value,
            }
        store.close()
        text = json.dumps(out, indent=1, default=str)
        print(text)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
    finally:
        if server is not None:
            server.stop()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
