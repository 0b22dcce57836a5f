"""``/mcp`` on a real ``pmw serve`` (a subprocess, the real Cerbos PDP), driven by the official MCP Python
client over streamable HTTP with real agent tokens: the tools are the registry's, calls answer structured
content, errors carry PMW's code, and the transport's security holds (no token, another agent, revoked
token, cross-origin, wrong Host, oversize body)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import Client

from engine.commands import COMMANDS
from engine.service.calls import WORLD_READS
from engine.service.mcp_tools import TOOLS
from tests.service.support import Served

T = TypeVar("T")
CALL_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("mcp-server")) as server:
        yield server


@pytest.fixture(scope="module")
def tokens(served: Served) -> dict[str, str]:
    caps = ["state.write", "task.create", "task.work"]
    return {name: served.add_agent(name, caps) for name in ("alice", "bob")}


def mcp_url(served: Served) -> str:
    return served.url + "/mcp"


def with_client(served: Served, token: str | None, work: Callable[[Client], Awaitable[T]],
                **client_args: Any) -> T:
    """Run ``work`` with an MCP client connected to ``/mcp`` as ``token`` (bounded)."""
    async def main() -> T:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT_S) as http:
            from mcp.client.streamable_http import streamable_http_client

            with anyio.fail_after(CALL_TIMEOUT_S * 2):
                async with Client(streamable_http_client(mcp_url(served), http_client=http), **client_args) as c:
                    return await work(c)
    return anyio.run(main)


def raw_post(served: Served, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One POST to ``/mcp`` as sent (status, headers, body)."""
    request = urllib.request.Request(mcp_url(served), data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=CALL_TIMEOUT_S) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, dict(exc.headers), exc.read()
        finally:
            exc.close()


INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).encode()
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def test_tools_list_is_the_registry_and_the_reads(served: Served, tokens: dict[str, str]) -> None:
    async def work(client: Client) -> list[Any]:
        return list((await client.list_tools()).tools)
    tools = {t.name: t for t in with_client(served, tokens["alice"], work)}
    expected = {n for n in COMMANDS if n not in ("bootstrap_governor",)} | set(WORLD_READS)
    assert set(tools) == expected
    for name, cls in COMMANDS.items():
        assert tools[name].input_schema == cls.model_json_schema(), name
        assert tools[name].description == cls.description
    for name in WORLD_READS:
        schema = tools[name].input_schema
        assert "actor" not in schema.get("properties", {}), name
        assert schema == TOOLS[name].input_schema
        assert tools[name].output_schema is not None and tools[name].output_schema["type"] == "object"
    assert "actor" not in tools["compare_and_set_state"].input_schema["properties"]


def test_a_call_answers_structured_content_and_a_conflict_its_code(served: Served, tokens: dict[str, str]) -> None:
    async def work(client: Client) -> tuple[Any, Any, Any]:
        wrote = await client.call_tool("compare_and_set_state",
                                       {"key": "mcp-plan", "expected_version": 0, "value": {"step": 1}})
        await client.call_tool("compare_and_set_state",
                               {"key": "mcp-plan", "expected_version": 1, "value": {"step": 2}})
        stale = await client.call_tool("compare_and_set_state",  # what it saw is version 1; 2 is stored
                                       {"key": "mcp-plan", "expected_version": 1, "value": {"step": 3}})
        read = await client.call_tool("get_state", {"key": "mcp-plan"})
        return wrote, stale, read
    wrote, stale, read = with_client(served, tokens["alice"], work)
    assert not wrote.is_error
    assert wrote.structured_content["key"] == "mcp-plan" and wrote.structured_content["version"] == 1
    assert json.loads(wrote.content[0].text) == wrote.structured_content
    assert stale.is_error
    assert stale.structured_content["code"] == "version_conflict"
    assert stale.structured_content["current"] == 2 and stale.structured_content["expected"] == 1
    assert stale.structured_content["exit_code"] == 5
    assert read.structured_content["value"] == {"step": 2} and read.structured_content["version"] == 2


def test_no_token_is_401_with_www_authenticate(served: Served) -> None:
    status, headers, _body = raw_post(served, INITIALIZE, JSON_HEADERS)
    assert status == 401
    assert {k.lower(): v for k, v in headers.items()}["www-authenticate"].startswith("Bearer")
    status, _headers, _body = raw_post(served, INITIALIZE, {**JSON_HEADERS, "Authorization": "Bearer pmw_tok_x_y"})
    assert status == 401

