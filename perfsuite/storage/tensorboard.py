"""TensorBoard event files from stored results (`perfsuite export tensorboard`, `run --tensorboard`).

One TensorBoard run per case, `LOGDIR/<workload>/<device>/<k=v,...>`, holding one point per
stored record of that case: the step is the record's creation time in Unix seconds (so runs on
successive commits line up left to right, and TensorBoard's "wall" axis reads the same), with
the scalars

    latency/median_s, latency/p90_s, latency/p99_s, latency/ci_low_s, latency/ci_high_s
    throughput/<unit>            e.g. throughput/images_per_s
    flops_per_s, peak_fraction   when the step's FLOPs (and a measured peak) are known
    memory/host_peak_rss_bytes, memory/cuda_max_allocated_bytes   when measured

a text entry `record` (commit, dirty tree, created, converged, warnings) at the same step, and
the case's parameters as hparams (the HParams tab compares cases by parameter).

`perfsuite amp --out X.amp.json` files give `LOGDIR/amp/<workload>/<params>/<precision>` runs
with the loss curve of the accuracy check (`loss`, one point per training step) and the
comparison's `amp/speedup`, `amp/saved_memory_ratio` and `amp/final_loss_rel_diff`.

Each record is written to its own event file, named after the record's id: exporting the same
results again adds nothing, and exporting later runs into the same folder extends the curves.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite.core import documents
from perfsuite.core.errors import ConfigError, RecordError, StorageError
from perfsuite.core.record import Record
from perfsuite.core.text import slug
from perfsuite.storage import write
from perfsuite.storage.files import load_document, load_records, writable_dir
from perfsuite.storage.table import result_files

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


def _writer_class() -> type[SummaryWriter]:
    try:
        import tensorboard  # noqa: F401  (torch's writer needs the package)
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ConfigError("TensorBoard export needs the tensorboard package: pip install 'perfsuite[report]'") from None
    return SummaryWriter


def _slug(text: str) -> str:
    return slug(text, 120)


def case_run(workload: str, params: Mapping[str, Any], device: str) -> str:
    """The TensorBoard run (a path under the log directory) of one case."""
    ps = ",".join(f"{k}={v}" for k, v in params.items()) or "default"
    return f"{_slug(workload)}/{_slug(device)}/{_slug(ps)}"


def _epoch(created: str) -> float:
    try:
        return datetime.fromisoformat(created).timestamp()
    except (TypeError, ValueError):
        return 0.0


def _hparam(v: Any) -> bool | int | float | str:
    return v if isinstance(v, (bool, int, float, str)) else str(v)


def scalars(r: Record) -> dict[str, float]:
    s = r.stats
    out = {
        "latency/median_s": s.median,
        "latency/p90_s": s.p90,
        "latency/p99_s": s.p99,
        f"throughput/{_slug(r.work.item_unit)}_per_s": r.throughput,
    }
    if s.ci_low is not None and s.ci_high is not None:  # (set together)
        out.update({"latency/ci_low_s": s.ci_low, "latency/ci_high_s": s.ci_high})
    if r.flops_per_s is not None:
        out["flops_per_s"] = r.flops_per_s
    if r.peak_fraction is not None:
        out["peak_fraction"] = r.peak_fraction
    for key in ("host_peak_rss_bytes", "cuda_max_allocated_bytes"):
        if isinstance(r.memory.get(key), (int, float)):
            out[f"memory/{key}"] = float(r.memory[key])
    return out


def _done(run_dir: Path, key: str) -> bool:
    return run_dir.is_dir() and any(p.name.endswith(f".{key}") for p in run_dir.iterdir())


def write_record(logdir: Path, r: Record) -> bool:
    """One record's point in its case's run; False when an earlier export already wrote it."""
    from torch.utils.tensorboard.summary import hparams

    SummaryWriter = _writer_class()
    # The run's folder is named from data: contained, so a planted symlink there cannot lead the
    # event file out of the log directory.
    run_dir = write.inside(logdir, case_run(r.workload, r.params, r.device))
    if _done(run_dir, slug(r.id)):
        return False
    step, wall = int(_epoch(r.created)), _epoch(r.created)
    values = scalars(r)
    # The id is data: slugged, so an id of `../x` cannot put the event file elsewhere.
    with SummaryWriter(log_dir=str(run_dir), filename_suffix=f".{slug(r.id)}") as w:
        for tag, v in values.items():
            w.add_scalar(tag, v, global_step=step, walltime=wall)
        commit = r.env.get("git_commit")
        w.add_text(
            "record",
            (
                f"commit `{commit or 'unknown'}`{' (dirty)' if r.env.get('git_dirty') else ''}, "
                f"created {r.created}, id `{r.id}`, converged {r.converged}, "
                f"{len(r.samples_s)} samples x {r.block_size}" + "".join(f"\n\n- {x}" for x in r.warnings)
            ),
            global_step=step,
            walltime=wall,
        )
        hp = {"workload": r.workload, "device": r.device, **{k: _hparam(v) for k, v in r.params.items()}}
        for summ in hparams(hp, values):  # type: ignore[no-untyped-call]  # torch leaves it unannotated
            w.file_writer.add_summary(summ, step, wall)
    return True


def write_amp(logdir: Path, amp: Any) -> int:  # a perfsuite.compare.amp.AmpComparison (above storage)
    """The AMP comparison's loss curves (when it kept them) and headline numbers, computed from its
    pairs and losses (perfsuite.compare.amp.AmpComparison, as load_document reads it)."""
    SummaryWriter = _writer_class()
    key = hashlib.sha1(json.dumps(documents.finite(amp.to_dict()), sort_keys=True).encode()).hexdigest()[:16]
    written = 0
    for side in ("a", "b"):
        run_dir = write.inside(
            logdir, "amp", case_run(amp.workload, amp.params, amp.device), _slug(str(getattr(amp, f"precision_{side}")))
        )
        if _done(run_dir, key):
            continue
        with SummaryWriter(log_dir=str(run_dir), filename_suffix=f".{key}") as w:
            for i, loss in enumerate(getattr(amp, f"losses_{side}")):
                w.add_scalar("loss", loss, global_step=i)
            if side == "b":  # B relative to A: one value per comparison, on B's run
                for tag, v in (
                    ("amp/speedup", amp.speedup),
                    ("amp/saved_memory_ratio", amp.memory_ratio),
                    ("amp/final_loss_rel_diff", amp.loss_rel_diff),
                ):
                    if math.isfinite(v):
                        w.add_scalar(tag, v, global_step=0)
            w.add_scalar("final_loss", getattr(amp, f"final_loss_{side}"), global_step=0)
        written += 1
    return written


def prepare(logdir: Path) -> Path:
    """Before measuring: the writer can be imported and the folder written to."""
    _writer_class()
    return writable_dir(Path(logdir), "TensorBoard log directory")


def export_tensorboard(paths: Iterable[str | os.PathLike[str]], logdir: Path, amp_result: Any) -> tuple[int, list[str]]:
    """Write every record (and every *.amp.json, read into `amp_result`: perfsuite.compare.amp's
    AmpComparison, which the caller passes) under `paths` to `logdir`; returns the number of records
    and AMP comparisons read and the files that could not be read."""
    prepare(logdir)
    paths = list(paths)
    problems: list[str] = []
    n = 0
    amp_files = [
        f
        for p in map(Path, paths)
        for f in (sorted(p.rglob("*.amp.json")) if p.is_dir() else ([p] if p.name.endswith(".amp.json") else []))
    ]
    for f in result_files(p for p in paths if not str(p).endswith(".amp.json")):
        try:
            records = load_records(f)
        except RecordError as exc:
            problems.append(str(exc))
            continue
        with _writing(logdir):
            for r in records:
                write_record(logdir, r)
                n += 1
    for f in amp_files:
        try:
            docs = load_document(f, "amp", amp_result)
        except RecordError as exc:
            problems.append(str(exc))
            continue
        with _writing(logdir):
            for d in docs:
                write_amp(logdir, d)
                n += 1
    return n, problems


@contextlib.contextmanager
def _writing(logdir: Path) -> Iterator[None]:
    """TensorBoard's writer opens its own files: a full disk or a read-only folder under it is a
    StorageError naming the folder, not a traceback."""
    try:
        yield
    except OSError as exc:
        raise StorageError(f"cannot write TensorBoard events under {logdir}: {exc.strerror or exc}") from None


def export_records(records: Iterable[Record], logdir: Path) -> int:
    """The records of a run that just finished (`perfsuite run --tensorboard DIR`); how many."""
    prepare(logdir)
    records = list(records)
    with _writing(logdir):
        for r in records:
            write_record(logdir, r)
    return len(records)
