"""A command's results folder, opened once: the one place outputs are checked, claimed, locked,
resumed, and discarded when they stayed empty.

Every command that writes what it measured goes through it (`run` and suites, `pair`, `amp`,
`gate`, `why`, `history`): it is created and checked writable before anything is measured;
locked for this process when a second run into it would race on its files (a suite's folder);
pinned to one configuration when it is resumed (run-config.json's digest); and on closing, the
files it handed out that received nothing (a command stopped before its first case ended) are
removed, so the same command can be run again on the same paths."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from perfsuite.core import documents
from perfsuite.core.config import config_digest
from perfsuite.core.errors import ConfigError, RecordError, StorageError
from perfsuite.storage import write
from perfsuite.storage.files import DocumentWriter, ResultsWriter, atomic_write_text, versioned, writable_dir
from perfsuite.storage.read import read_json

CONFIG_FILE = "run-config.json"


class Reserved:
    """An output written once, at the end (a gate's verdicts, a why, a history's page): checked
    now, before anything is measured, and written atomically later, or rescued to a temporary
    file should the write still fail (storage.write.write_or_rescue)."""

    def __init__(self, path: Path, flag: str, replace: bool = False) -> None:
        self.path, self.flag = write.check_output(path, flag, replace=replace), flag

    def write(self, text: str) -> Path:
        return write.write_or_rescue(self.path, text, self.flag)


class ResultsFolder:
    """`path`, opened with `with ResultsFolder(path, ...) as folder:`. `lock`: one run at a time
    (an flock on `.lock` the kernel drops however the process ends); `config`: the run's
    resolved configuration, whose digest a resumed folder must match."""

    def __init__(
        self, path: str | os.PathLike[str], *, lock: bool = False, config: Mapping[str, Any] | None = None,
        what: str = "output directory",
    ) -> None:  # fmt: skip
        self.path, self.lock, self.config, self.what = Path(path), lock, config, what
        self._fd: int | None = None
        self._fresh: list[ResultsWriter | DocumentWriter] = []

    def __enter__(self) -> ResultsFolder:
        writable_dir(self.path, self.what)
        if self.lock:
            self._fd = write.try_lock(self.path / ".lock")  # a planted symlink is refused, never followed
            if self._fd is None:
                raise ConfigError(
                    f"{self.what} {self.path} is in use by another perfsuite run; wait for it or choose another --out"
                )
        try:
            if self.config is not None:
                self._pin(self.config)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self._fresh:  # our own empty claims: leave nothing to trip the next run
            if not w.results_held():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(w.path)
        self._fresh.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _pin(self, config: Mapping[str, Any]) -> None:
        """Refuse to mix two configurations in one folder; a new folder keeps this one's."""
        cfg_path = self.path / CONFIG_FILE
        digest = config_digest(dict(config))
        if os.path.lexists(cfg_path):
            try:
                old = read_json(cfg_path)
                documents.version_of(old, "run-config", str(cfg_path))  # version 0 (no key) or 1
                documents.validate("run-config", old, str(cfg_path))
            except RecordError as exc:
                raise ConfigError(f"{exc}; use another output directory") from None
            if old.get("digest") != digest:
                raise ConfigError(
                    f"{self.what} {self.path} holds a run of a different configuration "
                    f"(suite {old.get('suite')!r}, sha256 {str(old.get('sha256'))[:12]}); "
                    "resume with the same file and parameters, or choose another --out"
                )
            return
        # The version keys stay outside the digest: a folder written before they existed resumes.
        atomic_write_text(cfg_path, versioned("run-config", {**config, "digest": digest}))

    def _inside(self, name: str) -> Path:
        try:
            return write.inside(self.path, name)
        except StorageError as exc:
            raise ConfigError(str(exc)) from None

    def results_file(self, name: str, *, resume: bool = False) -> ResultsWriter:
        """The records file `name`: claimed now, exclusively (an existing file is refused), or
        with `resume`, continued with what it holds."""
        path = self._inside(name)
        if resume:
            return ResultsWriter.resume(path)
        w = ResultsWriter(path)
        self._fresh.append(w)
        return w

    def document(
        self, name: str, kind: str, extra: dict[str, Any] | None = None, *, resume: bool = False, model: Any = None
    ) -> DocumentWriter:
        """A versioned document of `kind` (pair, amp) with one entry per case, as results_file;
        `model`: the kind's result class, which a resumed document's entries are read into."""
        path = self._inside(name)
        if resume:
            try:
                return DocumentWriter.resume(path, kind, extra, model=model)
            except RecordError as exc:
                raise ConfigError(f"{exc}; remove it to measure its entry again") from None
        w = DocumentWriter(path, kind, extra)
        self._fresh.append(w)
        return w

    def reserve(self, name: str, flag: str, *, replace: bool = False) -> Reserved:
        """An output written once at the end, checked now."""
        return Reserved(self._inside(name), flag, replace)


@contextlib.contextmanager
def folder_of(path: str | os.PathLike[str], what: str = "output folder") -> Iterator[tuple[ResultsFolder, str]]:
    """The opened folder of an output file the user named (--out, --json), and its name in it."""
    p = Path(path)
    with ResultsFolder(p.parent, what=what) as folder:
        yield folder, p.name
