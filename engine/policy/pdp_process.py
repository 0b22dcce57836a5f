"""A Cerbos PDP the runtime starts itself: loopback ports, warn-level logs, no orphans, no leftovers.

The binary comes from the pinned npm package ``@cerbos/cerbos-linux-x64`` (``npm ci`` in the repository
root puts it under ``node_modules/``); ``PMW_CERBOS_BIN`` overrides the path. The server reads the policy
directory from a disk store without watching it: policies change only by an explicit reload. It is started
in its own process group with ``PR_SET_PDEATHSIG`` so that it dies with the runtime even when the runtime
is SIGKILLed, and it is stopped by its own PID.

The parent-death signal belongs to the *thread* that forked the server, not to the process: every server is
therefore forked by one launcher thread that lives as long as the process (:class:`_Launcher`), so a PDP
started from a short-lived thread outlives that thread and still dies with the process.

Files: each :class:`ManagedPdp` keeps its config (holding the admin password's bcrypt hash) and, by
default, its log in a working directory ``<run_dir>/pdp-<owner pid>-<random>`` (mode 700, files 600),
removed by :meth:`ManagedPdp.stop`. A SIGKILLed owner cannot remove it: every start sweeps the sibling
working directories whose owner process is gone (:func:`sweep_orphans`), so leftovers never accumulate.
Without a ``run_dir`` the working directories live in ``<system temp dir>/pmw-pdp-<uid>`` (mode 700).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import queue
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import bcrypt

from engine.errors import PolicyUnavailable

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BINARY = REPO_ROOT / "node_modules" / "@cerbos" / "cerbos-linux-x64" / "cerbos-linux-x64"
INSTALL_HINT = "install the pinned Cerbos PDP with `npm ci` in the repository root (or set PMW_CERBOS_BIN)"
_PR_SET_PDEATHSIG = 1
WORKDIR_PREFIX = "pdp-"
#: ``<run_dir>/pdp-<owner pid>-<random>``: the owner's PID is what :func:`sweep_orphans` goes by.
_WORKDIR_NAME = re.compile(r"^pdp-(\d{1,10})-[A-Za-z0-9_-]{1,64}$")
_OWNER_FILE = "owner"  # "<pid> <start time in clock ticks>": tells a reused PID from the owner
_T = TypeVar("_T")


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


#: How many times a first start picks new ports when another process took one before Cerbos bound it.
PORT_ATTEMPTS = 3


class _PortTaken(Exception):
    """The server could not listen on its ports: another process holds one. ``fresh``: the ports were picked
    for this start (no client holds them yet), so others may be picked."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.fresh = False


def _listening_inodes(port: int) -> set[str]:
    """The socket inodes listening on TCP ``port`` of 127.0.0.1 (``/proc/net/tcp``; state 0A is LISTEN)."""
    wanted = f"0100007F:{port:04X}"
    found: set[str] = set()
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if len(fields) > 9 and fields[1] == wanted and fields[3] == "0A":
            found.add(fields[9])
    return found


def port_holder(pid: int, port: int) -> Literal["this", "another", "none"]:
    """Who listens on 127.0.0.1:``port``: process ``pid`` (``this``), another process, or none (Linux
    ``/proc``: the listening socket's inode among ``pid``'s open files)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return "none"
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return "another"
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return "this"
    return "another"


_PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # bound in the parent: the child only makes the call


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: the kernel SIGKILLs it when the runtime dies."""
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _launch(argv: list[str], log: Any, tmpdir: Path) -> subprocess.Popen[bytes]:
    """Start the server so that it dies with this process (call it on the launcher thread only).
    ``setpriv --pdeathsig`` (util-linux) sets the parent-death signal and execs, and Python can then spawn
    without running fork handlers: a plain fork in a process with live gRPC channels runs gRPC's atfork
    handlers, which can abort the child. Without setpriv, a minimal ``preexec_fn`` sets the same signal.
    The server's own temporary files (if any) go to ``tmpdir``, never to the system temp directory."""
    env = {**os.environ, "CERBOS_NO_TELEMETRY": "1", "TMPDIR": str(tmpdir)}
    common: dict[str, Any] = {"stdout": log, "stderr": subprocess.STDOUT, "stdin": subprocess.DEVNULL,
                              "process_group": 0, "env": env}
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        return subprocess.Popen([setpriv, "--pdeathsig", "KILL", "--", *argv], **common)
    return subprocess.Popen(argv, preexec_fn=_die_with_parent, **common)  # noqa: PLW1509


class _Launcher:
    """The one thread, for the life of the process, that forks every PDP server.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child exits, so forking from whichever
    thread called :meth:`ManagedPdp.start` would kill the PDP as soon as that thread ended (a runtime opened
    in a worker thread). This thread never exits (a daemon: it ends with the process, which is exactly when
    the PDP must die). A forked child process gets its own launcher (the PID is checked on every call)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._pid = 0

    def run(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` on the launcher thread and return its result (or raise its exception)."""
        with self._lock:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._queue = queue.SimpleQueue()
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._serve, args=(self._queue,), daemon=True,
                                                name="pmw-pdp-launcher")
                self._thread.start()
            thread, jobs = self._thread, self._queue
        if threading.current_thread() is thread:
            return fn()
        done: Future[_T] = Future()
        jobs.put((fn, done))
        return done.result()

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
        while True:
            fn, done = jobs.get()
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, which re-raises it
                done.set_exception(exc)


_LAUNCHER = _Launcher()


def _start_ticks(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, /proc/<pid>/stat field 22), or None if
    there is no such process or it is a zombie (dead, not yet reaped)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # the command name (field 2) may hold spaces and parentheses
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def _owner_alive(workdir: Path, pid: int) -> bool:
    """Is the process that created ``workdir`` still running? A reused PID (another start time than the
    one the owner recorded) is not the owner. Without a readable owner record (being written right now)
    the PID alone decides."""
    ticks = _start_ticks(pid)
    if ticks is None:
        return False
    with contextlib.suppress(OSError, ValueError):
        owner_pid, owner_ticks = (workdir / _OWNER_FILE).read_text().split()
        if int(owner_pid) == pid:
            return owner_ticks == ticks
    return True


def sweep_orphans(run_dir: Path) -> list[Path]:
    """Remove the PDP working directories in ``run_dir`` (``pdp-<pid>-<random>``) whose owner process is
    gone (SIGKILLed runtimes'), and return them. Only real directories owned by this user are touched;
    anything else in ``run_dir`` is left alone. Safe to run from several processes at once."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(run_dir))
    except OSError:
        return removed
    uid = os.getuid()
    for entry in entries:
        match = _WORKDIR_NAME.match(entry.name)
        if match is None:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue
        path = Path(entry.path)
        if not _owner_alive(path, int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def default_run_dir() -> Path:
    """``<system temp dir>/pmw-pdp-<uid>``: where working directories go when no ``run_dir`` is given."""
    return Path(tempfile.gettempdir()) / f"pmw-pdp-{os.getuid()}"


def _private_dir(path: Path, *, enforce: bool) -> None:
    """Create ``path`` (mode 700) if missing. With ``enforce`` (a shared place such as the system temp
    directory) it must be a real directory of this user, and is made mode 700; otherwise
    :class:`PolicyUnavailable` (someone else's directory or a symlink there is never used)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not enforce:
        return
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PolicyUnavailable(f"{path} is not a directory of this user; pass run_dir= to ManagedPdp")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)


def _open_private(path: Path, flags: int) -> int:
    """Open ``path`` for writing, created mode 600 (never following a symlink at the last component)."""
    return os.open(path, flags | os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


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
    """One ``cerbos server`` subprocess serving ``policy_dir``; use as a context manager or start/stop.

    ``run_dir`` holds the working directory (``pdp-<pid>-<random>``: config, default log); None means
    :func:`default_run_dir`. ``admin_password`` (default: a fresh random one) lets several PDPs share one
    admin credential (replicas an external client reloads with ``PMW_PDP_ADMIN_PASSWORD``). Thread-safe:
    :meth:`start` and :meth:`stop` may race (a stop wins: a start it interrupts raises
    :class:`PolicyUnavailable` and leaves nothing running)."""

    def __init__(self, policy_dir: Path, *, audit_path: Path | None = None, log_path: Path | None = None,
                 run_dir: Path | None = None, admin_password: str | None = None) -> None:
        self.policy_dir = Path(policy_dir).absolute()  # not resolve(): a deployment swaps the symlink
        self._shared_run_dir = run_dir is None
        self.run_dir = (default_run_dir() if run_dir is None else Path(run_dir)).absolute()
        self._workdir = self._new_workdir()
        self.audit_path = audit_path
        self._default_log = log_path is None
        self.log_path = log_path or self._workdir / "pdp.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.address: PdpAddress | None = None
        self._ports: tuple[int, int] | None = None
        self._password = admin_password or secrets.token_urlsafe(24)  # given: replicas that share one
        self._password_hash: bytes | None = None
        self._lock = threading.RLock()
        self._stopped = True

    def _new_workdir(self) -> Path:
        return self.run_dir / f"{WORKDIR_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"

    @property
    def workdir(self) -> Path:
        """This PDP's working directory (exists only between :meth:`start` and :meth:`stop`)."""
        return self._workdir

    @property
    def stopped(self) -> bool:
        """True before the first :meth:`start` and after :meth:`stop`: the owner does not want it running
        (a supervisor restarts a PDP that died, never one that was stopped)."""
        return self._stopped

    def _prepare_workdir(self) -> None:
        """Sweep the orphans of dead owners, then create this PDP's working directory (mode 700) and
        record its owner (PID and process start time)."""
        _private_dir(self.run_dir, enforce=self._shared_run_dir)
        sweep_orphans(self.run_dir)
        if not self._workdir.exists() and not self._workdir.name.startswith(f"{WORKDIR_PREFIX}{os.getpid()}-"):
            self._workdir = self._new_workdir()  # made before a fork: the name carries the owner's PID
            if self._default_log:
                self.log_path = self._workdir / "pdp.log"
        self._workdir.mkdir(mode=0o700, exist_ok=True)
        fd = _open_private(self._workdir / _OWNER_FILE, os.O_TRUNC)
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()} {_start_ticks(os.getpid())}\n")

    def _write_config(self, grpc_port: int, http_port: int, password: str) -> Path:
        if self._password_hash is None:  # hashed once per ManagedPdp: a restart is not slowed by bcrypt
            self._password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10))
        digest = self._password_hash
        config = _CONFIG.format(http=http_port, grpc=grpc_port, policies=self.policy_dir,
                                password_hash=base64.b64encode(digest).decode(),
                                audit_enabled="true" if self.audit_path else "false",
                                audit_path=self.audit_path or self._workdir / "audit.log")
        path = self._workdir / "cerbos.yaml"
        with os.fdopen(_open_private(path, os.O_TRUNC), "w") as f:
            f.write(config)
        return path

    def start(self, timeout: float = 20.0, *, cancel: threading.Event | None = None, revive: bool = False
              ) -> PdpAddress:
        """Start the server and wait until it is healthy; raises :class:`PolicyUnavailable` if it exits
        (a broken policy set refuses to start) or does not become healthy within ``timeout`` seconds; then
        nothing runs and the working directory is gone (the error carries the log's tail). Starting again
        after a stop (or a crash) serves on the same loopback ports; starting a running server only waits
        until it is healthy. ``cancel`` (a supervisor's stop): once set, nothing is
        launched, and a wait in progress ends with :class:`PolicyUnavailable` (the server stopped).
        ``revive`` (a supervisor's restart): only bring back a server that died; after :meth:`stop` launch
        nothing and raise :class:`PolicyUnavailable` (checked atomically with a concurrent stop).

        Healthy means *this* server answers: the ports it listens on must be held by its own process
        (``/proc``). A port is picked free and released before Cerbos binds it, so another process may take
        it in between (another runtime's PDP starting at the same moment); a first start then picks new
        ports and launches again (at most :data:`PORT_ATTEMPTS` times), a restart on the addresses clients
        hold fails closed (its supervisor tries again). Without the check a runtime could take another
        PDP's health answer for its own and send its checks to a server of other policies."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return self._start_once(timeout, cancel=cancel, revive=revive)
            except _PortTaken as taken:
                with self._lock:
                    fresh = taken.fresh
                    if fresh:
                        self._ports = None  # never handed out: pick others
                if not fresh or attempt == PORT_ATTEMPTS:
                    raise PolicyUnavailable(f"cerbos could not serve on its ports: {taken}") from None
        raise AssertionError("unreachable")  # the loop returns or raises

    def _start_once(self, timeout: float, *, cancel: threading.Event | None, revive: bool) -> PdpAddress:
        binary = cerbos_binary()
        fresh = False
        with self._lock:
            if cancel is not None and cancel.is_set():
                raise PolicyUnavailable("the PDP's start was cancelled")
            if revive and self._stopped:
                raise PolicyUnavailable("the PDP was stopped by its owner; not restarting it")
            running = self.proc
            if running is None or running.poll() is not None:
                self._prepare_workdir()
                if self._ports is None:  # a restart keeps the addresses clients already hold
                    self._ports = (_free_port(), _free_port())
                    fresh = self.address is None
                grpc_port, http_port = self._ports
                config = self._write_config(grpc_port, http_port, self._password)
                argv = [str(binary), "server", f"--config={config}", "--log-level=warn", "--debug-listen-addr="]
                log = os.fdopen(_open_private(self.log_path, os.O_APPEND), "ab")
                try:
                    running = _LAUNCHER.run(lambda: _launch(argv, log, self._workdir))
                finally:
                    log.close()
                self.proc = running
                self.address = PdpAddress(grpc=f"127.0.0.1:{grpc_port}", http=f"http://127.0.0.1:{http_port}",
                                          admin_user="pmw", admin_password=self._password)
            self._stopped = False
            address = self.address
            ports = self._ports
        assert address is not None and ports is not None
        try:
            self._wait_healthy(running, address, timeout, cancel, ports)
        except _PortTaken as taken:
            with self._lock:
                if fresh:
                    self.address = None
                if self.proc is None:
                    shutil.rmtree(self._workdir, ignore_errors=True)
            taken.fresh = fresh
            raise
        except PolicyUnavailable:
            with self._lock:
                if self.proc is None:  # nothing runs: its config (the password's hash) goes too
                    shutil.rmtree(self._workdir, ignore_errors=True)
            raise
        return address

    def _wait_healthy(self, proc: subprocess.Popen[bytes], address: PdpAddress, timeout: float,
                      cancel: threading.Event | None, ports: tuple[int, int]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not proc or (cancel is not None and cancel.is_set()):
                self._terminate(proc)
                raise PolicyUnavailable("the PDP was stopped while it started")
            if (code := proc.poll()) is not None:
                tail = self._log_tail()
                self._terminate(proc)
                if "address already in use" in tail:
                    raise _PortTaken(f"cerbos exited with {code}: a port was taken ({ports})")
                raise PolicyUnavailable(f"cerbos exited with {code}: {tail.strip()}")
            if pdp_healthy(address, timeout_s=0.5):
                holders = [port_holder(proc.pid, port) for port in ports]
                if holders == ["this", "this"]:
                    return
                if "another" in holders:  # what answered may not be this server: never trust it
                    self._terminate(proc)
                    raise _PortTaken(f"another process listens on one of the ports {ports}")
            time.sleep(0.02)
        self._terminate(proc)
        raise PolicyUnavailable(f"cerbos did not become healthy within {timeout} s")

    def _log_tail(self) -> str:
        try:
            with self.log_path.open("rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 2000))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    @property
    def pid(self) -> int | None:
        proc = self.proc
        return proc.pid if proc is not None else None

    def stop(self, *, keep_files: bool = False) -> None:
        """SIGTERM by PID, SIGKILL after 5 s; idempotent. The working directory (config with the admin
        password hash, log) is removed unless ``keep_files`` (a restart keeps it)."""
        with self._lock:
            self._stopped = True
            self._terminate(self.proc)
            if not keep_files:
                shutil.rmtree(self._workdir, ignore_errors=True)

    def _terminate(self, proc: subprocess.Popen[bytes] | None) -> None:
        """Stop ``proc`` by its PID (it is forgotten if it is the current server)."""
        if proc is None:
            return
        with self._lock:
            if self.proc is proc:
                self.proc = None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)  # a stopped (SIGSTOPped) server cannot handle SIGTERM
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)

    def __enter__(self) -> ManagedPdp:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pdp_healthy(address: PdpAddress, *, timeout_s: float = 0.5) -> bool:
    """Does the PDP at ``address`` answer its HTTP health check (200) within ``timeout_s``?"""
    try:
        with urllib.request.urlopen(f"{address.http}/_cerbos/health", timeout=timeout_s) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


__all__ = ["INSTALL_HINT", "PORT_ATTEMPTS", "ManagedPdp", "PdpAddress", "cerbos_binary", "default_run_dir",
           "pdp_healthy", "port_holder", "sweep_orphans"]
