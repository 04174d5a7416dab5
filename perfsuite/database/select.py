"""`store:` sources: records read from the store wherever a results file is read (`report`,
`export`, `compare`, `roofline`, `perfsuite.load`, the pandas table).

    store:                      this machine's records
    store:REV                   this machine's records of one commit (any git revision, or a hash prefix)
    store:A..B                  of the first-parent commits after A up to B
    store:workload=W,commit=REV,machine=M|all,device=D,since=2026-11-01,run=ID,batch=ID

Times from different machines are not comparable: a source reads one machine's records (this
one's unless `machine=` names another) and `machine=all` is asked for by name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from perfsuite.core.errors import ConfigError
from perfsuite.core.git import git_output
from perfsuite.core.record import Record
from perfsuite.database.machine import machine_id

if TYPE_CHECKING:
    from perfsuite.database.location import Location

PREFIX = "store:"
KEYS = ("workload", "commit", "machine", "device", "since", "until", "run", "batch")


def is_source(path: str | os.PathLike[str]) -> bool:
    return str(path).startswith(PREFIX)


def parse(text: str) -> dict[str, str]:
    body = str(text)[len(PREFIX) :].strip()
    if not body:
        return {}
    if "=" not in body:
        return {"commit": body}
    out: dict[str, str] = {}
    for part in body.split(","):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in KEYS or not value.strip():
            raise ConfigError(f"{text[:120]!r}: expected store:KEY=VALUE,... with keys {', '.join(KEYS)}")
        if key in out:
            raise ConfigError(f"{text[:120]!r}: {key} is given twice")
        out[key] = value.strip()
    return out


def utc_time(text: str, what: str) -> str:
    """An ISO date or time as the store keeps creation times (UTC, isoformat), so that comparing
    the text compares the instants: a date is its midnight UTC, a time without zone is UTC."""
    from datetime import datetime, timezone

    try:
        t = datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise ConfigError(
            f"{what} {str(text)[:40]!r}: expected an ISO date or time (2026-11-01 or 2026-11-01T08:00:00+01:00)"
        ) from None
    t = t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)
    return t.isoformat()


def _git(*args: str) -> str | None:
    return git_output(None, *args, timeout=30)


def _revision(text: str, whole: str) -> str:
    """A revision as git may be given it: never an option (`--output=FILE` would make git write)."""
    if text.startswith("-") or any(ch.isspace() or not ch.isprintable() for ch in text) or len(text) > 200:
        raise ConfigError(f"commit {whole[:80]!r}: not a revision (a name, hash, tag or REV~N)")
    return text


def commits(spec: str) -> list[str] | None:
    """The commit hashes `spec` names (REV, or A..B along the first parents); None when git does not
    know it (then it is matched as a hash prefix)."""
    if ".." in spec:
        a, _, b = spec.partition("..")
        _revision(a, spec), _revision(b or "HEAD", spec)
        listed = _git("rev-list", "--first-parent", f"{a}..{b or 'HEAD'}", "--")
        if listed is None:
            raise ConfigError(f"commit range {spec!r}: git does not know it here")
        return listed.split()
    full = _git("rev-parse", "--verify", "--quiet", f"{_revision(spec, spec)}^{{commit}}")
    return [full] if full else None


def filters(sel: Mapping[str, str], this_machine: str) -> dict[str, Any]:
    """Store.rows/records keywords for a parsed selector. A batch is read across its machines (its
    shards ran on several); anything else on this machine unless `machine=` says otherwise."""
    out: dict[str, Any] = {}
    machine = sel.get("machine", "all" if "batch" in sel else this_machine)
    if machine != "all":
        out["machine"] = machine
    for key in ("workload", "device", "run", "batch"):
        if key in sel:
            out[key] = sel[key]
    for key in ("since", "until"):
        if key in sel:
            out[key] = utc_time(sel[key], key)
    if "commit" in sel:
        found = commits(sel["commit"])
        if found is not None:
            out["commits"] = found
        elif all(c in "0123456789abcdef" for c in sel["commit"].lower()) and len(sel["commit"]) >= 4:
            out["commit_prefix"] = sel["commit"].lower()
        else:
            raise ConfigError(f"store:{sel['commit']}: not a commit git knows here, nor a hash prefix")
    return out


def load(text: str | os.PathLike[str], location: Location | None = None) -> list[Record]:
    """The records a `store:` source names (see the module's docstring)."""
    from perfsuite.database.location import resolve
    from perfsuite.database.store import Store

    sel = parse(str(text))
    with Store(location or resolve(), create=False) as store:
        return store.records(**filters(sel, machine_id()))
