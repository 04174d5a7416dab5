"""A history's files: its log (named per case, locked while one run measures into it, read back
under the rule it was confirmed by, saved after each point) and the range it covers."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from perfsuite.compare.paired_history import HISTORY_RULE, History
from perfsuite.core.errors import ConfigError, RecordError
from perfsuite.storage.files import document, load_document
from perfsuite.storage.folder import Reserved
from perfsuite.storage.write import try_lock

HISTORY_DIR = Path(".perfsuite") / "history"


def log_name(name: str, params: dict) -> str:
    """A name made safe for a path (a user's name never leaves .perfsuite/history/), and the
    parameters' digest: each case has its own history."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "workload"
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{safe}-{digest}.history.json"


def page_beside(log: Path) -> Path:
    """The history's page when none is named: beside its log."""
    return log.with_name(log.name.removesuffix(".json").removesuffix(".history") + ".html")


def hold(log: Path) -> int:
    """The log's lock (LOG.lock beside it) for this run: a second run on the same log (two CI
    jobs that overlap) would read the same points and the last to save would drop the other's."""
    fd = try_lock(log.with_name(log.name + ".lock"))
    if fd is None:
        raise ConfigError(
            f"--log {log}: another perfsuite history is measuring into it; wait for it to end or give another --log"
        )
    return fd


def kept(log: Path, kind: str, shape: type, what: str):
    """The `kind` document kept in `log` (None where there is none yet), read as `shape`; a log
    that cannot be read is refused, named as `what`, and left as it is (a time or count history)."""
    if not log.exists():
        return None
    try:
        (old,) = load_document(log, kind, shape)[:1]
    except (RecordError, ValueError) as exc:
        raise ConfigError(f"--log {log}: not a readable {what} ({exc}); it is left as it is") from None
    return old


def stored(log: Path) -> History | None:
    """The history kept in `log`, or None where there is none yet."""
    old = kept(log, "history", History, "history")
    if old is None:
        return None
    if old.settings.get("rule") != HISTORY_RULE:
        raise ConfigError(
            f"--log {log}: written under rule {old.settings.get('rule')!r} of confirming a regression, and this "
            f"perfsuite confirms by rule {HISTORY_RULE} (docs/history.md): its points would not be judged alike; "
            "it is left as it is: remove it or give another --log"
        )
    return old


def range_ends(given: str | None, kept: History | None) -> tuple[str, str]:
    """The revisions A and B of `A..B`, or the stored history's start up to HEAD when none is given."""
    if given is not None:
        if given.count("..") != 1 or "..." in given:
            raise ConfigError(f"--range {given!r}: expected A..B (two revisions, the first older)")
        a, b = given.split("..")
        if not a or not b:
            raise ConfigError(f"--range {given!r}: expected A..B with both revisions named")
        return a, b
    if kept is None:
        raise ConfigError("--update: no stored history to extend; start one with --range A..B")
    return kept.base.sha, "HEAD"


def save(state: History, log: Reserved) -> None:
    log.write(document("history", [state.to_dict()]))
