"""The machine a result comes from: a stable id and what makes its times comparable.

The id is PERFSUITE_MACHINE when set (an ephemeral CI runner names itself, so its history does not
split at every new container), else a random id made once and kept in the user's configuration
folder. Times from different machines are not comparable, so every query keeps them apart unless
asked; the fingerprint (perfsuite.measuring.fingerprint.comparable: CPU, GPU, driver, torch...) tells a
machine whose software changed under the same id.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfsuite.core.errors import ConfigError
from perfsuite.measuring.fingerprint import comparable

ENV = "PERFSUITE_MACHINE"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")


@dataclass(frozen=True)
class Machine:
    id: str
    name: str
    fingerprint: str
    info: dict[str, Any]

    def row(self) -> dict[str, str]:
        return {
            "id": self.id,
            "name": self.name,
            "fingerprint": self.fingerprint,
            "info": json.dumps(self.info, sort_keys=True, default=str),
            "first_seen": datetime.now(timezone.utc).isoformat(),
        }


def _config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "perfsuite"


def machine_id() -> str:
    """This machine's stable id (see the module's docstring)."""
    named = os.environ.get(ENV)
    if named is not None:
        if not _NAME.fullmatch(named):
            raise ConfigError(f"{ENV}={named[:70]!r}: a machine name is 1-64 letters, digits, '.', '_', ':' or '-'")
        return named
    f = _config_dir() / "machine-id"
    try:
        kept = f.read_text(encoding="ascii").strip()
        if re.fullmatch(r"[0-9a-f]{32}", kept):
            return kept
    except (OSError, UnicodeDecodeError):
        pass
    new = uuid.uuid4().hex
    try:
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f".machine-id.{os.getpid()}")
        tmp.write_text(new + "\n", encoding="ascii")
        os.replace(tmp, f)
    except OSError:
        # A home that cannot be written to: the host's own id, so the next run finds the same one.
        try:
            host_id = Path("/etc/machine-id").read_text().strip()
        except OSError:
            host_id = socket.gethostname()
        return hashlib.sha256(host_id.encode()).hexdigest()[:32]
    return new


def fingerprint_of(env: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    info = comparable(env)
    return hashlib.sha256(json.dumps(info, sort_keys=True, default=str).encode()).hexdigest()[:16], info


def this_machine(env: dict[str, Any] | None = None) -> Machine:
    """This machine, its fingerprint from `env` (a record's, or the fingerprint collected now)."""
    if env is None:
        from perfsuite.measuring.fingerprint import fingerprint

        env = fingerprint()
    digest, info = fingerprint_of(env)
    mid = machine_id()
    return Machine(
        mid, mid if os.environ.get(ENV) else socket.gethostname()[:255], digest, {**info, "host": env.get("host")}
    )


def imported_machine(env: dict[str, Any]) -> Machine:
    """The machine an imported result came from, as far as its file says (host and fingerprint):
    imports from two machines stay apart, and never join this machine's history."""
    digest, info = fingerprint_of(env)
    host = str(env.get("host") or "unknown")
    key = hashlib.sha256(f"{host}\0{digest}".encode()).hexdigest()[:16]
    return Machine(f"imported-{key}", f"{host} (imported)"[:255], digest, {**info, "host": host})
