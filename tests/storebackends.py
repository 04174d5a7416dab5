"""The store's two engines as one pytest fixture: `backend` gives a fresh empty store URL on SQLite
and on a real PostgreSQL server started once per session (tests/pgserver.py)."""

from __future__ import annotations

import os
import uuid

import pgserver
import pytest

_server = None


def postgres_server():
    """The session's PostgreSQL server; a skip that says why when it cannot run here (under CI=true,
    where `make test` installs it, a failure)."""
    global _server
    if _server is None:
        try:
            _server = pgserver.Server().start()
        except (OSError, KeyError, Exception) as exc:  # noqa: BLE001 - any start failure is reported whole
            why = f"no PostgreSQL server could be started here ({type(exc).__name__}: {str(exc)[:300]})"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why + "; `make test` installs Debian's postgresql package as root")
    return _server


def stop_server() -> None:
    global _server
    if _server is not None:
        _server.stop()
        _server = None


def fresh_url(kind: str, tmp_path) -> str:
    if kind == "sqlite":
        return str(tmp_path / f"store-{uuid.uuid4().hex[:6]}.db")
    return postgres_server().create_database(f"t_{uuid.uuid4().hex[:12]}")
