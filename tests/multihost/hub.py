"""PostgreSQL on the hub of :class:`~tests.multihost.netns.Hosts` (the multi-host tests' one store)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.multihost.netns import SUBNET, Hosts


class HubPostgres:
    """PostgreSQL started on the hub (its TCP listener on the hub's addresses; a unix socket for this test),
    stopped by its PID, its directory removed."""

    def __init__(self, hosts: Hosts, options: dict[str, str] | None = None) -> None:
        """``options``: server settings (``-c name=value``) beyond the ones every multi-host test needs."""
        self.hosts = hosts
        self.options = options or {}
        self.dir = Path(os.path.realpath(os.environ.get("TMPDIR", "/tmp"))) / f"pmw-mh-pg-{os.getpid()}"
        self.port = _free_port()
        self.pid: int | None = None
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def start(self) -> HubPostgres:
        self.dir.mkdir(mode=0o755)
        if self._as:
            shutil.chown(self.dir, "postgres")
        data = self.dir / "data"
        subprocess.run([*self._as, "initdb", "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
                       check=True, capture_output=True, timeout=120)
        with (data / "pg_hba.conf").open("a") as f:
            f.write(f"host all all {SUBNET}.0.0/16 trust\n")
        listen = ",".join(self.hosts.hub_addresses()) if self.hosts.namespaced else "127.0.0.1"
        opts = (f"-k {self.dir} -p {self.port} -c listen_addresses='{listen}' -c fsync=off "
                "-c synchronous_commit=off -c max_connections=100"
                + "".join(f" -c {k}={v}" for k, v in self.options.items()))
        subprocess.run(self.hosts.argv(None, [*self._as, "pg_ctl", "-D", str(data), "-o", opts, "-w", "-t", "60",
                                              "start", "-l", str(self.dir / "log")]),
                       check=True, capture_output=True, timeout=120)
        self.pid = int((data / "postmaster.pid").read_text().split()[0])
        subprocess.run([*self._as, "psql", "-h", str(self.dir), "-p", str(self.port), "-U", "postgres", "-c",
                        "CREATE DATABASE world"], check=True, capture_output=True, timeout=60)
        return self

    def local_url(self) -> str:
        return f"postgresql+psycopg://postgres@/world?host={self.dir}&port={self.port}"

    def host_url(self, host: int) -> str:
        return (f"postgresql+psycopg://postgres@{self.hosts.hub_address(host)}:{self.port}/world"
                "?connect_timeout=3&tcp_user_timeout=3000&keepalives=1&keepalives_idle=1&keepalives_interval=1"
                "&keepalives_count=2")

    def stop(self) -> None:
        if self.pid is not None:
            try:
                os.kill(self.pid, 2)  # SIGINT: fast shutdown of the postmaster we started
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    os.kill(self.pid, 0)
                    time.sleep(0.05)
                os.kill(self.pid, 9)
            except ProcessLookupError:
                pass
            self.pid = None
        shutil.rmtree(self.dir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


__all__ = ["HubPostgres"]
