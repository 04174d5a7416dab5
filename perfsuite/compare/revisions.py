"""Which checkouts a comparison of revisions (gate, bisect, why) measures, and with which workload
file: the repository, a revision resolved to its commit, a temporary worktree of it, and, per
revision, the workload file its side loads beside that revision's code (Revisions).

A project adopts a benchmark long after its history began: by default every revision is measured
with the working tree's workload file (as asv takes its benchmarks from the current tree while the
project's code comes from each commit), so commits older than the benchmark are measured too.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

from perfsuite.core.discover import project_root
from perfsuite.core.errors import ConfigError
from perfsuite.core.git import run_git


def git_root(path: Path) -> Path:
    res = run_git(path, "rev-parse", "--show-toplevel")
    if res.returncode != 0:
        raise ConfigError(f"{path}: not inside a git repository ({res.stderr.strip()})")
    return Path(res.stdout.strip())


# A revision longer than this is no name of a commit (git's own ref names stay far below it), and a
# million characters would not fit git's command line.
MAX_REVISION = 1000


def resolve_commit(rev: str, repo: Path, flag: str = "--base") -> str:
    """The commit `rev` (given as `flag`) names; an option-like value never reaches git as an option."""
    if not rev or rev.startswith("-"):
        raise ConfigError(f"{flag} {rev[:80]!r}: not a git revision (a revision cannot start with '-')")
    if len(rev) > MAX_REVISION or "\x00" in rev:
        raise ConfigError(
            f"{flag} {rev[:40]!r}...: not a git revision ({len(rev)} characters; at most {MAX_REVISION}, no NUL)"
        )
    res = run_git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if res.returncode != 0 or not res.stdout.strip():
        raise ConfigError(f"{flag} {rev}: no such commit in {repo}")
    return res.stdout.strip()


@contextlib.contextmanager
def worktree(repo: Path, commit: str):
    """A detached checkout of `commit`, removed on the way out whatever happens."""
    folder = Path(tempfile.mkdtemp(prefix="perfsuite-base-"))
    path = folder / "tree"
    res = run_git(repo, "worktree", "add", "--detach", "--quiet", str(path), commit)
    if res.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise ConfigError(f"cannot check out {commit[:12]} in a worktree: {res.stderr.strip()}")
    try:
        yield path
    finally:
        run_git(repo, "worktree", "remove", "--force", str(path), text=False)  # bytes: never a decode error here
        shutil.rmtree(folder, ignore_errors=True)
        run_git(repo, "worktree", "prune", text=False)


def workload_file(source: str, name: str) -> Path:
    """The file a workload is declared in: a user's `file:line`, or perfsuite's own module."""
    if source:
        return Path(source.rsplit(":", 1)[0]).resolve()
    return Path(__file__).resolve().parents[1] / "workloads" / f"{name}.py"


def file_in(root_now: Path, root_base: Path, file: Path) -> Path:
    """The same file in the base checkout; refused when it is not in the repository."""
    try:
        rel = file.resolve().relative_to(root_now.resolve())
    except ValueError:
        raise ConfigError(
            f"{file} is not inside the repository {root_now}: --workloads-from revision takes each "
            "revision's own copy of the workload file, so it must be in that repository"
        ) from None
    return root_base / rel


TREE, REVISION = "tree", "revision"


class Revisions:
    """Where a comparison of revisions (gate, bisect, why) finds the repository and, for each
    revision, the workload file it loads beside that revision's code.

    A user's workloads come from the working tree by default (`workloads_from="tree"`): a project
    adopts a benchmark long after its history began, and the commits before the benchmark file
    existed are measured with today's file and their own code, as asv takes its benchmarks from
    the current tree. "revision" takes each revision's own copy; any other value is a git revision
    whose copy every side loads. perfsuite's own workloads are the code under test, so theirs is
    always the revision's. The repository is the one around the current folder (the project you
    are in), else the workload file's."""

    def __init__(self, workload, workloads_from: str = TREE) -> None:
        self.file_now = workload_file(workload.source, workload.name)
        self.user = not workload.builtin
        here = _git_root_or_none(Path.cwd()) if self.user else None
        self.repo = here or git_root(self.file_now.parent)
        self.mode = workloads_from if self.user else REVISION
        self._stack = contextlib.ExitStack()
        self._pinned: Path | None = None
        if self.mode not in (TREE, REVISION):
            sha = resolve_commit(self.mode, self.repo, "--workloads-from")
            rel = file_in(self.repo, self.repo, self.file_now).relative_to(self.repo)
            res = run_git(self.repo, "show", f"{sha}:{rel.as_posix()}", text=False)
            if res.returncode != 0:
                raise ConfigError(f"--workloads-from {self.mode}: {rel} does not exist at that revision")
            folder = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="perfsuite-workloads-")))
            self._pinned = folder / self.file_now.name
            self._pinned.write_bytes(res.stdout)
        if self.mode == REVISION:
            self.rel = file_in(self.repo, self.repo, self.file_now).relative_to(self.repo)
        # A project nested in its repository (a monorepo's examples/my-project, its pyproject.toml
        # there): each checkout's code comes from that folder, as the working tree's does. Its base
        # side imported from the checkout's root and failed "No module named 'myproj'".
        try:
            self.project = project_root(self.file_now).resolve().relative_to(self.repo.resolve())
        except ValueError:  # a workload folder outside the repository measures the repository's root
            self.project = Path()

    def __enter__(self) -> Revisions:
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def code_root(self, checkout: Path) -> Path | None:
        """The folder of `checkout` a side's project code must come from: the project's own folder
        in it (the checkout's root for a project at the repository's root; None: perfsuite's own
        workloads, beside its core). A revision before the project moved there has no such folder,
        and its root is taken, as before."""
        if not self.user:
            return None
        nested = checkout / self.project
        return nested if nested.is_dir() else checkout

    def file_at(self, checkout: Path) -> Path:
        """The workload file a side of `checkout` loads."""
        if self.mode == TREE:
            return self.file_now
        if self.mode == REVISION:
            return checkout / self.rel
        assert self._pinned is not None  # set for a pinned mode
        return self._pinned

    def missing_at(self, sha: str) -> str | None:
        """Why `sha` cannot be measured with its own workload file (None: it can, or it is not needed)."""
        if self.mode != REVISION:
            return None
        res = run_git(self.repo, "cat-file", "-e", f"{sha}:{self.rel.as_posix()}", text=False)
        if res.returncode == 0:
            return None
        return (
            f"{self.rel} does not exist at this commit (--workloads-from revision; the default, tree, "
            "measures it with the working tree's workload file)"
        )

    def side(self, checkout: Path) -> tuple[Path, Path | None]:
        """(workload file, code root) of the side measuring `checkout`."""
        return self.file_at(checkout), self.code_root(checkout)

    @contextlib.contextmanager
    def checkout(self, rev: str, flag: str = "--base"):
        """A temporary worktree of `rev` (given as `flag`), refused first when the revision cannot be
        measured with the workload file asked for."""
        commit = resolve_commit(rev, self.repo, flag)
        missing = self.missing_at(commit)
        if missing:
            raise ConfigError(f"{flag} {rev}: {missing}")
        with worktree(self.repo, commit) as root:
            yield root


def _git_root_or_none(path: Path) -> Path | None:
    try:
        return git_root(path)
    except ConfigError:
        return None
