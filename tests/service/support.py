"""What the ``pmw serve`` tests share: a server started as a real subprocess on a temporary world, CLI
clients as real subprocesses, and the Python client.

:class:`Served` runs ``pmw init --governor gov`` (its first token comes back once, on stdout), then
``pmw --as gov serve --port 0`` (one JSON line with the URL once it listens), and stops the server by its
PID with SIGTERM (SIGKILL only if it does not stop within the bound). Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from click.testing import Result

from engine.client.http import ServerClient
from tests.cli_support import CLEAN_ENV, REPO, invoke, require_cerbos
from tests.conftest import SHARED_PDP_TIMEOUT_S

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
GOVERNOR = "gov"


def base_env(data: Path, **extra: str | None) -> dict[str, str]:
    """The environment of a ``pmw`` process on the world in ``data`` (nothing inherited that names another
    world, PDP, actor, server or token). Its PDP decides with the shared test client's deadline
    (``SHARED_PDP_TIMEOUT_S``), not the 2 s default, unless ``extra`` sets ``PMW_PDP_TIMEOUT_S``: a served
    world's test is about what is decided, on a busy 2-core machine where a decision was seen to miss 2 s."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PMW_")}
    env.update({k: v for k, v in CLEAN_ENV.items() if v is not None})
    env["PMW_PDP_TIMEOUT_S"] = str(SHARED_PDP_TIMEOUT_S)
    env["PMW_DB_URL"] = f"sqlite:///{data / 'world.db'}"
    env["PMW_CREDENTIALS"] = str(data.parent / "no-credentials.json")
    env["PYTHONPATH"] = str(REPO)
    return overridden(env, **extra)


def overridden(env: dict[str, str], **extra: str | None) -> dict[str, str]:
    """A copy of ``env`` with ``extra`` set (a ``None`` value: the variable removed)."""
    env = dict(env)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def pmw(args: Sequence[str], env: dict[str, str], *, cwd: Path, timeout: float = 120.0,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """One ``pmw`` process (``python -m engine.cli``), its output captured."""
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, input=stdin, check=False)


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.05) -> float:
    """Poll ``predicate`` until true; the seconds it took. ``AssertionError`` naming ``what`` on timeout."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(interval_s)
    return time.monotonic() - started


class Served:
    """A world in ``root/data`` served by ``pmw serve`` (a subprocess), with the governor's token."""

    def __init__(self, root: Path, *, serve_args: Sequence[str] = (), env: dict[str, str | None] | None = None
                 ) -> None:
        require_cerbos()
        self.root = root
        self.data = root / "data"
        self.env = base_env(self.data, **(env or {}))
        self.serve_args = list(serve_args)
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.info: dict[str, Any] = {}
        self.governor_token = ""

    def init(self) -> None:
        """``pmw init --governor gov`` on the data directory, in this process (the server is the process
        under test, not its set-up); keeps the governor's token it shows once."""
        env: dict[str, str | None] = {k: v for k, v in self.env.items() if k.startswith("PMW_")}
        done = invoke(None, "--json", "init", "--governor", GOVERNOR, "--name", "Gov", "--term", "t-gov", env=env)
        assert done.exit_code == 0, (done.stdout, done.stderr)
        self.governor_token = json.loads(done.stdout)["token"]

    def start(self) -> Served:
        if not self.governor_token:
            self.init()
        with (self.root / "serve.err").open("ab") as err:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "engine.cli", "--as", GOVERNOR, "serve", "--port", "0", *self.serve_args],
                env=self.env, cwd=self.root, stdout=subprocess.PIPE, stderr=err, text=True)
        line = self._first_line()
        self.info = json.loads(line)
        self.url = self.info["url"]
        return self

    def _first_line(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        os.set_blocking(self.proc.stdout.fileno(), False)
        buffer = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"pmw serve exited with {self.proc.returncode}: {self.stderr()}")
            chunk = self.proc.stdout.readline()
            buffer += chunk or ""
            if buffer.endswith("\n"):
                return buffer
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"pmw serve did not listen within {START_TIMEOUT_S} s: {self.stderr()}")

    def stderr(self) -> str:
        path = self.root / "serve.err"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def client(self, token: str | None) -> ServerClient:
        return ServerClient(self.url, token, timeout_s=60.0)

    def cli(self, token: str | None, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """A CLI client process against the server (``PMW_SERVER``), with ``token`` as ``PMW_TOKEN``."""
        env = dict(self.env)
        env["PMW_SERVER"] = self.url
        if token is not None:
            env["PMW_TOKEN"] = token
        return pmw(args, env, cwd=self.root, stdin=stdin)

    def cli_in_process(self, token: str | None, *args: str) -> Result:
        """The same CLI client call as :meth:`cli`, run in this process (typer's runner: no interpreter start,
        ~1-2 s less a call) with the same PMW_ environment: for set-up that is not about the client process."""
        env: dict[str, str | None] = {k: v for k, v in self.env.items() if k.startswith("PMW_")}
        env.update(PMW_SERVER=self.url, PMW_TOKEN=token)
        return invoke(None, *args, env=env)

    def issue(self, agent_id: str, *extra: str) -> str:
        """A new token for ``agent_id`` (issued by the governor through the server, by ``pmw tokens issue`` as
        a client in this process)."""
        done = self.cli_in_process(self.governor_token, "--json", "tokens", "issue", agent_id, *extra)
        assert done.exit_code == 0, (done.stdout, done.stderr)
        return str(json.loads(done.stdout)["token"])

    def add_agent(self, agent_id: str, capabilities: Sequence[str] = ()) -> str:
        """Register ``agent_id`` (active) and grant it ``capabilities``, all as the governor over the API;
        returns a token for it."""
        gov = self.client(self.governor_token).call
        gov("world", "register_agent", (), {"agent_id": agent_id, "display_name": agent_id.title(),
                                            "role_id": "worker", "term_key": f"t-{agent_id}", "actor": GOVERNOR})
        gov("world", "activate_session", (), {"target": f"term:t-{agent_id}", "actor": GOVERNOR})
        if capabilities:
            gov("world", "grant", (), {"agent_id": agent_id, "capabilities": list(capabilities),
                                       "actor": GOVERNOR})
        return self.issue(agent_id)

    def health(self) -> dict[str, Any]:
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(self.url + "/v1/health", timeout=5) as response:
                return dict(json.loads(response.read()))
        except urllib.error.HTTPError as exc:  # 503: degraded, with the same report
            try:
                return dict(json.loads(exc.read()))
            finally:
                exc.close()

    def stop(self) -> int | None:
        """SIGTERM by PID, bounded wait (SIGKILL after it); the exit code."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
                raise AssertionError(f"pmw serve did not stop on SIGTERM within {STOP_TIMEOUT_S} s") from None
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode

    def __enter__(self) -> Served:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def secret_anywhere(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes contain ``needle`` (the data directory, WAL and logs included)."""
    found = []
    raw = needle.encode()
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if raw in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found
