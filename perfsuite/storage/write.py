"""The one writer: every file perfsuite creates or replaces goes through this module.

Three rules, kept here so that no caller has to remember them:
- Names derived from data are slugged (perfsuite.core.text.slug) and contained: the resolved path
  must lie inside the folder the user chose, so a workload named `../../x` or `/etc/x` writes
  `<folder>/x...`, never outside.
- Symlinks are refused where a file is created or replaced: a planted link (dangling or not)
  would otherwise aim perfsuite's write at a file the user never named. New files are opened with
  O_EXCL|O_NOFOLLOW; replacements are written to a fresh temporary file and renamed over the
  name (a rename replaces a link, it never writes through it), after refusing a link there.
- Writes are atomic (temporary file, fsync, rename) and an OSError (disk full, read-only mount,
  a folder gone) is a StorageError naming the file: exit 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from perfsuite.core.errors import StorageError
from perfsuite.core.state import state_folder
from perfsuite.core.text import slug

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# A new file, never an existing one nor a planted symlink, not inherited by child processes.
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _fail(path: str | os.PathLike[str], exc: OSError, doing: str = "write") -> StorageError:
    return StorageError(f"cannot {doing} {path}: {exc.strerror or exc}")


def inside(folder: str | os.PathLike[str], *parts: str) -> Path:
    """`folder/parts...`, refused unless it resolves inside `folder` (a `..`, an absolute part or
    a symlinked sub-folder that points elsewhere)."""
    base = Path(folder)
    path = base.joinpath(*parts)
    root = base.resolve()
    where = path.resolve()
    if where != root and root not in where.parents:
        raise StorageError(f"refusing to write {path}: it resolves to {where}, outside {base}")
    return path


def file_in(folder: str | os.PathLike[str], name: object, suffix: str = "") -> Path:
    """The file for a data-derived `name` in `folder`: slugged, then contained."""
    return inside(folder, slug(name) + suffix)


def make_dir(path: str | os.PathLike[str], what: str = "folder") -> Path:
    """Create `path` (and its parents) if needed; refuse one that cannot be written to, and a
    link in place of perfsuite's state folder (state_folder)."""
    path = Path(path)
    state_folder(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StorageError(f"cannot create {what} {path}: a file of that name exists") from None
    except OSError as exc:
        raise StorageError(f"cannot create {what} {path}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK):
        raise StorageError(f"{what} {path} is not writable")
    return path


# Less free space than this where an output goes is refused before measuring: a results document
# of thousands of records fits, and a disk this full fails the write after the measurement.
MIN_FREE_BYTES = 16 << 20


def _free_space(folder: Path, what: str) -> None:
    try:
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        raise _fail(folder, exc, "inspect") from None
    if free < MIN_FREE_BYTES:
        raise StorageError(
            f"{what} {folder}: only {free >> 20} MiB free; perfsuite needs {MIN_FREE_BYTES >> 20} MiB "
            "there before it measures"
        )


def check_output(path: str | os.PathLike[str], what: str, *, replace: bool = False) -> Path:
    """An output file, checked before anything is measured, so that no measurement is lost to a
    write that was bound to fail: not a symbolic link (dangling or not), a regular file if it
    exists (refused unless `replace`, and then writable), its folder created and writable, with
    MIN_FREE_BYTES free."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _fail(path, exc, "inspect") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise StorageError(f"{what} {path}: a symbolic link; refusing to write through it")
        if not stat.S_ISREG(st.st_mode):
            raise StorageError(f"{what} {path}: exists and is not a regular file")
        if not replace:
            raise StorageError(f"{what} {path}: file exists; refusing to overwrite")
        if not os.access(path, os.W_OK):
            raise StorageError(f"{what} {path} is not writable")
    make_dir(path.parent, f"{what} folder")
    _free_space(path.parent, what)
    return path


def check_output_dir(path: str | os.PathLike[str], what: str) -> Path:
    """An output folder, checked (and created) before anything is measured: not a dangling
    symbolic link nor a file, writable, with MIN_FREE_BYTES free. (A link to a folder the user
    names is followed: that is where they chose; names derived from data never are, see inside.)"""
    path = Path(path)
    if os.path.islink(path) and not path.exists():
        raise StorageError(f"{what} {path}: a symbolic link to nothing; refusing to create what it points at")
    make_dir(path, what)
    _free_space(path, what)
    return path


def write_or_rescue(path: str | os.PathLike[str], text: str, what: str) -> Path:
    """Write `text` atomically to `path`, which check_output passed before measuring; should the
    write still fail (the disk filled up meanwhile), the text goes to a new file in the system's
    temporary folder and the error names it: a measurement is never lost to its output."""
    try:
        return write_text(path, text)
    except StorageError as exc:
        rescue = Path(tempfile.gettempdir()) / f"perfsuite-rescued-{uuid.uuid4().hex[:8]}-{slug(Path(path).name)}"
        try:
            write_new_text(rescue, text)
        except StorageError as again:
            raise StorageError(f"{what}: {exc}; keeping it in {rescue} failed too: {again}") from None
        raise StorageError(f"{what}: {exc}; what was measured is kept in {rescue}") from None


def refuse_link(path: Path) -> None:
    """A symlink, or anything but a regular file, where perfsuite is about to put a file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _fail(path, exc) from None
    if stat.S_ISLNK(st.st_mode):
        raise StorageError(f"refusing to write {path}: it is a symbolic link")
    if not stat.S_ISREG(st.st_mode):
        raise StorageError(f"refusing to write {path}: it exists and is not a regular file")


def create_temp(path: Path) -> tuple[int, str]:
    """A new temporary file beside `path`, named `.NAME.<8 characters>.tmp` (files.remove_stale_temps
    knows the pattern). Mode 0666 for the kernel to apply the umask, as for any new file."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            return os.open(tmp, NEW_FILE, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name beside {path}")


def _unlink(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Create or replace `path` atomically: readers see the old file or the new one, never half."""
    path = Path(path)
    refuse_link(path)
    tmp = _write_temp(path, data)
    _replace(tmp, path)
    return path


def _replace(tmp: str, path: Path) -> None:
    try:
        os.replace(tmp, path)
    except BaseException as exc:
        _unlink(tmp)
        if isinstance(exc, OSError):
            raise _fail(path, exc) from None
        raise


@contextlib.contextmanager
def _temp_beside(path: Path) -> Iterator[tuple[BinaryIO, str]]:
    """A temporary binary file beside `path` to write into, synced; yields (file, its name). On
    any error (KeyboardInterrupt included) it is removed: no litter in the user's folder."""
    try:
        fd, tmp = create_temp(path)
    except OSError as exc:
        raise _fail(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f, tmp
            f.flush()
            os.fsync(f.fileno())
    except BaseException as exc:
        _unlink(tmp)
        if isinstance(exc, OSError):
            raise _fail(path, exc) from None
        raise


def _write_temp(path: Path, data: bytes) -> str:
    with _temp_beside(path) as (f, tmp):
        f.write(data)
    return tmp


@contextlib.contextmanager
def atomic(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write `path` through, for writers that stream (torch.save, pickle, PIL):
    the same rules as write_bytes, without holding the whole file in memory first."""
    path = Path(path)
    refuse_link(path)
    with _temp_beside(path) as (f, tmp):
        yield f
    _replace(tmp, path)


def new_file(path: str | os.PathLike[str]) -> BinaryIO:
    """A new binary file at `path` to stream into (a child process's log): never an existing
    file nor a link."""
    path = Path(path)
    try:
        return os.fdopen(os.open(path, NEW_FILE, 0o666), "wb")
    except FileExistsError:
        raise StorageError(f"{path}: file exists; refusing to overwrite it") from None
    except OSError as exc:
        raise _fail(path, exc) from None


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_new_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Create `path`, which must not exist (nor be a link, dangling or not): written beside it
    and linked into place, so the file appears whole or not at all and is never overwritten."""
    path = Path(path)
    tmp = _write_temp(path, data)
    try:
        os.link(tmp, path)  # fails on any existing name, a dangling symlink included
    except FileExistsError:
        raise StorageError(f"{path}: file exists; refusing to overwrite it") from None
    except OSError as exc:
        raise _fail(path, exc) from None
    finally:
        _unlink(tmp)
    return path


def write_new_text(path: str | os.PathLike[str], text: str) -> Path:
    return write_new_bytes(path, text.encode("utf-8"))


def claim(path: str | os.PathLike[str], text: str) -> None:
    """Create `path` exclusively with `text` (a results file's empty document): of two runs given
    one path the second fails here. FileExistsError is the caller's to word."""
    path = Path(path)
    fd = os.open(path, NEW_FILE, 0o666)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except BaseException:
        _unlink(str(path))  # a half-written claim would read as a corrupt results file
        raise


def open_lock(path: str | os.PathLike[str]) -> int:
    """A lock file's descriptor, created if missing; a symlink there (dangling or not) is refused
    rather than followed, so a planted `.lock` cannot make perfsuite create a file elsewhere."""
    path = Path(path)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise StorageError(f"refusing to open {path}: it is a symbolic link") from None
        raise _fail(path, exc, "open") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StorageError(f"refusing to open {path}: not a regular file")
    return fd


def try_lock(path: str | os.PathLike[str], *, shared: bool = False) -> int | None:
    """An flock on the lock file `path` (open_lock), taken without waiting: its descriptor (close
    it to let go), or None when another process holds it. The kernel drops it when its process
    ends, however it ends: no stale locks. (The store's spool keeps a lock of its own:
    perfsuite.database sits below perfsuite.storage.)"""
    import fcntl

    fd = open_lock(path)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError as exc:  # a file system without locks (ENOLCK on some NFS)
        os.close(fd)
        raise _fail(path, exc, "lock") from None
    return fd


def save_figure(fig: Figure, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """A matplotlib figure, rendered in memory and written like any other file."""
    import warnings

    path = Path(path)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        # A name from a user's data may hold a character the font lacks: drawn as a box, which is
        # all there is to say (as a warning it reached the console, and under the tests' warnings-
        # as-errors it made `report` of a fuzzed workload name an internal error).
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        fig.savefig(buf, format=path.suffix.lstrip(".") or "png", **kwargs)
    return write_bytes(path, buf.getvalue())


def save_csv(frame: pd.DataFrame, path: str | os.PathLike[str], new: bool = False) -> Path:
    """A DataFrame as CSV; `new`: the file must not exist yet."""
    text = frame.to_csv(index=False)
    return write_new_text(path, text) if new else write_text(path, text)


def from_tool(path: str | os.PathLike[str], produce: Callable[[str], object]) -> Path:
    """A file another library insists on writing by name (torch.profiler's Chrome trace): it
    writes into a private temporary folder, and the bytes come here like any other file's."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="perfsuite-out-") as tmp:
        staged = Path(tmp) / Path(path).name
        produce(str(staged))
        return write_bytes(path, staged.read_bytes())
