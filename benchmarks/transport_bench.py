"""Transport benchmark: what a call costs in process, over REST and over MCP; how fast a wake is pushed; how
many agent connections one server holds.

Run from the repository root::

    .venv/bin/python -m benchmarks.transport_bench                 # 300 calls each, 200 connections x 60 s
    .venv/bin/python -m benchmarks.transport_bench --ci --json out.json   # small: 30 calls, 20 x 3 s

One run, on loopback only, printed side by side:

1. **Calls**, ``--calls`` times each, sequential, after a warm-up: ``allowed_actions`` (one PDP check) and a
   state compare-and-set (one decided write, expected version = the last one: always succeeds):

   - *in process*: ``runtime.world`` of a world of its own (a SQLite file, its own PDP) in this process;
   - *REST*: ``GET /v1/agents/{id}/allowed-actions`` and ``PUT /v1/state/{key}`` with ``If-Match``, on one
     keep-alive connection (``http.client``) to ``pmw serve``;
   - *MCP*: ``tools/call`` of ``allowed_actions`` and ``compare_and_set_state`` with the official ``mcp``
     client over streamable HTTP to the same server's ``/mcp``;
   - *MCP raw*: the same stateless-era ``tools/call`` requests as plain JSON-RPC over one keep-alive
     ``http.client`` connection (the server's MCP cost without the official client's own CPU).

   With each, the CPU per call of the server process and of the client (``/proc``; less distorted by a
   loaded machine than wall time).

   Median and p99 (ms) of each; target: the transport's overhead (median over REST/MCP minus median in
   process) <= 2 ms.
2. **Push latency**, ``--pushes`` wakes, one at a time: from the wake's ``created_at_us`` (stamped by the
   server just before its commit, so the figure includes the commit) to its arrival on the agent's SSE
   stream (``GET /v1/agents/{id}/wakes/stream``), and to the arrival of the MCP
   ``notifications/resources/updated`` of a client subscribed to the agent's projection. Median and p99;
   target: p99 <= 50 ms.
3. **Connections**: ``--connections`` SSE streams (as many agents, one stream each) opened together and held
   ``--hold`` seconds while a wake is queued for one of them every second; every stream must stay open
   (heartbeats) and the woken ones must get their wake: errors = refused or dropped connections, streams
   ended early, wakes missed. Target: 0 errors.

The server runs without the controller (``--no-controller``: nothing but the benchmark writes). Every
process is stopped by its PID (SIGTERM, bounded wait, SIGKILL after it). The figures depend on the
machine's load (printed): this is a benchmark, never a timed test; it exits 1 only when a step fails (a
call refused, the server not starting), never on a missed target.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

REPO = Path(__file__).resolve().parents[1]
GOVERNOR = "gov"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 60.0
OVERHEAD_TARGET_MS = 2.0
PUSH_TARGET_MS = 50.0
OWN_ENV = ("PMW_ACTOR", "PMW_SERVER", "PMW_TOKEN", "PMW_DB_URL", "PMW_ARTIFACT_DIR", "PMW_CREDENTIALS",
           "PMW_PDP_ADDRESS", "PMW_PDP_ADMIN_USER", "PMW_PDP_ADMIN_PASSWORD")


#: CPU per call of each transport's timed calls (filled by the bench_* functions of one run)
CPU: dict[str, dict[str, float]] = {}


class BenchmarkFailed(RuntimeError):
    """A step did not do what it must (a call refused, the server not listening)."""


@dataclass
class Samples:
    """Latencies in seconds."""

    values: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.values.append(seconds)

    def median_ms(self) -> float | None:
        return statistics.median(self.values) * 1000 if self.values else None

    def p99_ms(self) -> float | None:
        if not self.values:
            return None
        ordered = sorted(self.values)
        return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)] * 1000  # nearest rank

    def summary(self) -> dict[str, float | int | None]:
        return {"n": len(self.values), "median_ms": self.median_ms(), "p99_ms": self.p99_ms()}


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU of the calling process (the client) and of the server process over a stretch of calls: what a call
    costs in CPU, which a loaded machine distorts far less than wall time."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.client0 = time.process_time()
        self.server0 = process_cpu_s(server_pid) if server_pid is not None else 0.0

    def per_call_ms(self, calls: int) -> dict[str, float]:
        client = (time.process_time() - self.client0) * 1000 / calls
        server = ((process_cpu_s(self.server_pid) - self.server0) * 1000 / calls
                  if self.server_pid is not None else 0.0)
        return {"client_cpu_ms": client, "server_cpu_ms": server}


def timed(samples: Samples, call: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    value = call()
    samples.add(time.perf_counter() - started)
    return value


# -- the world in process ------------------------------------------------------------------------------------

def paired_rounds(column: str, calls: int, warmup: int, server_pid: int | None,
                  read: Callable[[], object], write: Callable[[int], object]) -> dict[str, Samples]:
    """``warmup + calls`` rounds of one ``allowed_actions`` (``read()``) then one compare-and-set
    (``write(n)``), each timed; the first ``warmup`` rounds are not kept. The CPU of the measured rounds (this
    process's and the server's) goes to ``CPU[column]``. ``read`` and ``write`` raise on a wrong answer."""
    out = {"allowed_actions": Samples(), "compare_and_set_state": Samples()}
    meter: CpuMeter | None = None
    for n in range(warmup + calls):
        keep = n >= warmup
        if n == warmup:
            meter = CpuMeter(server_pid)
        started = time.perf_counter()
        read()
        if keep:
            out["allowed_actions"].add(time.perf_counter() - started)
        started = time.perf_counter()
        write(n)
        if keep:
            out["compare_and_set_state"].add(time.perf_counter() - started)
    assert meter is not None
    CPU[column] = meter.per_call_ms(2 * calls)
    return out


def bench_in_process(root: Path, calls: int, warmup: int) -> dict[str, Samples]:
    """``allowed_actions`` and a compare-and-set on an embedded world of its own (its own PDP)."""
    from engine.runtime import Runtime
    from engine.settings import load_settings

    data = root / "in-process"
    data.mkdir()
    settings = load_settings(db_url=f"sqlite:///{data / 'world.db'}", artifact_dir=str(data / "artifacts"))
    with Runtime.open(settings) as runtime:
        runtime.book.bootstrap_governor(GOVERNOR, "Governor", term_key="t-gov")
        world = runtime.world
        world.activate_session("term:t-gov")
        world.register_agent("alice", "Alice", "worker", "t-alice")
        world.activate_session("term:t-alice")
        world.grant(GOVERNOR, "alice", capabilities=["state.write"])
        version = world.compare_and_set_state("alice", "plan", 0, {"n": 0}).version

        def write(n: int) -> None:
            nonlocal version
            version = world.compare_and_set_state("alice", "plan", version, {"n": n}).version

        return paired_rounds("in_process", calls, warmup, None,
                             lambda: world.allowed_actions("alice", "state", "plan"), write)


# -- the server ------------------------------------------------------------------------------------------------

def base_env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OWN_ENV}
    env["PMW_DB_URL"] = f"sqlite:///{data / 'world.db'}"
    env["PMW_ARTIFACT_DIR"] = str(data / "artifacts")
    env["PMW_CREDENTIALS"] = str(data.parent / "no-credentials.json")
    env["PYTHONPATH"] = str(REPO)
    return env


class Server:
    """``pmw serve --port 0 --no-controller`` on a fresh world, as a subprocess; stopped by its PID."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "served"
        self.data.mkdir()
        self.env = base_env(self.data)
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.governor_token = ""
        #: how ``pmw`` is started (PMW_BENCH_PMW: another command line, for experiments on the server)
        self.command = os.environ.get("PMW_BENCH_PMW", "").split() or [sys.executable, "-m", "engine.cli"]

    def start(self) -> None:
        done = subprocess.run([sys.executable, "-m", "engine.cli", "--json", "init", "--governor", GOVERNOR,
                               "--name", "Governor", "--term", "t-gov"], env=self.env, cwd=self.root,
                              capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise BenchmarkFailed(f"pmw init failed: {done.stderr[-2000:]}")
        self.governor_token = json.loads(done.stdout)["token"]
        err = (self.root / "serve.err").open("ab")
        try:
            self.proc = subprocess.Popen(
                [*self.command, "--as", GOVERNOR, "serve", "--port", "0", "--no-controller"],
                env=self.env, cwd=self.root, stdout=subprocess.PIPE, stderr=err, text=True)
        finally:
            err.close()
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        deadline = time.monotonic() + START_TIMEOUT_S
        line = ""
        while not line.endswith("\n"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise BenchmarkFailed(f"pmw serve did not start: {(self.root / 'serve.err').read_text()[-2000:]}")
            line += self.proc.stdout.readline() or ""
            time.sleep(0.02)
        self.url = json.loads(line)["url"]

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()

    def call(self, token: str, name: str, **arguments: Any) -> Any:
        from engine.client.http import ServerClient

        return ServerClient(self.url, token, timeout_s=CALL_TIMEOUT_S).call("world", name, (), arguments,
                                                                            rebuild=False)

    def add_agent(self, agent_id: str, capabilities: list[str]) -> str:
        """Register and activate ``agent_id``, grant it ``capabilities``; a token for it."""
        gov = self.governor_token
        self.call(gov, "register_agent", agent_id=agent_id, display_name=agent_id, role_id="worker",
                  term_key=f"t-{agent_id}", actor=GOVERNOR)
        self.call(gov, "activate_session", target=f"term:t-{agent_id}", actor=GOVERNOR)
        if capabilities:
            self.call(gov, "grant", agent_id=agent_id, capabilities=capabilities, actor=GOVERNOR)
        return str(self.call(gov, "issue_token", agent_id=agent_id, actor=GOVERNOR)["token"])


class Rest:
    """One keep-alive connection to the server, as ``token``."""

    def __init__(self, url: str, token: str) -> None:
        self.netloc = urllib.parse.urlsplit(url).netloc
        self.token = token
        self.conn = http.client.HTTPConnection(self.netloc, timeout=CALL_TIMEOUT_S)

    def send(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
             ) -> tuple[int, http.client.HTTPResponse, Any]:
        head = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            head["Content-Type"] = "application/json"
        self.conn.request(method, path, body=data, headers=head)
        response = self.conn.getresponse()
        raw = response.read()
        return response.status, response, json.loads(raw) if raw else None

    def close(self) -> None:
        self.conn.close()


def bench_rest(server: Server, token: str, calls: int, warmup: int) -> dict[str, Samples]:
    rest = Rest(server.url, token)
    try:
        status, response, answer = rest.send("PUT", "/v1/state/plan", {"value": {"n": 0}}, {"If-None-Match": "*"})
        if status not in (200, 201):
            raise BenchmarkFailed(f"REST PUT /v1/state/plan: {status} {answer}")
        etag = response.getheader("ETag") or '"1"'

        def read() -> None:
            status, _, answer = rest.send("GET", "/v1/agents/alice/allowed-actions?kind=state&ident=plan")
            if status != 200:
                raise BenchmarkFailed(f"REST allowed-actions: {status} {answer}")

        def write(n: int) -> None:
            nonlocal etag
            status, response, answer = rest.send("PUT", "/v1/state/plan", {"value": {"n": n}}, {"If-Match": etag})
            if status != 200:
                raise BenchmarkFailed(f"REST PUT /v1/state/plan: {status} {answer}")
            etag = response.getheader("ETag") or f'"{int(etag.strip(chr(34))) + 1}"'

        return paired_rounds("rest", calls, warmup, server.proc.pid if server.proc is not None else None, read, write)
    finally:
        rest.close()


def mcp_available(server: Server) -> bool:
    """Whether the server answers at ``/mcp`` (not the 404 problem of an unmounted route)."""
    rest = Rest(server.url, "none")
    try:
        status, _, _ = rest.send("GET", "/mcp")
        return status != 404
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        rest.close()


@contextlib.asynccontextmanager
async def mcp_client(server: Server, token: str, **client_args: Any) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=CALL_TIMEOUT_S) as http, \
            Client(streamable_http_client(server.url + "/mcp", http_client=http), **client_args) as client:
        yield client


def bench_mcp(server: Server, token: str, calls: int, warmup: int) -> dict[str, Samples]:
    out = {"allowed_actions": Samples(), "compare_and_set_state": Samples()}

    async def main() -> None:
        async with mcp_client(server, token) as client:
            result = await client.call_tool("compare_and_set_state", {"key": "mcp-plan", "expected_version": 0,
                                                                       "value": {"n": 0}})
            if result.is_error:
                raise BenchmarkFailed(f"MCP compare_and_set_state: {result.structured_content}")
            version = int((result.structured_content or {})["version"])
            meter: CpuMeter | None = None
            for n in range(warmup + calls):
                keep = n >= warmup
                if n == warmup:
                    meter = CpuMeter(server.proc.pid if server.proc is not None else None)
                started = time.perf_counter()
                result = await client.call_tool("allowed_actions", {"kind": "state", "ident": "mcp-plan"})
                if keep:
                    out["allowed_actions"].add(time.perf_counter() - started)
                if result.is_error:
                    raise BenchmarkFailed(f"MCP allowed_actions: {result.structured_content}")
                started = time.perf_counter()
                result = await client.call_tool("compare_and_set_state", {
                    "key": "mcp-plan", "expected_version": version, "value": {"n": n}})
                if keep:
                    out["compare_and_set_state"].add(time.perf_counter() - started)
                if result.is_error:
                    raise BenchmarkFailed(f"MCP compare_and_set_state: {result.structured_content}")
                version = int((result.structured_content or {})["version"])
            assert meter is not None
            CPU["mcp"] = meter.per_call_ms(2 * calls)
    asyncio.run(main())
    return out


class RawMcp:
    """MCP's stateless era (2026-07-28) as plain JSON-RPC over one keep-alive ``http.client`` connection: the
    same server path as the official client's requests, without that client's own CPU (the REST column's
    client is as plain), so the MCP column's overhead can be read as the server's and the protocol's."""

    META: ClassVar[dict[str, Any]] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                      "io.modelcontextprotocol/clientInfo": {"name": "pmw-transport-bench",
                                                                             "version": "1"},
                                      "io.modelcontextprotocol/clientCapabilities": {}}

    def __init__(self, url: str, token: str) -> None:
        self.netloc = urllib.parse.urlsplit(url).netloc
        self.conn = http.client.HTTPConnection(self.netloc, timeout=CALL_TIMEOUT_S)
        self.head = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
                     "Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28",
                     "MCP-Method": "tools/call"}
        self.ids = 0

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments, "_meta": self.META}}).encode()
        self.conn.request("POST", "/mcp", body=body, headers={**self.head, "MCP-Name": name})
        response = self.conn.getresponse()
        raw = response.read()
        if response.status != 200 or not response.getheader("Content-Type", "").startswith("application/json"):
            raise BenchmarkFailed(f"raw MCP {name}: {response.status} {raw[:300]!r}")
        answer = json.loads(raw)
        result = answer.get("result")
        if not isinstance(result, dict) or result.get("isError"):
            raise BenchmarkFailed(f"raw MCP {name}: {answer}")
        return dict(result.get("structuredContent") or {})

    def close(self) -> None:
        self.conn.close()


def bench_mcp_raw(server: Server, token: str, calls: int, warmup: int) -> dict[str, Samples]:
    raw = RawMcp(server.url, token)
    try:
        version = int(raw.call_tool("compare_and_set_state", {"key": "raw-plan", "expected_version": 0,
                                                              "value": {"n": 0}})["version"])

        def write(n: int) -> None:
            nonlocal version
            version = int(raw.call_tool("compare_and_set_state", {"key": "raw-plan", "expected_version": version,
                                                                  "value": {"n": n}})["version"])

        return paired_rounds("mcp_raw", calls, warmup, server.proc.pid if server.proc is not None else None,
                             lambda: raw.call_tool("allowed_actions", {"kind": "state", "ident": "raw-plan"}), write)
    finally:
        raw.close()


# -- push -------------------------------------------------------------------------------------------------------

class SseReader:
    """One raw SSE stream on a thread of its own: when each wake arrived (wall clock)."""

    def __init__(self, url: str, token: str, agent: str) -> None:
        self.conn = http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=CALL_TIMEOUT_S)
        self.conn.request("GET", f"/v1/agents/{agent}/wakes/stream",
                          headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"})
        self.response = self.conn.getresponse()
        if self.response.status != 200:
            raise BenchmarkFailed(f"SSE stream: HTTP {self.response.status}: {self.response.read()[:500]!r}")
        self.arrived: dict[str, float] = {}
        self.ready = threading.Event()
        self.changed = threading.Condition()
        self.error: str | None = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        from engine.client.sse import parse_events

        try:
            for event in parse_events(iter(self.response.readline, b"")):
                if event.event == "ready":
                    self.ready.set()
                elif event.event == "wake":
                    at = time.time()
                    with self.changed:
                        self.arrived[str(event.json()["wake_id"])] = at
                        self.changed.notify_all()
                elif event.event == "end":
                    self.error = event.data
                    return
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if not self.error:
                self.error = f"{type(exc).__name__}: {exc}"

    def wait_for(self, wake_id: str, timeout_s: float) -> float | None:
        with self.changed:
            self.changed.wait_for(lambda: wake_id in self.arrived, timeout_s)
            return self.arrived.get(wake_id)

    def close(self) -> None:
        self.error = self.error or "closed"
        sock = self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(2)  # the reader thread's readline returns
        self.thread.join(5)
        self.conn.close()


def enqueue(rest: Rest, target: str, key: str) -> dict[str, Any]:
    status, _, answer = rest.send("POST", "/v1/world/enqueue_wake", {"arguments": {
        "target_agent": target, "cause": "bench", "idempotency_key": key}})
    if status != 200:
        raise BenchmarkFailed(f"enqueue_wake: {status} {answer}")
    return dict(answer["result"]["wake"])


def bench_push_sse(server: Server, alice: str, boss: str, pushes: int) -> tuple[Samples, int]:
    """Commit -> SSE arrival for ``pushes`` wakes, one at a time; (samples, wakes missed)."""
    samples, missed = Samples(), 0
    reader = SseReader(server.url, alice, "alice")
    rest = Rest(server.url, boss)
    try:
        if not reader.ready.wait(CALL_TIMEOUT_S):
            raise BenchmarkFailed("the SSE stream did not get ready")
        for n in range(pushes):
            wake = enqueue(rest, "alice", f"sse-{n}")
            arrived = reader.wait_for(str(wake["wake_id"]), 5.0)
            if arrived is None:
                missed += 1
                continue
            samples.add(max(0.0, arrived - int(wake["created_at_us"]) / 1e6))
            time.sleep(0.01)
    finally:
        rest.close()
        reader.close()
    return samples, missed


def bench_push_mcp(server: Server, alice: str, boss: str, pushes: int) -> tuple[Samples, int]:
    """Commit -> MCP ``notifications/resources/updated`` for ``pushes`` wakes, one at a time."""
    import warnings

    import mcp_types as types
    from mcp.shared.exceptions import MCPDeprecationWarning

    samples, missed = Samples(), 0
    arrivals: asyncio.Queue[float] = asyncio.Queue()

    async def handler(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            arrivals.put_nowait(time.time())

    async def main() -> None:
        nonlocal missed
        rest = Rest(server.url, boss)
        try:
            async with mcp_client(server, alice, mode="legacy", message_handler=handler) as client:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await client.subscribe_resource("pmw://agents/alice/projection")
                await asyncio.sleep(0.2)
                for n in range(pushes):
                    while not arrivals.empty():
                        arrivals.get_nowait()
                    wake = await asyncio.to_thread(enqueue, rest, "alice", f"mcp-{n}")
                    try:
                        arrived = await asyncio.wait_for(arrivals.get(), 5.0)
                    except TimeoutError:
                        missed += 1
                        continue
                    samples.add(max(0.0, arrived - int(wake["created_at_us"]) / 1e6))
                    await asyncio.sleep(0.01)
        finally:
            rest.close()
    asyncio.run(main())
    return samples, missed


# -- connections -------------------------------------------------------------------------------------------------

@dataclass
class HoldResult:
    connections: int
    hold_s: float
    opened: int = 0
    errors: list[str] = field(default_factory=list)
    wakes_sent: int = 0
    wakes_received: int = 0

    def summary(self) -> dict[str, Any]:
        return {"connections": self.connections, "hold_s": self.hold_s, "opened": self.opened,
                "errors": len(self.errors), "first_errors": self.errors[:5], "wakes_sent": self.wakes_sent,
                "wakes_received": self.wakes_received}


def bench_connections(server: Server, boss: str, connections: int, hold_s: float) -> HoldResult:
    """``connections`` SSE streams (one agent each) held ``hold_s`` seconds; one wake a second to one of them."""
    result = HoldResult(connections, hold_s)
    tokens = {f"c{n:03d}": server.add_agent(f"c{n:03d}", []) for n in range(connections)}
    host, _, port = urllib.parse.urlsplit(server.url).netloc.rpartition(":")
    expected: dict[str, set[str]] = {agent: set() for agent in tokens}
    received: dict[str, set[str]] = {agent: set() for agent in tokens}

    async def stream(agent: str, token: str, opened: asyncio.Queue[str]) -> None:
        """One stream until cancelled (the end of the hold); anything else that ends it is an error."""
        from engine.client.sse import parse_events

        try:
            reader, writer = await asyncio.open_connection(host, int(port))
        except OSError as exc:
            result.errors.append(f"{agent}: connect: {exc}")
            await opened.put(agent)
            return
        try:
            writer.write((f"GET /v1/agents/{agent}/wakes/stream HTTP/1.1\r\nHost: {host}:{port}\r\n"
                          f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n").encode())
            await writer.drain()
            status = await asyncio.wait_for(reader.readline(), CALL_TIMEOUT_S)
            chunked = False
            while (header := await asyncio.wait_for(reader.readline(), CALL_TIMEOUT_S)).strip():
                chunked = chunked or header.lower().replace(b" ", b"") == b"transfer-encoding:chunked\r\n"
            if b" 200 " not in status:
                result.errors.append(f"{agent}: {status!r}")
                await opened.put(agent)
                return
            result.opened += 1
            await opened.put(agent)
            pending = b""
            while True:
                if chunked:
                    size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                    data = await reader.readexactly(size + 2) if size else b""
                    data = data[:-2]
                else:
                    data = await reader.read(65536)
                if not data:
                    result.errors.append(f"{agent}: the server closed the stream")
                    return
                pending += data
                *complete, pending = pending.split(b"\n\n")
                for event in parse_events(line + b"\n" for block in complete for line in [*block.split(b"\n"), b""]):
                    if event.event == "wake":
                        received[agent].add(str(event.json()["wake_id"]))
                    elif event.event == "end":
                        result.errors.append(f"{agent}: ended: {event.data}")
                        return
        except asyncio.CancelledError:
            pass  # the hold is over
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
            result.errors.append(f"{agent}: {type(exc).__name__}: {exc}")
        finally:
            writer.close()

    async def main() -> None:
        opened: asyncio.Queue[str] = asyncio.Queue()
        tasks = []
        for agent, token in tokens.items():  # opened a few at a time (the listen backlog is 128)
            tasks.append(asyncio.create_task(stream(agent, token, opened)))
            if len(tasks) % 20 == 0:
                await asyncio.sleep(0.05)
        for _ in tasks:
            await asyncio.wait_for(opened.get(), CALL_TIMEOUT_S * 2)
        rest = Rest(server.url, boss)
        try:
            agents = list(tokens)
            started = time.monotonic()
            n = 0
            while time.monotonic() - started < hold_s:
                target = agents[n % len(agents)]
                wake = await asyncio.to_thread(enqueue, rest, target, f"hold-{n}")
                expected[target].add(str(wake["wake_id"]))
                result.wakes_sent += 1
                n += 1
                await asyncio.sleep(max(0.0, min(1.0, hold_s - (time.monotonic() - started))))
            await asyncio.sleep(2.0)  # the last wake's push
        finally:
            rest.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    asyncio.run(main())
    for agent, wakes in expected.items():
        missing = wakes - received[agent]
        result.wakes_received += len(wakes & received[agent])
        if missing:
            result.errors.append(f"{agent}: missed {len(missing)} wake(s)")
    return result


# -- the report -------------------------------------------------------------------------------------------------

def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:8.2f}"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "MISS")


def report(figures: dict[str, Any]) -> str:
    lines = [f"transport benchmark ({figures['calls']} calls each; load average {figures['load']})", "",
             f"{'call':<24}{'':>4}{'in process':>12}{'REST':>12}{'MCP':>12}{'MCP raw':>12}   (ms)"]
    calls = figures["call_latency"]
    for name in ("allowed_actions", "compare_and_set_state"):
        for stat in ("median_ms", "p99_ms"):
            row = [calls.get(t, {}).get(name, {}).get(stat) for t in ("in_process", "rest", "mcp", "mcp_raw")]
            lines.append(f"{name:<24}{stat[:-3]:>6}  {fmt(row[0]):>10}  {fmt(row[1]):>10}  {fmt(row[2]):>10}"
                         f"  {fmt(row[3]):>10}")
    cpu = figures.get("cpu_per_call_ms", {})
    if cpu:
        lines.append("")
        lines.append(f"{'CPU per call (ms)':<28}{'in process':>12}{'REST':>12}{'MCP':>12}{'MCP raw':>12}")
        for side in ("server_cpu_ms", "client_cpu_ms"):
            row = [cpu.get(t, {}).get(side) for t in ("in_process", "rest", "mcp", "mcp_raw")]
            if side == "server_cpu_ms":
                row[0] = None
            label = "server (pmw serve)" if side == "server_cpu_ms" else "client (this process)"
            lines.append(f"{label:<28}{fmt(row[0]):>12}{fmt(row[1]):>12}{fmt(row[2]):>12}{fmt(row[3]):>12}")
    lines.append("")
    for transport, over in figures["overhead_ms"].items():
        for name, ms in over.items():
            ok = None if ms is None else ms <= OVERHEAD_TARGET_MS
            lines.append(f"overhead {transport:<7} {name:<24} {fmt(ms)} ms median  "
                         f"(target <= {OVERHEAD_TARGET_MS} ms) {verdict(ok)}")
    lines.append("")
    for name, push in figures["push"].items():
        p99 = push.get("p99_ms")
        ok = None if p99 is None else (p99 <= PUSH_TARGET_MS and push.get("missed", 0) == 0)
        lines.append(f"push {name:<20} median {fmt(push.get('median_ms'))} ms  p99 {fmt(p99)} ms  "
                     f"missed {push.get('missed', '-')} of {push.get('sent', '-')}  "
                     f"(target p99 <= {PUSH_TARGET_MS} ms) {verdict(ok)}")
    hold = figures.get("connections")
    if hold:
        lines.append("")
        lines.append(f"connections {hold['opened']}/{hold['connections']} SSE streams held {hold['hold_s']} s: "
                     f"{hold['errors']} errors, wakes {hold['wakes_received']}/{hold['wakes_sent']} "
                     f"(target 0 errors) {verdict(hold['errors'] == 0 and hold['opened'] == hold['connections'])}")
        for error in hold["first_errors"]:
            lines.append(f"  {error}")
    for note in figures["notes"]:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def overhead(calls: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, float | None]]:
    base = calls.get("in_process", {})
    out: dict[str, dict[str, float | None]] = {}
    for transport in ("rest", "mcp", "mcp_raw"):
        if transport not in calls:
            continue
        out[transport] = {}
        for name, summary in calls[transport].items():
            mine, theirs = summary.get("median_ms"), base.get(name, {}).get("median_ms")
            out[transport][name] = None if mine is None or theirs is None else mine - theirs
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    notes: list[str] = []
    figures: dict[str, Any] = {"calls": args.calls, "load": " ".join(f"{v:.2f}" for v in os.getloadavg()),
                               "call_latency": {}, "push": {}, "notes": notes}
    with tempfile.TemporaryDirectory(prefix="pmw-transport-bench-") as tmp:
        root = Path(tmp)
        inproc = bench_in_process(root, args.calls, args.warmup)
        figures["call_latency"]["in_process"] = {k: v.summary() for k, v in inproc.items()}
        server = Server(root)
        server.start()
        try:
            alice = server.add_agent("alice", ["state.write"])
            boss = server.add_agent("boss", ["wake.enqueue"])
            rest = bench_rest(server, alice, args.calls, args.warmup)
            figures["call_latency"]["rest"] = {k: v.summary() for k, v in rest.items()}
            has_mcp = mcp_available(server)
            if has_mcp:
                mcp = bench_mcp(server, alice, args.calls, args.warmup)
                figures["call_latency"]["mcp"] = {k: v.summary() for k, v in mcp.items()}
                raw = bench_mcp_raw(server, alice, args.calls, args.warmup)
                figures["call_latency"]["mcp_raw"] = {k: v.summary() for k, v in raw.items()}
            else:
                notes.append("/mcp is not served by this build: MCP not measured")
            sse, missed = bench_push_sse(server, alice, boss, args.pushes)
            figures["push"]["sse"] = {**sse.summary(), "missed": missed, "sent": args.pushes}
            if has_mcp:
                note, missed = bench_push_mcp(server, alice, boss, args.pushes)
                figures["push"]["mcp_notification"] = {**note.summary(), "missed": missed, "sent": args.pushes}
            if args.connections > 0:
                figures["connections"] = bench_connections(server, boss, args.connections, args.hold).summary()
        finally:
            server.stop()
    figures["overhead_ms"] = overhead(figures["call_latency"])
    figures["cpu_per_call_ms"] = dict(CPU)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls of each kind per transport")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--pushes", type=int, default=100, help="wakes whose push latency is measured")
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--hold", type=float, default=60.0, help="seconds the connections are held")
    parser.add_argument("--ci", action="store_true", help="small: 30 calls, 10 pushes, 20 connections x 3 s")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.ci:
        args.calls, args.warmup, args.pushes, args.connections, args.hold = 30, 5, 10, 20, 3.0
    try:
        figures = run(args)
    except BenchmarkFailed as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    print(report(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["BenchmarkFailed", "Samples", "main", "report", "run"]
