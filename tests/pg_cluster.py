"""A throwaway PostgreSQL cluster for tests: initdb into a temporary directory, listen on a unix socket
only (no TCP), stop it by its own PID afterwards. Runs the server binaries as the ``postgres`` user when
we are root (initdb and postgres refuse to run as root)."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from sqlalchemy import create_engine

INSTALL_HINT = ("PostgreSQL server binaries (initdb, pg_ctl, postgres) are not on PATH; "
                "install them with `apt-get install postgresql` (Debian) and retry")


def binaries_available() -> bool:
    return all(shutil.which(b) for b in ("initdb", "pg_ctl", "postgres"))


class PgCluster:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pmw-pg-"))
        self.data = self.dir / "data"
        self._prefix: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
            self._prefix = ["runuser", "-u", "postgres", "--"]
        self.pid: int | None = None
        self._names = itertools.count(1)

    def _run(self, *args: str) -> None:
        subprocess.run([*self._prefix, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> PgCluster:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        opts = (f"-k {self.dir} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
                "-c full_page_writes=off -c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-w", "-t", "60", "start", "-l",
                  str(self.dir / "log"))
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])
        return self

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@/{dbname}?host={self.dir}"

    def create_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        name = f"t{os.getpid()}_{next(self._names)}"
        admin = create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"CREATE DATABASE {name} TEMPLATE template0")
        finally:
            admin.dispose()
        return self.url(name)

    def stop(self) -> None:
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGINT)  # fast shutdown of the postmaster we started
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    os.kill(self.pid, 0)
                    time.sleep(0.05)
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.pid = None
        shutil.rmtree(self.dir, ignore_errors=True)
