"""A throwaway PostgreSQL server for benchmarks: initdb into a temporary directory, a unix socket only (no
TCP), durable by default (``fsync=on``, ``synchronous_commit=on``: as a user would run it), stopped by its
own PID. Runs the server binaries as the ``postgres`` user when we are root (they refuse to run as root).

``--pg-url`` on a benchmark's command line uses a server of your own instead."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine


def binaries_available() -> bool:
    return all(shutil.which(b) for b in ("initdb", "pg_ctl", "postgres"))


class PgServer:
    """One PostgreSQL server in a temporary directory; :meth:`stop` (idempotent) ends it and removes it."""

    def __init__(self, *, durable: bool = True, max_connections: int = 200) -> None:
        self.durable = durable
        self.max_connections = max_connections
        self.dir = Path(tempfile.mkdtemp(prefix="pmw-bench-pg-"))
        self.data = self.dir / "data"
        self._prefix: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
            self._prefix = ["runuser", "-u", "postgres", "--"]
        self.pid: int | None = None
        self._names = itertools.count(1)

    def _run(self, *args: str) -> None:
        subprocess.run([*self._prefix, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> PgServer:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres")
        durability = "" if self.durable else "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        opts = f"-k {self.dir} -c listen_addresses='' {durability}-c max_connections={self.max_connections}"
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-w", "-t", "60", "start", "-l", str(self.dir / "log"))
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])
        return self

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@/{dbname}?host={self.dir}"

    def create_database(self) -> str:
        """A fresh, empty database; its URL."""
        name = f"b{os.getpid()}_{next(self._names)}"
        admin = create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"CREATE DATABASE {name} TEMPLATE template0")
        finally:
            admin.dispose()
        return self.url(name)

    def stop(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGINT)  # fast shutdown of the postmaster we started
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    os.kill(self.pid, 0)
                    time.sleep(0.05)
                os.kill(self.pid, signal.SIGKILL)
            self.pid = None
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def pg_served(url: str | None = None, *, durable: bool = True) -> Iterator[tuple[str, int | None]]:
    """``url`` itself, or a fresh database on a server of our own started for the block and stopped after;
    with the PID of that server's postmaster (None for a server of yours): its process tree is the
    server's CPU (:mod:`benchmarks.cpu_time`)."""
    if url is not None:
        yield url, None
        return
    server = PgServer(durable=durable)
    try:
        server.start()
        yield server.create_database(), server.pid
    finally:
        server.stop()


@contextlib.contextmanager
def pg_database(url: str | None = None, *, durable: bool = True) -> Iterator[str]:
    """``url`` itself, or a fresh database on a server of our own started for the block and stopped after."""
    with pg_served(url, durable=durable) as (found, _pid):
        yield found


__all__ = ["PgServer", "binaries_available", "pg_database", "pg_served"]
