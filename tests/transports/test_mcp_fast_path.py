"""The MCP endpoint's fast path on a real ``pmw serve`` (a subprocess, the real Cerbos PDP), driven by the
official MCP client over streamable HTTP:

- a stateless-era (2026-07-28) ``tools/call``, which takes the SDK's JSON-response path
  (``engine.service.mcp_sessions.CappedSessionManager._handle_request``), is answered in JSON with the right
  result (what the path saves is CPU on the event loop, seen in the transport benchmark, not in a test);
- a ``tools/call`` uses the principal its request's bearer check proved (``engine.service.mcp_http.proven_of``)
  only when the token that check proved is the one the request carries: anything else is proven again;
- a token revoked between two calls is refused on the next one (the proof is per request, never kept).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.requests import Request

from engine.models.tokens import TokenPrincipal, TokenScope
from engine.service.mcp_http import ProvenAccessToken, proven_of
from tests.service.support import Served
from tests.transports.test_mcp_server import mcp_url, whoami

WAIT_S = 60.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("mcp-fast-path")) as server:
        yield server


def test_a_stateless_era_call_is_answered_in_json_and_a_revoked_token_is_refused_next(served: Served) -> None:
    token = served.add_agent("alice", ["state.write"])
    kinds: list[tuple[str, str]] = []

    async def seen(response: httpx2.Response) -> None:
        if response.request.method == "POST":
            kinds.append((response.request.headers.get("mcp-protocol-version", ""),
                          response.headers.get("content-type", "")))

    token_id = whoami(served, token)["token_id"]

    async def run() -> tuple[Any, BaseException | None]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=WAIT_S,
                                      event_hooks={"response": [seen]}) as http, \
                Client(streamable_http_client(mcp_url(served), http_client=http)) as client:
            first = await client.call_tool("compare_and_set_state", {"key": "fast", "expected_version": 0,
                                                                     "value": 1})
            served.client(served.governor_token).call("world", "revoke_token", (),
                                                      {"token_id": token_id, "actor": "gov"})
            try:
                await client.call_tool("list_state", {})
            except MCPError as exc:  # the transport's 401, as the client raises it
                return first, exc
            return first, None

    first, refused = anyio.run(run)
    assert not first.is_error and first.structured_content["version"] == 1
    modern = [ctype for version, ctype in kinds if version >= "2026-07-28"]
    assert modern, kinds  # the client spoke the stateless era
    assert all(ctype.startswith("application/json") for ctype in modern), kinds
    assert refused is not None, "a revoked token was served"


def _context(header: str | None, proven_token: str | None) -> Any:
    headers = [(b"authorization", header.encode())] if header is not None else []
    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    if proven_token is not None:
        principal = TokenPrincipal(agent_id="alice", token_id="t1", scope=TokenScope.ACT, expires_at_us=None)
        access = ProvenAccessToken(token=proven_token, client_id="alice", scopes=["act"], principal=principal)
        scope["user"] = SimpleNamespace(access_token=access)
    return SimpleNamespace(request=Request(scope))


def test_the_proven_principal_is_used_only_for_the_token_it_proved() -> None:
    assert proven_of(_context("Bearer pmw_t1.secret", "pmw_t1.secret")) is not None
    assert proven_of(_context("Bearer pmw_t2.other", "pmw_t1.secret")) is None  # another token: prove it again
    assert proven_of(_context(None, "pmw_t1.secret")) is None
    assert proven_of(_context("Bearer pmw_t1.secret", None)) is None  # not proven by the transport
