"""perfsuite's state folder in a project, `.perfsuite/` (stores, spools, logs, noise floors): never
a link, never in git. Here, below storage/ and store/, because both create files in it."""

from __future__ import annotations

import os
from pathlib import Path

from perfsuite.core.errors import StorageError

STATE_DIR = ".perfsuite"
GITIGNORE = "# made by perfsuite: its logs, stores and floors stay out of git\n*\n"


def state_folder(path: str | os.PathLike[str]) -> None:
    """Checks a folder about to be used against the state folder's rules (issues 51, 50): a
    `.perfsuite` on its way that is a symbolic link is refused (a committed link sent the bisect
    log and results.db outside the project); one that does not exist yet is made with a
    .gitignore of `*`, so git never shows perfsuite's files as the user's."""
    path = Path(path).absolute()
    for i, part in enumerate(path.parts):
        if part != STATE_DIR:
            continue
        folder = Path(*path.parts[: i + 1])
        if folder.is_symlink():
            raise StorageError(
                f"refusing to use {folder}: it is a symbolic link (to {os.readlink(folder)}); perfsuite keeps "
                "its state inside the project"
            )
        if folder.exists():
            continue
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            continue  # made by another run meanwhile
        except OSError as exc:
            raise StorageError(f"cannot create {folder}: {exc.strerror or exc}") from None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(folder / ".gitignore", flags, 0o666)
        except OSError:
            continue  # a .gitignore is advice: the folder stands without it
        with os.fdopen(fd, "w") as f:
            f.write(GITIGNORE)
