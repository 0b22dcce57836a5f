"""``pmw mcp`` over stdio (a real subprocess), driven by the official MCP Python client: against a running
``pmw serve`` (remote) and on an embedded world (its own PDP), the same generated tools, calls answering
structured content, PMW's error codes, a wake notification on the embedded world, nothing but JSON-RPC on
stdout, and no token refused before anything is served."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from engine.service.mcp_tools import TOOLS
from tests.cli_support import REPO
from tests.service.support import GOVERNOR, Served, overridden

T = TypeVar("T")
TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("mcp-stdio-remote")) as server:
        yield server


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Served:
    """A world initialised by ``pmw init`` and never served: ``pmw mcp`` opens it itself."""
    world = Served(tmp_path_factory.mktemp("mcp-stdio-embedded"))
    world.init()
    return world


def stdio_env(world: Served, **extra: str | None) -> dict[str, str]:
    return overridden(world.env, **extra)


def with_stdio(env: dict[str, str], work: Callable[[Client], Awaitable[T]], **client_args: Any) -> T:
    params = StdioServerParameters(command=sys.executable, args=["-m", "engine.cli", "mcp"], env=env, cwd=str(REPO))

    async def main() -> T:
        with anyio.fail_after(TIMEOUT_S):
            async with Client(params, **client_args) as client:
                return await work(client)
    return anyio.run(main)


async def _tools_and_calls(client: Client) -> tuple[set[str], Any, Any, Any]:
    tools = {t.name for t in (await client.list_tools()).tools}
    wrote = await client.call_tool("compare_and_set_state", {"key": "stdio", "expected_version": 0, "value": 1})
    stale = await client.call_tool("compare_and_set_state", {"key": "stdio", "expected_version": 0, "value": 2})
    listed = await client.call_tool("list_agents", {})
    return tools, wrote, stale, listed


def _check(tools: set[str], wrote: Any, stale: Any, listed: Any) -> None:
    assert tools == set(TOOLS)
    assert not wrote.is_error and wrote.structured_content["version"] == 1
    assert stale.is_error and stale.structured_content["code"] == "already_exists"
    assert stale.structured_content["exit_code"] == 5
    assert any(a["agent_id"] == GOVERNOR for a in listed.structured_content["result"])


def test_remote_stdio_serves_the_tools_through_the_server(served: Served) -> None:
    token = served.add_agent("ann", ["state.write", "artifact.write", "task.create"])
    env = stdio_env(served, PMW_SERVER=served.url, PMW_TOKEN=token)
    _check(*with_stdio(env, _tools_and_calls))
    state = served.client(served.governor_token).call("world", "get_state", ("stdio",), {"actor": GOVERNOR})
    assert state.version == 1 and state.value == 1  # written on the server's world, as ann

    async def more(client: Client) -> tuple[Any, Any, Any, Any, Any]:
        made = await client.call_tool("register_artifact", {"artifact_type": "note", "content": "über"})
        read = await client.call_tool("read_artifact", {"artifact_id": made.structured_content["artifact_id"]})
        first = await client.call_tool("create_task", {"goal": "once"}, meta={"pmw/op_id": "stdio-op"})  # type: ignore[arg-type]
        again = await client.call_tool("create_task", {"goal": "once"}, meta={"pmw/op_id": "stdio-op"})  # type: ignore[arg-type]
        as_other = await client.call_tool("compare_and_set_state",
                                          {"key": "x", "expected_version": 0, "value": 1, "actor": GOVERNOR})
        return made, read, first, again, as_other
    made, read, first, again, as_other = with_stdio(env, more)
    assert not made.is_error and not read.is_error, (made.structured_content, read.structured_content)
    assert read.structured_content["content"] == "über"
    assert read.structured_content["artifact"]["checksum"] == made.structured_content["checksum"]
    assert not first.is_error and first.structured_content == again.structured_content
    assert as_other.is_error and as_other.structured_content["code"] == "not_permitted"


def test_embedded_stdio_serves_the_tools_on_its_own_world(embedded: Served) -> None:
    env = stdio_env(embedded, PMW_TOKEN=embedded.governor_token)
    _check(*with_stdio(env, _tools_and_calls))


def _told(env: dict[str, str], uri: str, queue: Callable[[Client], Awaitable[Any]], wait_s: float
          ) -> tuple[Any, list[str]]:
    """Subscribe to ``uri`` over stdio, run ``queue``, and collect the resource-updated URIs told within
    ``wait_s`` of it."""
    from mcp.shared.exceptions import MCPDeprecationWarning

    seen: list[str] = []
    got = anyio.Event()

    async def handler(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            seen.append(message.params.uri)
            got.set()

    async def work(client: Client) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(uri)
        await anyio.sleep(2.0)  # the wake stream is open well before the wake is queued
        queued = await queue(client)
        with anyio.move_on_after(wait_s):
            await got.wait()
        return queued
    return with_stdio(env, work, mode="legacy", message_handler=handler), seen


def test_remote_stdio_tells_a_subscriber_of_its_agents_wake_only(served: Served) -> None:
    token = served.add_agent("cy", [])
    served.add_agent("dee", [])
    env = stdio_env(served, PMW_SERVER=served.url, PMW_TOKEN=token)
    uri = "pmw://agents/cy/projection"

    def enqueue(agent: str, key: str) -> Callable[[Client], Awaitable[Any]]:
        async def queue(_client: Client) -> Any:
            return await anyio.to_thread.run_sync(lambda: served.client(served.governor_token).call(
                "world", "enqueue_wake", (), {"target_agent": agent, "cause": "stdio", "idempotency_key": key,
                                              "actor": GOVERNOR}))
        return queue
    _queued, other = _told(env, uri, enqueue("dee", "remote-other"), 2.0)
    assert other == [], "told of another agent's wake"
    _queued, own = _told(env, uri, enqueue("cy", "remote-own"), 20.0)
    assert own and own[0] == uri


def test_embedded_stdio_tells_a_subscriber_of_its_agents_wake(embedded: Served) -> None:
    env = stdio_env(embedded, PMW_TOKEN=embedded.governor_token)
    uri = f"pmw://agents/{GOVERNOR}/projection"

    async def queue(client: Client) -> Any:
        return await client.call_tool("enqueue_wake", {"target_agent": GOVERNOR, "cause": "stdio-test",
                                                       "idempotency_key": "stdio-1"})
    queued, seen = _told(env, uri, queue, 20.0)
    assert not queued.is_error, queued.structured_content
    assert seen and seen[0] == uri


def _raw(env: dict[str, str], lines: list[dict[str, Any]], cwd: Path) -> subprocess.CompletedProcess[str]:
    text = "".join(json.dumps(line) + "\n" for line in lines)
    return subprocess.run([sys.executable, "-m", "engine.cli", "mcp"], env=env, cwd=cwd, input=text,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def test_stdout_carries_only_json_rpc(embedded: Served) -> None:
    """Every line on stdout is a JSON-RPC message (the PDP's start, logs and warnings go elsewhere)."""
    env = stdio_env(embedded, PMW_TOKEN=embedded.governor_token)
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "mcp"], env=env, cwd=embedded.root,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for line in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                          "protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "raw", "version": "0"}}},
                     {"jsonrpc": "2.0", "method": "notifications/initialized"},
                     {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}):
            proc.stdin.write(json.dumps(line) + "\n")
        proc.stdin.flush()
        answers: list[dict[str, Any]] = []
        lines: list[str] = []

        def read_two() -> None:
            assert proc.stdout is not None
            while len(answers) < 2:
                line = proc.stdout.readline()
                if not line:
                    return
                lines.append(line)
                answers.append(json.loads(line))  # a line that is not JSON fails here
        reader = threading.Thread(target=read_two, daemon=True)
        reader.start()
        reader.join(TIMEOUT_S)
        proc.stdin.close()
        proc.wait(TIMEOUT_S)
        rest = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        stderr = proc.stderr.read() if proc.stderr is not None else ""
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert [a.get("id") for a in answers] == [1, 2], (lines, stderr[-2000:])
    assert all(a["jsonrpc"] == "2.0" for a in answers)
    assert {t["name"] for t in answers[1]["result"]["tools"]} == set(TOOLS)
    assert rest == "" and proc.returncode == 0, stderr[-2000:]


@pytest.mark.parametrize("where", ["embedded", "remote"])
def test_no_token_exits_10_before_serving(embedded: Served, served: Served, where: str) -> None:
    env = (stdio_env(embedded, PMW_TOKEN=None) if where == "embedded"
           else stdio_env(served, PMW_SERVER=served.url, PMW_TOKEN=None))
    done = _raw(env, [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], embedded.root)
    assert done.returncode == 10, done.stderr[-2000:]
    assert done.stdout == ""
    bad = dict(env, PMW_TOKEN="pmw_tok_0123456789abcdef_" + "0" * 64)
    done = _raw(bad, [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], embedded.root)
    assert done.returncode == 10, done.stderr[-2000:]
    assert done.stdout == ""
