"""One command's run in the store: opened before anything is measured, written as each result
arrives, finished when the command ends.

A store that cannot be used as it is (wrong credentials, a newer schema, a broken file) stops the
command before it measures (StoreError, exit 2). A server that does not answer, at the start or
mid-way, never costs a measurement: the write is retried, then the run goes on into the local
spool (`.perfsuite/spool.db`, a SQLite store of the same schema) and `notes` tell the user to run
`perfsuite store push`. The engine returns these notes; the command line prints them.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite.core.errors import PerfsuiteError, RecordError, StorageError
from perfsuite.core.record import Record
from perfsuite.core.state import state_folder
from perfsuite.database.engine import StoreError, StoreUnreachable, preflight
from perfsuite.database.location import Location, parse
from perfsuite.database.machine import Machine, this_machine
from perfsuite.database.store import Store, new_run
from perfsuite.measuring import fingerprint
from perfsuite.measuring.fingerprint import collect_git

if TYPE_CHECKING:
    from perfsuite.core.case import Case

# Waits between tries of a write the server did not answer (then the spool takes it).
RETRY_WAITS_S = (0.5, 2.0)
# How long one write to a server may take before the run gives up on the server: a server that
# stopped answering (frozen, a half-open connection the kernel still acknowledges) would otherwise
# hold the run for as long as it stays frozen.
SERVER_WRITE_TIMEOUT_S = 60.0


def light_env() -> dict[str, Any]:
    """What identifies this machine's times (perfsuite.measuring.fingerprint without the slow collectors)."""
    out: dict[str, Any] = {}
    for collect in (
        fingerprint.collect_python,
        fingerprint.collect_os,
        fingerprint.collect_host,
        fingerprint.collect_cpu,
        fingerprint.collect_torch,
    ):
        out.update(collect())
    return out


class Recorder:
    """A run of `kind` (run, suite, pair, amp, gate, bisect, why, asv, pytest)."""

    def __init__(
        self,
        location: Location,
        kind: str,
        config: Mapping[str, Any] | None = None,
        *,
        machine: Machine | None = None,
        cwd: Path | None = None,
        batch: str | None = None,
        shard: int | None = None,
        shards: int | None = None,
        commit: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:

        self.location, self.kind, self.sleep = location, kind, sleep
        self.machine = machine or this_machine(light_env())
        # `commit`: the commit measured, when it is not the checkout's (asv measures a commit it built)
        git: dict[str, Any] = {"git_commit": commit, "git_dirty": False} if commit else collect_git(cwd)
        self.commit = commit
        self.run = new_run(
            kind,
            self.machine,
            config=config,
            commit=git.get("git_commit"),
            dirty=git.get("git_dirty"),
            batch=batch,
            shard=shard,
            shards=shards,
        )
        self.write_timeout_s = SERVER_WRITE_TIMEOUT_S
        self.notes: list[str] = []
        self.kept_in: str | None = None  # where the last result went (perfsuite.run.execute names it)
        self.written = 0  # results in the store
        self.spooled_results = 0  # results in the spool
        self._spool_lock: int | None = None
        self.store: Store | None = None
        self.spool: Store | None = None
        self._unreachable: StoreError | None = None
        # Checked now, written at the first result: a store that cannot be used stops the command
        # before it measures (StoreError), and a command that measures nothing writes nothing.
        try:
            preflight(location)
        except StoreUnreachable as exc:
            self._unreachable = exc

    @property
    def run_id(self) -> str:
        run_id: str = self.run["id"]  # new_run's str
        return run_id

    @property
    def spooled(self) -> bool:
        return self.spool is not None

    # ---- writing ---------------------------------------------------------------------------
    def add_record(self, record: Record) -> None:
        self._write(lambda s: s.add_records(self.run_id, self.machine.id, [record], commit=self.commit))

    def add(self, result: Any, case: Case | None = None, kind: str = "results") -> None:
        """What perfsuite's case loop measured: a Record, or a result of another kind (pair, amp,
        gate) stored as its document with the parameters its case was given."""
        if isinstance(result, Record):
            self.add_record(result)
            return
        entry = result.to_dict() if hasattr(result, "to_dict") else dict(result)
        if case is not None:
            entry = {**entry, "case": dict(case.params)}
        self.add_document(kind, entry, workload=getattr(getattr(case, "workload", None), "name", None))

    def add_failure(self, failure: Mapping[str, Any], case: Case | None = None) -> None:
        """A case that failed, kept as a `failure` document (its reason and the user's traceback)."""
        self.add_document("failure", failure, workload=getattr(getattr(case, "workload", None), "name", None))

    def add_document(self, kind: str, entry: Mapping[str, Any], workload: str | None = None) -> None:
        self._write(
            lambda s: s.add_documents(
                self.run_id, self.machine.id, kind, [entry], workload=workload, commit=self.run["commit"]
            )
        )

    def set_batch(self, batch: str, shard: int, shards: int) -> None:
        """This run is shard `shard` of `shards` of the suite run `batch` (perfsuite.database.shards)."""
        self.run.update(batch=batch, shard=shard, shards=shards)
        self._write(lambda s: s.set_batch(self.run_id, batch, shard, shards), counted=False)

    def finish(self, state: str = "finished") -> None:
        """Mark the run finished (or failed, interrupted); says where its results are."""
        target = self.spool or self.store
        if target is None:  # nothing was measured: nothing is written
            return
        try:
            if target is self.store:
                self._bounded(lambda: target.finish_run(self.run_id, state))
            else:
                target.finish_run(self.run_id, state)
        except StoreError as exc:
            if target is self.store:
                self._to_spool(exc)
                if self.spool is not None:
                    self.spool.finish_run(self.run_id, state)
        if self.spooled and self.spool is not None:
            self.notes.append(
                f"{self.spooled_results} result(s) kept in {self.location.spool}: the store "
                f"{self.location.shown} could not take them; `perfsuite store push` with the same "
                "store (--store or PERFSUITE_STORE) sends them"
            )
        for st in (self.store, self.spool):  # (a store given up on a timeout is None: never waited for)
            if st is not None:
                st.close()
        if self._spool_lock is not None:
            os.close(self._spool_lock)
            self._spool_lock = None

    def _open(self) -> None:
        """The store, migrated, with this run's row: at the first result."""
        if self.store is None and self.spool is None:
            if self._unreachable is not None:
                self._to_spool(self._unreachable)
                return
            opened: list[Store] = []

            def open_and_begin() -> None:
                store = Store(self.location)
                opened.append(store)
                store.begin_run(self.run, self.machine)

            self._bounded(open_and_begin)
            self.store = opened[0]

    def _write(self, write: Callable[[Store], object], counted: bool = True) -> None:
        self.kept_in = None  # where this result went: the store, its spool, or (None) neither
        try:
            self._open()
        except StoreError as exc:
            self._to_spool(exc)
        if self.spool is None and self.store is not None:
            for wait in (*RETRY_WAITS_S, None):
                try:
                    store = self.store
                    self._bounded(lambda: write(store))  # noqa: B023 - called within this iteration
                    self.written += counted
                    self.kept_in = f"the results store ({self.location.shown})"
                    return
                except StoreUnreachable as exc:
                    if wait is None or self.store is None:  # the last try, or the server given up
                        self._to_spool(exc)
                        break
                    self.sleep(wait)
                except StoreError as exc:  # a full disk, a lock held too long: keep it locally too
                    self._to_spool(exc)
                    break
        if self.spool is not None:
            try:
                write(self.spool)
                self.spooled_results += counted
                self.kept_in = f"the spool of the results store ({self.spool.location.shown})"
            except StoreError as exc:
                self.notes.append(
                    f"could not store a result in the spool either ({exc}); it is in the JSON "
                    "output only, `perfsuite store import` reads it later"
                )

    def _bounded(self, call: Callable[[], object]) -> None:
        """`call()` (a write to the store), given at most SERVER_WRITE_TIMEOUT_S on a server; past
        that the server is given up for this run (the stuck call is left in a daemon thread)."""
        if not self.location.is_server:
            call()
            return
        import threading

        outcome: list[BaseException | None] = []

        def attempt() -> None:
            try:
                call()
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - handed back to the run's thread below
                outcome.append(exc)

        worker = threading.Thread(target=attempt, name="perfsuite-store-write", daemon=True)
        worker.start()
        worker.join(self.write_timeout_s)
        if worker.is_alive():
            self.store = None  # never touched again by this run: its connection is stuck
            raise StoreUnreachable(
                f"store {self.location.shown}: the server did not answer a write within {self.write_timeout_s:g} s"
            )
        if outcome and outcome[0] is not None:
            raise outcome[0]

    def _to_spool(self, why: StoreError) -> None:
        if self.spool is not None:
            return
        if self.location.spool == self.location.path:
            self.notes.append(f"{why}; the store is the spool itself: results are in the JSON output only")
            return
        self.notes.append(f"{why}; results go to the local spool {self.location.spool}")
        try:
            self._spool_lock = _lock(self.location.spool, shared=True)  # `store push` waits for this run
            self.spool = Store(parse(str(self.location.spool), "spool", self.location.home))
            self.spool.begin_run({**self.run}, self.machine)
        except StoreError as exc:
            self.spool = None
            self.notes.append(f"the spool cannot be used either ({exc}); results are in the JSON output only")


def for_frontend(
    kind: str,
    config: Mapping[str, Any],
    commit: str | None = None,
    warn: Callable[[str], object] | None = None,
    home: Path | None = None,
) -> Recorder | None:
    """A recorder for asv's or pytest's runs: the store the project names (PERFSUITE_STORE, or
    [tool.perfsuite] store, or the default). A store that cannot be used is said through `warn`
    and skipped: those front-ends keep their own results, and a measurement is never refused.
    `home`: the project folder the store is found from (asv runs benchmarks in a temporary one)."""
    from perfsuite.database.location import resolve

    try:
        return Recorder(resolve(cwd=home, warn=warn), kind, config, commit=commit, cwd=home)
    except PerfsuiteError as exc:  # a bad PERFSUITE_STORE or PERFSUITE_MACHINE as well
        if warn is not None:
            warn(f"results not stored: {exc}")
        return None


def _lock(spool: Path, shared: bool) -> int:
    """An flock beside the spool: shared while a command writes to it, exclusive while `store push`
    empties it. The kernel drops it when its process ends, however it ends."""
    path = spool.with_name(spool.name + ".lock")
    try:
        state_folder(spool.parent)
        spool.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except StorageError as exc:
        raise StoreError(f"spool {spool}: {exc}") from None
    except OSError as exc:
        raise StoreError(f"spool {spool}: cannot create its lock ({exc.strerror})") from None
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(f"spool {spool}: a perfsuite command is still writing to it; push when it has ended") from None
    return fd


def push(location: Location) -> tuple[int, int, int, list[str]]:
    """Send the spool's runs to the store at `location`; returns (runs, new records, new documents,
    problems). Each run is read, its records validated as `store import` validates a file's, copied
    in one transaction, and leaves the spool only after the store has it; a run the store refuses,
    or whose rows are not valid records, stays in the spool, named, and the others go on. A run
    left `running` by a command that was killed arrives as `interrupted`. A spool that cannot be
    read (damaged) stops the push: StoreError saying what was pushed and what stays."""
    spool_path = location.spool
    if not spool_path.exists() and not spool_path.is_symlink():  # (a dangling link is refused, named)
        return 0, 0, 0, []
    lock = _lock(spool_path, shared=False)
    runs = n_recs = n_docs = 0
    problems: list[str] = []

    def damaged(exc: StoreError, left: str) -> StoreError:
        # Nothing is pushed twice on a rerun: the store keeps each run, record and document once.
        why = str(exc).removeprefix(f"store {spool_path}: ").split("; ")[0]
        refused = f"; {len(problems)} run(s) refused: {'; '.join(problems)}" if problems else ""
        return StoreError(
            f"spool {spool_path} is damaged ({why}): {runs} run(s) pushed to {location.shown} ({n_recs} "
            f"new record(s), {n_docs} document(s)), {left} stay in it{refused}; move it aside (the results "
            "are also in the commands' JSON files, which `perfsuite store import` reads)"
        )

    try:
        with Store(parse(str(spool_path), "spool", location.home)) as spool, Store(location) as target:
            try:
                listed = spool.runs()
            except StoreError as exc:
                raise damaged(exc, "its runs") from None
            for i, run in enumerate(listed):
                try:
                    if run["state"] == "running":  # nobody holds the lock: its command is gone
                        spool.finish_run(run["id"], "interrupted")
                    rows = spool.read_run(run["id"])
                except StoreError as exc:
                    raise damaged(exc, f"{len(listed) - i} run(s)") from None
                try:
                    r, d = target.add_run(rows.validated())
                except StoreUnreachable:
                    raise
                except (StoreError, RecordError) as exc:
                    problems.append(f"run {run['id']}: {exc}")
                    continue
                runs, n_recs, n_docs = runs + 1, n_recs + r, n_docs + d
                try:
                    spool.delete_run(run["id"])
                except StoreError as exc:  # in the store now; a rerun adds nothing from it
                    left = f"{len(listed) - i} run(s) (the first of them, {run['id']}, in the store already)"
                    raise damaged(exc, left) from None
    finally:
        os.close(lock)
    return runs, n_recs, n_docs, problems
