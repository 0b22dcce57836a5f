"""``/mcp`` against one principal exhausting it (attack findings items 2, 6, 7, 13) on a real ``pmw serve`` (a
subprocess, the real Cerbos PDP) with small caps set through its environment (``engine.service.mcp_limits``):

- a token whose sessions are all in use is refused one more (429, ``too_many_open``) while another agent's
  ``initialize`` succeeds; over the cap, the principal's oldest idle session is closed, never one in use;
- an idle session is closed after ``PMW_MCP_SESSION_IDLE_S`` (its id then answers 404);
- a session's open GET stream ends once its token is revoked; a ``subscriptions/listen`` stream too;
- a token holding its cap of listen streams is refused one more, while alice's listen still opens;
- ``Host`` and ``Origin`` are matched exactly (no prefix, no user-info, no suffix after ``]``)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.service.support import Served
from tests.transports.test_mcp_server import INITIALIZE, JSON_HEADERS, mcp_url, raw_post, whoami

SESSIONS_PER_TOKEN = 3
SESSIONS_PER_AGENT = 5
LISTENS_PER_TOKEN = 2
WAIT_S = 60.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env: dict[str, str | None] = {"PMW_MCP_SESSIONS_PER_TOKEN": str(SESSIONS_PER_TOKEN),
                                  "PMW_MCP_SESSIONS_PER_AGENT": str(SESSIONS_PER_AGENT),
                                  "PMW_MCP_LISTENS_PER_TOKEN": str(LISTENS_PER_TOKEN)}
    with Served(tmp_path_factory.mktemp("mcp-security"), env=env) as server:
        yield server


@pytest.fixture(scope="module")
def tokens(served: Served) -> dict[str, str]:
    return {name: served.add_agent(name, ["state.write"]) for name in ("alice", "bob")}


def initialize(served: Served, token: str, **extra: str) -> tuple[int, dict[str, str], Any]:
    status, headers, body = raw_post(served, INITIALIZE, {**JSON_HEADERS, "Authorization": f"Bearer {token}",
                                                          **extra})
    lowered = {k.lower(): v for k, v in headers.items()}
    parsed: Any = None
    if lowered.get("content-type", "").startswith("application/json") and body:
        parsed = json.loads(body)
    return status, lowered, parsed


def delete_session(served: Served, token: str, session: str) -> int:
    response = httpx2.request("DELETE", mcp_url(served), timeout=WAIT_S, headers={
        "Authorization": f"Bearer {token}", "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"})
    return response.status_code


def open_session(served: Served, token: str) -> str:
    """A new session of ``token``, initialized (its id)."""
    status, headers, _body = initialize(served, token)
    assert status == 200, status
    session = headers["mcp-session-id"]
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    assert raw_post(served, initialized, {**JSON_HEADERS, **session_headers(token, session)})[0] == 202
    return session


def session_headers(token: str, session: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}


def session_lives(served: Served, token: str, session: str) -> bool:
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode()
    status, _h, _b = raw_post(served, listing, {**JSON_HEADERS, **session_headers(token, session)})
    assert status in (200, 404), status
    return status == 200


def test_a_token_over_its_session_cap_is_capped_and_another_agent_is_not(served: Served,
                                                                         tokens: dict[str, str]) -> None:
    """A token holding its cap of sessions in use (each with an open GET stream) is refused one more (429,
    ``too_many_open`` naming the cap) while alice opens hers; once one of them is idle, a new one closes it
    (the oldest idle) and opens; the agent's cap across its tokens closes only an idle session, never one in
    use."""
    reader = served.issue("bob", "--scope", "read")

    async def main() -> None:
        def run(work: Any, *args: Any) -> Any:
            return anyio.to_thread.run_sync(lambda: work(*args))
        busy = [await run(open_session, served, reader) for _ in range(SESSIONS_PER_TOKEN)]
        async with httpx2.AsyncClient(timeout=WAIT_S) as http, contextlib.AsyncExitStack() as streams:
            opened = []
            for session in busy:  # each session in use: its GET stream open
                got = await streams.enter_async_context(http.stream("GET", mcp_url(served), headers={
                    **session_headers(reader, session), "Accept": "text/event-stream"}))
                assert got.status_code == 200
                opened.append(got)
            status, _headers, body = await run(initialize, served, reader)
            assert status == 429, "a token opened more sessions than its cap"
            assert body["error"]["data"] == {"code": "too_many_open", "message": body["error"]["data"]["message"],
                                             "what": "mcp_session", "per": "token", "limit": SESSIONS_PER_TOKEN}
            assert str(SESSIONS_PER_TOKEN) in body["error"]["message"]
            status, headers, _body = await run(initialize, served, tokens["alice"])  # another agent: not refused
            assert status == 200
            assert await run(delete_session, served, tokens["alice"], headers["mcp-session-id"]) in (200, 204)
            assert all([await run(session_lives, served, reader, s) for s in busy]), "a session in use was closed"

            # the agent's cap (5) across its tokens: another token's sessions fill it; the next one closes the
            # agent's oldest idle session (the other token's first), never the reader's sessions in use
            another = await run(served.issue, "bob", "--scope", "read")
            spare = [await run(open_session, served, another) for _ in range(SESSIONS_PER_AGENT - len(busy))]
            newest = await run(open_session, served, another)
            assert not await run(session_lives, served, another, spare[0]), "the oldest idle one was kept"
            assert await run(session_lives, served, another, newest)
            assert all([await run(session_lives, served, reader, s) for s in busy]), "a session in use was closed"
        # the GET streams closed: the reader's sessions are idle, so a new one closes the oldest and opens
        await anyio.sleep(0.5)
        fresh = await run(open_session, served, reader)
        lives = [await run(session_lives, served, reader, s) for s in busy]
        assert lives.count(False) == 1 and await run(session_lives, served, reader, fresh)
    anyio.run(main)


def test_an_idle_session_is_closed_after_the_idle_timeout(tmp_path_factory: pytest.TempPathFactory) -> None:
    with Served(tmp_path_factory.mktemp("mcp-idle"), env={"PMW_MCP_SESSION_IDLE_S": "1.5"}) as served:
        token = served.add_agent("carol", ["state.write"])
        session = open_session(served, token)
        assert session_lives(served, token, session)
        time.sleep(4.0)  # no request in flight for longer than the idle timeout
        assert not session_lives(served, token, session), "an idle session was not closed"


def test_a_revoked_tokens_get_stream_ends(served: Served, tokens: dict[str, str]) -> None:
    """The standalone GET stream of a session (where its notifications go) ends once the token is revoked."""
    token = served.issue("alice")
    token_id = whoami(served, token)["token_id"]
    status, headers, _body = initialize(served, token)
    assert status == 200
    common = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": headers["mcp-session-id"],
              "Mcp-Protocol-Version": "2025-11-25"}
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    assert raw_post(served, initialized, {**JSON_HEADERS, **common})[0] == 202

    async def main() -> float:
        async with httpx2.AsyncClient(timeout=WAIT_S) as http, http.stream(
                "GET", mcp_url(served), headers={**common, "Accept": "text/event-stream"}) as got:
            assert got.status_code == 200
            await anyio.to_thread.run_sync(lambda: served.client(served.governor_token).call(
                "world", "revoke_token", (), {"token_id": token_id, "actor": "gov"}))
            revoked = time.monotonic()
            with anyio.move_on_after(10.0):
                async for _chunk in got.aiter_bytes():
                    pass
                return time.monotonic() - revoked
            raise AssertionError("a revoked token's GET stream stayed open for 10 s")
    took = anyio.run(main)
    assert took < 10.0


async def _listen_until_end(client: Client, uri: str, after_open: Any) -> float:
    async with client.listen(resource_subscriptions=[uri]) as subscription:
        await anyio.to_thread.run_sync(after_open)
        started = time.monotonic()
        with anyio.fail_after(10.0):
            async for _event in subscription:
                pass
        return time.monotonic() - started


def with_client(served: Served, token: str, work: Any) -> Any:
    async def main() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=WAIT_S) as http:
            with anyio.fail_after(WAIT_S):
                async with Client(streamable_http_client(mcp_url(served), http_client=http)) as client:
                    return await work(client)
    return anyio.run(main)


def test_a_revoked_tokens_listen_stream_ends(served: Served, tokens: dict[str, str]) -> None:
    from mcp.client.subscriptions import SubscriptionLost

    token = served.issue("alice")
    token_id = whoami(served, token)["token_id"]

    def revoke() -> None:
        served.client(served.governor_token).call("world", "revoke_token", (), {"token_id": token_id, "actor": "gov"})

    async def work(client: Client) -> str:
        try:
            await _listen_until_end(client, "pmw://agents/alice/projection", revoke)
        except (MCPError, SubscriptionLost) as exc:
            return type(exc).__name__
        return "ended"
    try:
        ended = with_client(served, token, work)
    except* (MCPError, SubscriptionLost):
        ended = "ended with the refusal"
    assert ended  # fail_after(10) raised otherwise: the stream stayed open


def test_a_token_holding_its_listen_cap_does_not_block_alice(served: Served, tokens: dict[str, str]) -> None:
    reader = served.issue("bob", "--scope", "read")
    uri = "pmw://agents/bob/projection"

    async def alice_listens(client: Client) -> bool:
        async with client.listen(resource_subscriptions=["pmw://agents/alice/projection"]):
            return True

    async def work(client: Client) -> Any:
        async with client.listen(resource_subscriptions=[uri]), client.listen(resource_subscriptions=[uri]):
            try:
                async with client.listen(resource_subscriptions=[uri]):
                    raise AssertionError("a token opened more listen streams than its cap")
            except MCPError as exc:
                refused = exc
            alice = await anyio.to_thread.run_sync(lambda: with_client(served, tokens["alice"], alice_listens))
            return refused, alice
    refused, alice = with_client(served, reader, work)
    assert refused.error.data["code"] == "too_many_open"
    assert refused.error.data["what"] == "mcp_listen" and refused.error.data["limit"] == LISTENS_PER_TOKEN
    assert alice is True
    # the streams closed, the token may listen again
    assert with_client(served, reader, lambda c: _open_one(c, uri)) is True


async def _open_one(client: Client, uri: str) -> bool:
    async with client.listen(resource_subscriptions=[uri]):
        return True


def test_host_and_origin_are_matched_exactly(served: Served, tokens: dict[str, str]) -> None:
    port = served.url.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}@evil.com", "[::1]evil.com", f"127.0.0.1.evil.com:{port}", "localhost.",
                 f"[::1]:{port}.evil.com"):
        assert initialize(served, tokens["alice"], Host=host)[0] in (400, 421), host
    for origin in (f"http://127.0.0.1:{port}.evil.com", "http://127.0.0.1:@evil.com", "http://localhost:80@evil.com",
                   "null", f"http://127.0.0.1:{port}/", "http://127.0.0.1.evil.com", "file://"):
        assert initialize(served, tokens["alice"], Origin=origin)[0] == 403, origin

    def accepted(**extra: str) -> bool:
        status, headers, _body = initialize(served, tokens["alice"], **extra)
        if status == 200:  # closed again: alice's own session cap is not what this test is about
            assert delete_session(served, tokens["alice"], headers["mcp-session-id"]) in (200, 204)
        return status == 200
    for origin in (served.url, f"http://localhost:{port}", "https://127.0.0.1"):
        assert accepted(Origin=origin), origin
    assert accepted(Host=f"localhost:{port}")
