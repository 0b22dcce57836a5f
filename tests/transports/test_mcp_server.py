"""``/mcp`` on a real ``pmw serve`` (a subprocess, the real Cerbos PDP), driven by the official MCP Python
client over streamable HTTP with real agent tokens: the tools are the registry's, calls answer structured
content, errors carry PMW's code, and the transport's security holds (no token, another agent, revoked
token, cross-origin, wrong Host, oversize body)."""

from __future__ import annotations

import http.client
import inspect
import json
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from engine.client.http import RemoteError
from engine.commands import COMMANDS
from engine.service.calls import WORLD_CALLS, WORLD_READS
from engine.service.mcp_tools import TOOLS
from engine.world import World
from tests.service.support import Served

T = TypeVar("T")
CALL_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("mcp-server")) as server:
        yield server


@pytest.fixture(scope="module")
def tokens(served: Served) -> dict[str, str]:
    caps = ["state.write", "task.create", "task.work", "artifact.write"]
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
    for name in WORLD_READS:  # a read's schema is its World method's parameters, the principal left out
        schema = tools[name].input_schema
        params = {p.name: p for p in inspect.signature(getattr(World, name)).parameters.values()
                  if p.name not in ("self", *WORLD_CALLS[name].principal_params)}
        assert set(schema.get("properties", {})) == set(params), name
        assert set(schema.get("required", [])) == {n for n, p in params.items() if p.default is p.empty}, name
        assert schema == TOOLS[name].input_schema
        assert tools[name].output_schema is not None and tools[name].output_schema["type"] == "object"
    assert "actor" not in tools["compare_and_set_state"].input_schema["properties"]


#: the tools issue 11 names (pic-agent-call's set where the semantics match, and PMW's own)
ISSUE_TOOLS = (
    "register_agent", "unregister_agent", "get_agent",  # agents: register / unregister / status
    "create_task", "list_tasks", "claim_task", "complete_task", "fail_task", "get_task",
    "send_message", "unread", "claim_message", "ack_message",  # the channel
    "allowed_actions", "project_world", "get_state", "compare_and_set_state",
    "store_memory", "promote_memory", "review_memory", "claim_wake", "ack_wake",
    "create_handoff", "accept_handoff", "complete_handoff", "discuss", "commit_answer", "distill_room",
    "write_receipt", "get_receipt", "list_receipts", "register_artifact", "read_artifact",
)


def test_the_issues_tools_are_all_served() -> None:
    assert set(ISSUE_TOOLS) <= set(TOOLS), sorted(set(ISSUE_TOOLS) - set(TOOLS))
    for name in ISSUE_TOOLS:
        assert TOOLS[name].description, name


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

def whoami(served: Served, token: str) -> dict[str, Any]:
    return dict(served.client(token).request("GET", "/v1/whoami")["result"])


def test_the_protocol_version_is_negotiated_and_results_validate(served: Served, tokens: dict[str, str]) -> None:
    """Both eras the SDK speaks: the handshake (legacy) and 2026-07-28 (auto); the client validates every
    structured result against the tool's output schema, lists and optional results included."""
    async def work(client: Client) -> tuple[str, Any, Any, Any]:
        listed = await client.call_tool("list_state", {"prefix": "mcp-"})
        allowed = await client.call_tool("allowed_actions", {"kind": "state", "ident": "mcp-plan"})
        none = await client.call_tool("claim_wake", {"lease_seconds": 5})
        return client.protocol_version, listed, allowed, none
    for mode in ("legacy", "auto"):
        version, listed, allowed, none = with_client(served, tokens["alice"], work, mode=mode)
        assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert not listed.is_error and isinstance(listed.structured_content["result"], list)
        assert not allowed.is_error and "allowed" in allowed.structured_content
        assert not none.is_error and none.structured_content == {"result": None}


def test_another_agents_principal_or_claim_is_not_permitted(served: Served, tokens: dict[str, str]) -> None:
    async def work(client: Client) -> tuple[Any, Any]:
        as_bob = await client.call_tool("compare_and_set_state",
                                        {"key": "bob-key", "expected_version": 0, "value": 1, "actor": "bob"})
        bobs_wakes = await client.call_tool("claim_wake", {"agent_id": "bob", "lease_seconds": 5})
        return as_bob, bobs_wakes
    as_bob, bobs_wakes = with_client(served, tokens["alice"], work)
    for refused in (as_bob, bobs_wakes):
        assert refused.is_error and refused.structured_content["code"] == "not_permitted"
        assert refused.structured_content["exit_code"] == 6
    gov = served.client(served.governor_token).call
    with pytest.raises(RemoteError) as missing:  # nothing was written for bob
        gov("world", "get_state", ("bob-key",), {"actor": "gov"})
    assert missing.value.code == "not_found"


def test_a_revoked_token_is_refused_on_its_next_request(served: Served, tokens: dict[str, str]) -> None:
    token = served.issue("alice")
    token_id = whoami(served, token)["token_id"]

    async def work(client: Client) -> tuple[Any, BaseException | None]:
        first = await client.call_tool("list_state", {})
        served.client(served.governor_token).call("world", "revoke_token", (), {"token_id": token_id,
                                                                                 "actor": "gov"})
        try:
            await client.call_tool("list_state", {})
        except MCPError as exc:  # the transport's 401, as the client raises it
            return first, exc
        return first, None
    first, refused = with_client(served, token, work, mode="legacy")
    assert not first.is_error
    assert refused is not None, "a revoked token was served"
    status, _headers, _body = raw_post(served, INITIALIZE, {**JSON_HEADERS, "Authorization": f"Bearer {token}"})
    assert status == 401


def _initialize(served: Served, token: str, **extra: str) -> tuple[int, dict[str, str]]:
    status, headers, _body = raw_post(served, INITIALIZE, {**JSON_HEADERS, "Authorization": f"Bearer {token}",
                                                            **extra})
    return status, {k.lower(): v for k, v in headers.items()}


def test_a_session_is_bound_to_the_token_that_opened_it(served: Served, tokens: dict[str, str]) -> None:
    status, headers = _initialize(served, tokens["alice"])
    assert status == 200
    session = headers["mcp-session-id"]
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode()
    common = {**JSON_HEADERS, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
    other_alice = served.issue("alice")
    for stranger in (tokens["bob"], other_alice):
        status, _h, _b = raw_post(served, listing, {**common, "Authorization": f"Bearer {stranger}"})
        assert status == 404, "a session answered another token"
    status, _h, body = raw_post(served, listing, {**common, "Authorization": f"Bearer {tokens['alice']}"})
    assert status == 200 and b"compare_and_set_state" in body


def test_cross_origin_and_foreign_host_are_refused(served: Served, tokens: dict[str, str]) -> None:
    status, _headers = _initialize(served, tokens["alice"], Origin="http://evil.example")
    assert status == 403
    status, _headers = _initialize(served, tokens["alice"], Origin=served.url)  # its own origin is fine
    assert status == 200
    port = served.url.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "evil.example"):
        status, _headers = _initialize(served, tokens["alice"], Host=host)
        assert status in (400, 421), host


def test_an_oversize_body_is_refused_before_it_is_read(served: Served, tokens: dict[str, str]) -> None:
    from engine.service.http_app import MAX_BODY_BYTES

    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=CALL_TIMEOUT_S)
    try:
        connection.putrequest("POST", "/mcp")
        for name, value in {**JSON_HEADERS, "Authorization": f"Bearer {tokens['alice']}",
                            "Content-Length": str(MAX_BODY_BYTES + 1)}.items():
            connection.putheader(name, value)
        connection.endheaders()  # not a byte of the body is sent: the answer comes from the declared length
        response = connection.getresponse()
        assert response.status == 413
        response.read()
    finally:
        connection.close()


def enqueue_for(served: Served, agent_id: str, key: str) -> None:
    served.client(served.governor_token).call("world", "enqueue_wake", (), {
        "target_agent": agent_id, "cause": "mcp-test", "idempotency_key": key, "actor": "gov"})


def test_resources_are_the_agents_own(served: Served, tokens: dict[str, str]) -> None:
    async def work(client: Client) -> tuple[Any, Any, Any, Any, MCPError]:
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        projection = await client.read_resource("pmw://agents/alice/projection")
        tasks = await client.read_resource("pmw://agents/alice/tasks")
        try:
            await client.read_resource("pmw://agents/bob/tasks")
        except MCPError as exc:
            return listed, templates, projection, tasks, exc
        raise AssertionError("another agent's resource was read")
    listed, templates, projection, tasks, refused = with_client(served, tokens["alice"], work)
    assert {str(r.uri) for r in listed.resources} == {f"pmw://agents/alice/{k}"
                                                       for k in ("projection", "tasks", "receipts")}
    assert {t.uri_template for t in templates.resource_templates} == {
        f"pmw://agents/{{agent_id}}/{k}" for k in ("projection", "tasks", "receipts")}
    view = json.loads(projection.contents[0].text)
    assert view["agent"]["agent_id"] == "alice"
    assert isinstance(json.loads(tasks.contents[0].text), list)
    assert refused.error.data["code"] == "not_permitted"


async def legacy_subscribe(client: Client, uri: str) -> None:
    """``resources/subscribe`` (the handshake era's; the SDK warns that 2026-07-28 removed it)."""
    from mcp.shared.exceptions import MCPDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await client.subscribe_resource(uri)


def _updates_while(served: Served, token: str, uri: str, trigger: Callable[[], None], *, mode: str,
                   wait_s: float) -> list[str]:
    """The resource-updated URIs a client subscribed to ``uri`` is told of after ``trigger`` ran (waiting at
    most ``wait_s`` for the first)."""
    seen: list[str] = []
    got = anyio.Event()

    async def handler(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            seen.append(message.params.uri)
            got.set()

    async def work(client: Client) -> list[str]:
        if mode == "legacy":
            await legacy_subscribe(client, uri)
            await anyio.to_thread.run_sync(trigger)
            with anyio.move_on_after(wait_s):
                await got.wait()
            return seen
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            await anyio.to_thread.run_sync(trigger)
            with anyio.move_on_after(wait_s):
                async for event in subscription:
                    seen.append(event.uri)  # type: ignore[union-attr]
                    break
        return seen
    return with_client(served, token, work, mode=mode, message_handler=handler)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_subscriber_is_told_when_a_wake_for_its_agent_is_queued(served: Served, tokens: dict[str, str],
                                                                 mode: str) -> None:
    uri = "pmw://agents/alice/projection"
    other = _updates_while(served, tokens["alice"], uri, lambda: enqueue_for(served, "bob", f"b-{mode}"),
                           mode=mode, wait_s=2.0)
    assert other == [], "told of another agent's wake"
    started = time.monotonic()
    own = _updates_while(served, tokens["alice"], uri, lambda: enqueue_for(served, "alice", f"a-{mode}"),
                         mode=mode, wait_s=20.0)
    assert own and own[0] == uri, f"no notification within 20 s ({mode})"
    assert time.monotonic() - started < 20.0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_subscribing_to_another_agents_resource_is_not_permitted(served: Served, tokens: dict[str, str],
                                                                 mode: str) -> None:
    async def work(client: Client) -> MCPError:
        try:
            if mode == "legacy":
                await legacy_subscribe(client, "pmw://agents/bob/projection")
            else:
                async with client.listen(resource_subscriptions=["pmw://agents/bob/projection"]):
                    pass
        except MCPError as exc:
            return exc
        raise AssertionError("subscribed to another agent's resource")
    refused = with_client(served, tokens["alice"], work, mode=mode)
    assert refused.error.data["code"] == "not_permitted"


def test_an_op_id_makes_a_write_safe_to_retry(served: Served, tokens: dict[str, str]) -> None:
    """The same op id (in ``_meta`` or as the ``op_id`` argument) returns the first result and writes once."""
    async def work(client: Client) -> list[Any]:
        answers = []
        for _ in range(2):
            answers.append(await client.call_tool("create_task", {"goal": "retry me"},
                                                  meta={"pmw/op_id": "mcp-op-1"}))  # type: ignore[arg-type]
        for _ in range(2):
            answers.append(await client.call_tool("create_task", {"goal": "retry me too", "op_id": "mcp-op-2"}))
        answers.append(await client.call_tool("list_tasks", {}))
        return answers
    first, again, second, second_again, listed = with_client(served, tokens["alice"], work)
    assert not first.is_error and first.structured_content == again.structured_content
    assert not second.is_error and second.structured_content == second_again.structured_content
    assert first.structured_content["task_id"] != second.structured_content["task_id"]
    goals = [t["goal"] for t in listed.structured_content["result"]]
    assert goals.count("retry me") == 1 and goals.count("retry me too") == 1


def test_an_artifact_is_registered_and_read_by_id_with_its_checksum(served: Served, tokens: dict[str, str]) -> None:
    import hashlib

    async def work(client: Client) -> tuple[Any, Any]:
        made = await client.call_tool("register_artifact", {"artifact_type": "report", "content": "héllo mcp"})
        read = await client.call_tool("read_artifact", {"artifact_id": made.structured_content["artifact_id"]})
        return made, read
    made, read = with_client(served, tokens["alice"], work)
    assert not made.is_error, made.structured_content
    digest = hashlib.sha256("héllo mcp".encode()).hexdigest()
    assert made.structured_content["checksum"] == digest
    assert not read.is_error, read.structured_content
    assert read.structured_content["content"] == "héllo mcp"
    assert read.structured_content["artifact"]["checksum"] == digest


def test_the_docs_name_every_tool() -> None:
    from tests.cli_support import REPO

    text = (REPO / "docs" / "mcp.md").read_text()
    missing = sorted(name for name in TOOLS if f"`{name}`" not in text)
    assert missing == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_revoked_subscriber_is_told_nothing_more(served: Served, tokens: dict[str, str], mode: str) -> None:
    """A subscription made before its token was revoked hears of no wake after: the session's token is
    checked before each notification, a listen stream's every half second (the stream then ends)."""
    from mcp.client.subscriptions import SubscriptionLost

    token = served.issue("alice")
    token_id = whoami(served, token)["token_id"]
    uri = "pmw://agents/alice/projection"

    def revoke_then_queue() -> None:
        served.client(served.governor_token).call("world", "revoke_token", (), {"token_id": token_id,
                                                                                 "actor": "gov"})
        time.sleep(1.5)  # past a listen stream's recheck
        enqueue_for(served, "alice", f"after-revoke-{mode}")
    try:
        seen = _updates_while(served, token, uri, revoke_then_queue, mode=mode, wait_s=3.0)
    except* (MCPError, SubscriptionLost) as ended:  # the listen stream ended with the token's refusal
        assert mode == "auto", ended
        seen = []
    assert seen == [], "a revoked token's subscription was told of a wake"


def test_a_read_scoped_token_only_reads(served: Served, tokens: dict[str, str]) -> None:
    token = served.issue("alice", "--scope", "read")

    async def work(client: Client) -> tuple[Any, Any]:
        read = await client.call_tool("list_state", {})
        write = await client.call_tool("compare_and_set_state", {"key": "ro-key", "expected_version": 0, "value": 1})
        return read, write
    read, write = with_client(served, token, work)
    assert not read.is_error
    assert write.is_error and write.structured_content["code"] == "not_permitted"
    with pytest.raises(RemoteError) as missing:
        served.client(served.governor_token).call("world", "get_state", ("ro-key",), {"actor": "gov"})
    assert missing.value.code == "not_found"


def test_binary_artifact_content_is_answered_as_base64_and_a_blob(served: Served, tokens: dict[str, str]) -> None:
    """Binary artifact content (not UTF-8; registered through the World's named call, in process on the same
    world) reads over MCP as ``{"$base64": ...}`` in ``structuredContent`` (valid against the tool's output
    schema: the client validates it) and as an embedded blob resource; over REST the same JSON form; the bytes
    decode back exactly (``engine.service.wire.revived``)."""
    import base64

    from engine.models.artifacts import ArtifactContent
    from engine.runtime import Runtime
    from engine.service.wire import revived
    from engine.settings import load_settings

    data = b"\xff\xfe\x00binary"
    with Runtime.open(load_settings(db_url=served.env["PMW_DB_URL"])) as embedded:
        binary = embedded.world.register_artifact("alice", "blob", data)

    async def work(client: Client) -> tuple[Any, Any]:
        read = await client.call_tool("read_artifact", {"artifact_id": binary.artifact_id})
        after = await client.call_tool("get_artifact", {"artifact_id": binary.artifact_id})
        return read, after
    read, after = with_client(served, tokens["alice"], work)
    assert not read.is_error, read.structured_content
    assert read.structured_content["content"] == {"$base64": base64.b64encode(data).decode()}
    assert revived(ArtifactContent, read.structured_content).content == data
    blobs = [c.resource for c in read.content if isinstance(c, types.EmbeddedResource)]
    assert len(blobs) == 1 and isinstance(blobs[0], types.BlobResourceContents)
    assert base64.b64decode(blobs[0].blob) == data
    assert blobs[0].uri == f"pmw://artifacts/{binary.artifact_id}/versions/{binary.version}"
    assert not after.is_error and after.structured_content["checksum"] == binary.checksum
    over_rest = served.client(tokens["alice"]).call("world", "read_artifact", (), {
        "artifact_id": binary.artifact_id}, rebuild=False)
    assert revived(ArtifactContent, over_rest).content == data
