"""Stored records as one tidy pandas table: one row per case, one column per fact.

    import perfsuite.storage.table
    df = perfsuite.storage.table.load(["results/"])          # files and folders, as `perfsuite report` takes
    df.groupby(["workload", "precision"])["median_s"].min()

Columns, in this order: `workload`, every parameter of every record (by its own name; a
parameter of one workload is empty for another's rows), `device`, then the derived numbers
(recomputed from the raw samples, never read from the stored `derived` block): `median_s`,
`ci_low_s`/`ci_high_s` (the median's 95% interval), `iqr_s`, `p90_s`, `p99_s` (over per-call
times where the workload kept them, as qwen does; else over the samples), `n_samples`,
`block_size`, `throughput` and `throughput_unit`, `flops_per_s`, `peak_fraction` and `peak_roof`,
memory (`host_peak_rss_bytes`, `host_peak_delta_bytes`, `cuda_max_allocated_bytes`,
`cuda_max_reserved_bytes`), `gpu_util_pct` and `bound` (NVML, CUDA only), `converged`,
`warnings` (how many), `commit`, `dirty`, `created` (a UTC timestamp), `id` and `source` (the file).
A parameter whose name clashes with one of these columns is given as `param.NAME`.

`perfsuite export csv|parquet RESULTS... --out FILE` writes the same table.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite.core.errors import RecordError
from perfsuite.core.record import Record
from perfsuite.database import select
from perfsuite.storage import write as writer
from perfsuite.storage.files import load_records, results_in

if TYPE_CHECKING:
    import pandas as pd

# The fixed columns after the parameters, in order.
FIXED = (
    "device",
    "median_s",
    "ci_low_s",
    "ci_high_s",
    "iqr_s",
    "p90_s",
    "p99_s",
    "n_samples",
    "block_size",
    "throughput",
    "throughput_unit",
    "flops_per_s",
    "peak_fraction",
    "peak_roof",
    "host_peak_rss_bytes",
    "host_peak_delta_bytes",
    "cuda_max_allocated_bytes",
    "cuda_max_reserved_bytes",
    "gpu_util_pct",
    "bound",
    "converged",
    "warnings",
    "commit",
    "dirty",
    "created",
    "id",
    "source",
)
RESERVED = frozenset(("workload",) + FIXED)


def param_column(name: str) -> str:
    """The column a parameter is stored in: its own name unless a fixed column has it."""
    return f"param.{name}" if name in RESERVED else name


def row(r: Record, source: str | None = None) -> dict[str, Any]:
    """One record's tidy row (parameters under their column names, then FIXED)."""
    s, mem = r.stats, r.memory
    bound = r.bound
    p90, p99 = s.p90, s.p99
    per_call = r.extra.get("batch_latencies_s")
    if per_call:  # per-call times kept by the workload (qwen): honest tails even with blocks of many calls
        from perfsuite.measuring.percall import timed_tail
        from perfsuite.stats import summary as stats

        tail = timed_tail(per_call, s.n, r.block_size)
        p90, p99 = stats.percentile(tail, 90), stats.percentile(tail, 99)
    out: dict[str, Any] = {"workload": r.workload}
    out.update({param_column(k): v for k, v in r.params.items()})
    out.update(
        {
            "device": r.device,
            "median_s": s.median,
            "ci_low_s": s.ci_low,
            "ci_high_s": s.ci_high,
            "iqr_s": s.iqr,
            "p90_s": p90,
            "p99_s": p99,
            "n_samples": s.n,
            "block_size": r.block_size,
            "throughput": r.throughput,
            "throughput_unit": r.throughput_unit,
            "flops_per_s": r.flops_per_s,
            "peak_fraction": r.peak_fraction,
            "peak_roof": (r.peak or {}).get("roof"),
            "host_peak_rss_bytes": mem.get("host_peak_rss_bytes"),
            "host_peak_delta_bytes": mem.get("host_peak_delta_bytes"),
            "cuda_max_allocated_bytes": mem.get("cuda_max_allocated_bytes"),
            "cuda_max_reserved_bytes": mem.get("cuda_max_reserved_bytes"),
            "gpu_util_pct": bound.gpu_util_pct,
            "bound": bound.verdict,
            "converged": r.converged,
            "warnings": len(r.warnings),
            "commit": r.env.get("git_commit"),
            "dirty": r.env.get("git_dirty"),
            "created": r.created,
            "id": r.id,
            "source": source,
        }
    )
    return out


def frame(records: Iterable[Record], sources: Iterable[str | None] | None = None) -> pd.DataFrame:
    """The tidy table of records already in memory (see the module's docstring for the columns)."""
    import pandas as pd

    records = list(records)
    srcs = list(sources) if sources is not None else [None] * len(records)
    rows = [row(r, s) for r, s in zip(records, srcs)]
    params: list[str] = []
    for r in records:
        for k in r.params:
            col = param_column(k)
            if col not in params:
                params.append(col)
    columns = ["workload", *params, *FIXED]
    df = pd.DataFrame(rows, columns=columns)
    # Timestamps as timestamps (records written by any perfsuite carry ISO-8601 UTC); nullable
    # numbers stay floats with NaN, so that sorting and grouping behave.
    df["created"] = pd.to_datetime(df["created"], utc=True, format="ISO8601", errors="coerce")
    for col in (
        "median_s",
        "ci_low_s",
        "ci_high_s",
        "iqr_s",
        "p90_s",
        "p99_s",
        "throughput",
        "flops_per_s",
        "peak_fraction",
        "host_peak_rss_bytes",
        "host_peak_delta_bytes",
        "cuda_max_allocated_bytes",
        "cuda_max_reserved_bytes",
        "gpu_util_pct",
    ):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    df.attrs["params"] = params
    return df


def load(paths: Iterable[str | os.PathLike[str]], skipped: list[str] | None = None) -> pd.DataFrame:
    """One tidy row per case from results files and folders (every *.json inside, recursively,
    through perfsuite.storage.files.load_many: perfsuite, pytest-benchmark and asv files alike).

    A file that is not a results file raises RecordError naming it, unless `skipped` is a list:
    then its problem is appended there and the others are read. `perfsuite amp/pair --out` JSON
    and a suite's run-config.json and checks.json are not results and are passed over.
    """
    records: list[Record] = []
    sources: list[str] = []
    problems: list[str] = []
    seen: set[str] = set()
    for f in result_files(paths):
        try:
            got = load_records(f)
        except RecordError as exc:
            problems.append(str(exc))
            continue
        # One row per record: a results folder and the store (`store:`) hold the same run's records
        # (issue 50: every record came back twice); the first source named keeps it.
        fresh = [r for r in got if r.id not in seen]
        seen.update(r.id for r in fresh)
        records += fresh
        sources += [str(f)] * len(fresh)
    if problems and skipped is None:
        raise RecordError("; ".join(problems))
    if skipped is not None:
        skipped.extend(problems)
    return frame(records, sources)


def result_files(paths: Iterable[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    """The files `paths` name: files as given, folders as every results *.json inside them."""
    out: list[str | os.PathLike[str]] = []  # files, and `store:` sources as given
    for given in paths:
        if select.is_source(given):  # read by load_records; never a path (it may be any length)
            out.append(given)
            continue
        p = Path(given)
        out += results_in(p) if p.is_dir() else [p]
    return out


def write(df: pd.DataFrame, out: Path, fmt: str | None = None) -> Path:
    """Write the table as CSV or Parquet (by `fmt`, else by the suffix of `out`) to a new file
    (perfsuite.storage.write: never over an existing file or through a symlink)."""
    out = Path(out)
    fmt = fmt or out.suffix.lstrip(".").lower()
    if fmt == "csv":
        writer.save_csv(df, out, new=True)
    elif fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise RecordError("parquet needs pyarrow: pip install 'perfsuite[report]'") from None
        import io

        buf = io.BytesIO()
        _parquet_safe(df).to_parquet(buf, index=False)
        writer.write_new_bytes(out, buf.getvalue())
    else:
        raise RecordError(f"{out}: unknown table format {fmt!r}; csv or parquet")
    return out


def _parquet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Parquet columns have one type: a parameter column holding, say, ints for one workload and
    strings for another is written as strings (missing values stay missing)."""
    df = df.copy()
    for col in df.columns:
        if df[col].dtype == object:
            kinds = {type(v) for v in df[col] if v is not None and v == v}
            if len(kinds) > 1:
                df[col] = [None if v is None or v != v else str(v) for v in df[col]]
    return df
