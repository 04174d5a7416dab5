"""Every git command perfsuite runs goes through here: git on the PATH, its output captured, never
raising for git's own failure (the caller reads `returncode` and words the error for its flag).
Callers pass `--end-of-options` before a revision a user gave, so a value is never read as an
option."""

from __future__ import annotations

import os
import subprocess
from typing import Any

# What a git that could not be started, or did not answer in time, raises.
GIT_FAILED = (OSError, subprocess.SubprocessError)


def run_git(
    cwd: str | os.PathLike[str] | None, *args: str, text: bool = True, timeout: float | None = None
) -> subprocess.CompletedProcess[Any]:  # str or bytes, as `text` says
    """`git ARGS` in `cwd` (None: this process's folder); its CompletedProcess."""
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=text, timeout=timeout, check=False)


def git_output(cwd: str | os.PathLike[str] | None, *args: str, timeout: float = 30.0) -> str | None:
    """`git ARGS`'s output, stripped; None when git fails, is missing or does not answer in time."""
    try:
        res = run_git(cwd, *args, timeout=timeout)
    except GIT_FAILED:
        return None
    return res.stdout.strip() if res.returncode == 0 else None
