"""A Cerbos PDP the runtime starts itself: loopback ports, warn-level logs, no orphans.

The binary comes from the pinned npm package ``@cerbos/cerbos-linux-x64`` (``npm ci`` in the repository
root puts it under ``node_modules/``); ``PMW_CERBOS_BIN`` overrides the path. The server reads the policy
directory from a disk store without watching it: policies change only by an explicit reload. It is started
in its own process group with ``PR_SET_PDEATHSIG`` so that it dies with the runtime even when the runtime
is SIGKILLed, and it is stopped by its own PID.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt

from engine.errors import PolicyUnavailable

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BINARY = REPO_ROOT / "node_modules" / "@cerbos" / "cerbos-linux-x64" / "cerbos-linux-x64"
INSTALL_HINT = "install the pinned Cerbos PDP with `npm ci` in the repository root (or set PMW_CERBOS_BIN)"
_PR_SET_PDEATHSIG = 1


def cerbos_binary() -> Path:
    """The Cerbos binary to run; raises :class:`PolicyUnavailable` with an install hint if missing."""
    path = Path(os.environ.get("PMW_CERBOS_BIN", DEFAULT_BINARY))
    if not path.is_file() or not os.access(path, os.X_OK):
        raise PolicyUnavailable(f"no Cerbos binary at {path}; {INSTALL_HINT}")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # bound in the parent: the child only makes the call


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: the kernel SIGKILLs it when the runtime dies."""
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _launch(argv: list[str], log: Any) -> subprocess.Popen[bytes]:
    """Start the server so that it dies with this process. ``setpriv --pdeathsig`` (util-linux) sets the
    parent-death signal and execs, and Python can then spawn without running fork handlers: a plain fork
    in a process with live gRPC channels runs gRPC's atfork handlers, which can abort the child. Without
    setpriv, a minimal ``preexec_fn`` sets the same signal."""
    common: dict[str, Any] = {"stdout": log, "stderr": subprocess.STDOUT, "stdin": subprocess.DEVNULL,
                              "process_group": 0, "env": {**os.environ, "CERBOS_NO_TELEMETRY": "1"}}
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        return subprocess.Popen([setpriv, "--pdeathsig", "KILL", "--", *argv], **common)
    return subprocess.Popen(argv, preexec_fn=_die_with_parent, **common)  # noqa: PLW1509


@dataclass(frozen=True)
class PdpAddress:
    grpc: str
    http: str
    admin_user: str | None = None
    admin_password: str | None = None


_CONFIG = """\
server:
  httpListenAddr: "127.0.0.1:{http}"
  grpcListenAddr: "127.0.0.1:{grpc}"
  apiExplorerEnabled: false
  requestLimits:
    maxResourcesPerRequest: 500
    maxActionsPerResource: 50
  adminAPI:
    enabled: true
    adminCredentials:
      username: pmw
      passwordHash: {password_hash}
engine:
  defaultPolicyVersion: default
schema:
  enforcement: reject
storage:
  driver: disk
  disk:
    directory: {policies}
    watchForChanges: false
audit:
  enabled: {audit_enabled}
  accessLogsEnabled: false
  decisionLogsEnabled: true
  backend: file
  file:
    path: {audit_path}
    logRotation:
      maxFileSizeMB: 50
      maxFileCount: 5
telemetry:
  disabled: true
"""


class ManagedPdp:
    """One ``cerbos server`` subprocess serving ``policy_dir``; use as a context manager or start/stop."""

    def __init__(self, policy_dir: Path, *, audit_path: Path | None = None, log_path: Path | None = None) -> None:
        self.policy_dir = Path(policy_dir).absolute()  # not resolve(): a deployment swaps the symlink
        self._workdir = Path(tempfile.mkdtemp(prefix="pmw-pdp-"))
        self.audit_path = audit_path
        self.log_path = log_path or self._workdir / "pdp.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.address: PdpAddress | None = None
        self._ports: tuple[int, int] | None = None
        self._password = secrets.token_urlsafe(24)

    def _write_config(self, grpc_port: int, http_port: int, password: str) -> Path:
        digest = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10))
        config = _CONFIG.format(http=http_port, grpc=grpc_port, policies=self.policy_dir,
                                password_hash=base64.b64encode(digest).decode(),
                                audit_enabled="true" if self.audit_path else "false",
                                audit_path=self.audit_path or self._workdir / "audit.log")
        path = self._workdir / "cerbos.yaml"
        path.write_text(config)
        return path

    def start(self, timeout: float = 20.0) -> PdpAddress:
        """Start the server and wait until it is healthy; raises :class:`PolicyUnavailable` if it exits
        (a broken policy set refuses to start) or does not become healthy within ``timeout`` seconds.
        Starting again after a stop (or a crash) serves on the same loopback ports."""
        binary = cerbos_binary()
        self._workdir.mkdir(parents=True, exist_ok=True)
        if self._ports is None:  # a restart keeps the addresses clients already hold
            self._ports = (_free_port(), _free_port())
        grpc_port, http_port = self._ports
        password = self._password
        config = self._write_config(grpc_port, http_port, password)
        log = self.log_path.open("ab")
        try:
            self.proc = _launch([str(binary), "server", f"--config={config}", "--log-level=warn",
                                 "--debug-listen-addr="], log)
        finally:
            log.close()
        self.address = PdpAddress(grpc=f"127.0.0.1:{grpc_port}", http=f"http://127.0.0.1:{http_port}",
                                  admin_user="pmw", admin_password=password)
        self._wait_healthy(timeout)
        return self.address

    def _wait_healthy(self, timeout: float) -> None:
        assert self.proc is not None and self.address is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (code := self.proc.poll()) is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                self._terminate()
                raise PolicyUnavailable(f"cerbos exited with {code}: {tail.strip()}")
            try:
                with urllib.request.urlopen(f"{self.address.http}/_cerbos/health", timeout=0.5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.02)
        self._terminate()
        raise PolicyUnavailable(f"cerbos did not become healthy within {timeout} s")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self, *, keep_files: bool = False) -> None:
        """SIGTERM by PID, SIGKILL after 5 s; idempotent. The working directory (config with the admin
        password hash, log) is removed unless ``keep_files`` (a restart keeps it)."""
        self._terminate()
        if not keep_files:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def _terminate(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)  # a stopped (SIGSTOPped) server cannot handle SIGTERM
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)

    def __enter__(self) -> ManagedPdp:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["INSTALL_HINT", "ManagedPdp", "PdpAddress", "cerbos_binary"]
