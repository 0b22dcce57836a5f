"""The dispatcher's gate (``engine.auth.tokens.ProofCache`` behind ``Dispatcher.gate``): a proof of the last
second spares a request the trip to a worker thread that proves its token before its body is read, and never
decides a call.

- the cache itself: only the secret that was proven is known, an entry is stale once this process commits a
  token or agent change (the commit hook), once its second is over, once its token expires, and a proof that
  raced a change is not kept;
- on a real ``pmw serve`` (a subprocess, the real Cerbos PDP): with the gate warm for a token (REST reads and
  writes and MCP ``tools/call`` just made with it), the token revoked by **another process** (a runtime of
  this test process on the same database: the server's commit hook never sees it, so the gate still knows
  the token) is refused on the very next call of each kind and nothing is written. This fails if a call is
  ever made under the gate's cached proof.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from engine.auth.tokens import ProofCache, token_string
from engine.models.tokens import TokenPrincipal, TokenScope
from engine.runtime import Runtime
from engine.settings import load_settings
from store.changes import Insert, Update, WriteRequest
from tests.service.support import Served

SECRET = "ab" * 32
OTHER = "cd" * 32
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2026-07-28", "MCP-Method": "tools/call"}
MCP_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "test-proof-gate", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}


def _principal(expires_at_us: int | None = None) -> TokenPrincipal:
    return TokenPrincipal(agent_id="alice", token_id="t1", scope=TokenScope.ACT, expires_at_us=expires_at_us)


def _request(*changes: Insert | Update) -> WriteRequest:
    return WriteRequest(op_id="op", command="c", request_hash="h", actor_id="gov", event_id="e", event_type="t",
                        subject_kind="k", subject_id="s", created_at_us=0, result={}, changes=changes)


def test_the_cache_knows_only_the_proven_secret_and_forgets_on_a_token_or_agent_change() -> None:
    cache = ProofCache()
    token = token_string("t1", SECRET)
    cache.put(token, _principal(), cache.stamp(), cache.epoch)
    assert cache.get(token, 0) == _principal()
    assert cache.get(token_string("t1", OTHER), 0) is None  # another secret for the same id: not known
    assert cache.get("pmw_t1_nope", 0) is None and cache.get(None, 0) is None
    cache.commit_hook(_request(Insert("state", {"key": "k"}, "state", "k")))  # another table: still known
    assert cache.get(token, 0) == _principal()
    cache.commit_hook(_request(Update("agent_tokens", {"token_id": "t1"}, 1, {"revoked_at_us": 5}, "token", "t1")))
    assert cache.get(token, 0) is None  # revoked in this process: out at once
    cache.put(token, _principal(), cache.stamp(), cache.epoch)
    cache.commit_hook(_request(Update("agents", {"agent_id": "alice"}, 1, {"status": "x"}, "agent", "alice")))
    assert cache.get(token, 0) is None  # the agent changed: out too


def test_an_entry_lasts_its_ttl_and_its_token_s_life_and_a_raced_proof_is_not_kept() -> None:
    cache = ProofCache(ttl_us=50_000)
    token = token_string("t1", SECRET)
    cache.put(token, _principal(expires_at_us=1_000), cache.stamp(), cache.epoch)
    assert cache.get(token, 999) is not None
    assert cache.get(token, 1_000) is None  # expired by the world's clock
    cache.put(token, _principal(), cache.stamp(), cache.epoch)
    time.sleep(0.08)
    assert cache.get(token, 0) is None  # older than its ttl
    epoch, stamp = cache.epoch, cache.stamp()  # a proof begins...
    cache.changed()  # ...a revocation commits while it reads...
    cache.put(token, _principal(), stamp, epoch)  # ...and its answer is not kept
    assert cache.get(token, 0) is None
    small = ProofCache(size=2)
    for n in range(3):
        small.put(token_string(f"t{n}", SECRET), _principal().model_copy(update={"token_id": f"t{n}"}),
                  small.stamp(), small.epoch)
    assert small.get(token_string("t0", SECRET), 0) is None  # the oldest dropped over the bound
    assert small.get(token_string("t2", SECRET), 0) is not None


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("proof-gate"), serve_args=["--no-controller"]) as server:
        yield server


class Wire:
    """One keep-alive connection to the server as ``token``."""

    def __init__(self, url: str, token: str) -> None:
        self.conn = http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=60)
        self.token = token
        self.ids = 0

    def send(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
             ) -> tuple[int, dict[str, str], Any]:
        head = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **(headers or {})}
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            head.setdefault("Content-Type", "application/json")
        self.conn.request(method, path, body=data, headers=head)
        response = self.conn.getresponse()
        raw = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(raw) if raw else None

    def tool(self, name: str, arguments: dict[str, Any]) -> tuple[int, Any]:
        self.ids += 1
        status, _, answer = self.send("POST", "/mcp", {"jsonrpc": "2.0", "id": self.ids, "method": "tools/call",
                                                       "params": {"name": name, "arguments": arguments,
                                                                  "_meta": MCP_META}},
                                      {**MCP_HEADERS, "MCP-Name": name})
        return status, answer

    def close(self) -> None:
        self.conn.close()


def _refused_tool(status: int, answer: Any) -> bool:
    """A tools/call refused for its token: the transport's 401, or an ``isError`` result coded
    ``unauthenticated`` (the gate let the request in; the call's own proof refused it)."""
    if status == 401:
        return True
    result = answer.get("result") if isinstance(answer, dict) else None
    return (isinstance(result, dict) and bool(result.get("isError"))
            and (result.get("structuredContent") or {}).get("code") == "unauthenticated")


def test_a_token_revoked_by_another_process_is_refused_on_the_very_next_call(served: Served) -> None:
    token = served.add_agent("alice", ["state.write"])
    token_id = served.client(token).request("GET", "/v1/whoami")["result"]["token_id"]
    rest, mcp = Wire(served.url, token), Wire(served.url, token)
    try:
        status, head, _ = rest.send("PUT", "/v1/state/plan", {"value": {"n": 0}}, {"If-None-Match": "*"})
        assert status in (200, 201)
        etag = head["etag"]
        status, answer = mcp.tool("compare_and_set_state", {"key": "mcp", "expected_version": 0, "value": 0})
        assert status == 200 and not answer["result"]["isError"], answer

        def warm() -> None:  # each kind of request once: the gate knows the token from now on
            nonlocal etag
            status, head, answer = rest.send("PUT", "/v1/state/plan", {"value": {"n": 1}}, {"If-Match": etag})
            assert status == 200, answer
            etag = head["etag"]
            assert rest.send("GET", "/v1/agents/alice/allowed-actions?kind=state&ident=plan")[0] == 200
            status, answer = mcp.tool("allowed_actions", {"kind": "state", "ident": "mcp"})
            assert status == 200 and not answer["result"]["isError"], answer
        other = Runtime.open(load_settings(db_url=served.env["PMW_DB_URL"]))  # another store on the same world
        try:
            warm()  # right before the revocation: the gate knows the token (well within its second)
            other.world.revoke_token("gov", token_id)
            # the very next calls, each kind, while the gate still holds the token's proof
            status, _, answer = rest.send("PUT", "/v1/state/plan", {"value": {"n": 2}}, {"If-Match": etag})
            assert status == 401 and answer["code"] == "unauthenticated", (status, answer)
            status, _, answer = rest.send("GET", "/v1/agents/alice/allowed-actions?kind=state&ident=plan")
            assert status == 401 and answer["code"] == "unauthenticated", (status, answer)
            status, answer = mcp.tool("compare_and_set_state", {"key": "mcp", "expected_version": 1, "value": 2})
            assert _refused_tool(status, answer), (status, answer)
            status, answer = mcp.tool("allowed_actions", {"kind": "state", "ident": "mcp"})
            assert _refused_tool(status, answer), (status, answer)
        finally:
            other.close()
    finally:
        rest.close()
        mcp.close()
    gov = served.client(served.governor_token)
    state = {key: gov.call("world", "get_state", (), {"key": key, "actor": "gov"}, rebuild=False)["version"]
             for key in ("plan", "mcp")}
    assert state == {"plan": 2, "mcp": 1}  # the refused writes wrote nothing
