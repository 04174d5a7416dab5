"""A real PostgreSQL server for the store's tests, started in a temporary folder and stopped after
(Debian's `postgresql` package: initdb and pg_ctl; `make test` installs it when missing).

Password authentication on TCP (scram-sha-256), so wrong credentials are refused as in a team's
server; run as the `postgres` user when the tests run as root (initdb refuses root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER, PASSWORD, DATABASE = "perfsuite", "test-secret-4f1c", "perfsuite"


def binaries() -> Path | None:
    """The folder of initdb and pg_ctl, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, port: int | None = None) -> None:
        self.bin = binaries()
        if self.bin is None:
            raise FileNotFoundError("PostgreSQL is not installed (initdb not found)")
        self.root = Path(tempfile.mkdtemp(prefix="perfsuite-pg-"))
        self.data = self.root / "data"
        self.port = port or _free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chmod(self.root, 0o755)
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self.as_user, *cmd], check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> Server:
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_user:
            owner = pwd.getpwnam("postgres")
            os.chown(pwfile, owner.pw_uid, owner.pw_gid)
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            opts,
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )
        self.create_database(DATABASE)
        return self

    def url(self, database: str = DATABASE, password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except (subprocess.SubprocessError, OSError):
            pass
        shutil.rmtree(self.root, ignore_errors=True)
