"""The REST API as a trust boundary, on a real ``pmw serve`` (the real PDP): no token is 401; another
agent's id in a path or a body is 403 ``not_permitted`` and reads nothing; a revoked token (by ``pmw
tokens revoke`` or by the World call over REST) is refused on its next call; a body over the cap is 413
before it is read or parsed; a stale ``If-Match`` is 409 ``version_conflict`` with the current version; an
``Idempotency-Key`` replayed writes one event; FastAPI's own validation is PMW's 400; the OpenAPI document
needs no token and is a valid OpenAPI 3.1 document. Every refusal leaves the store's row counts as they
were (the server runs without its controller, so nothing else writes)."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.service.http_app import MAX_BODY_BYTES
from tests.service.support import Served
from tests.transports.test_rest_support import AGENT_CAPABILITIES, call, changed, request, row_counts


class World:
    """The served world and two agents' tokens."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.db = Path(served.data) / "world.db"
        self.alice = served.add_agent("alice", AGENT_CAPABILITIES)
        self.bob = served.add_agent("bob", AGENT_CAPABILITIES)

    def refused(self, status: int, code: str, method: str, path: str, body: Any = None, token: str | None = None,
                **headers: str) -> dict[str, Any]:
        """Send one request that must be refused with ``status`` and ``code`` and change no row; its problem."""
        before = row_counts(self.db)
        got, sent_headers, answer = call(self.served, method, path, body, token, **headers)
        assert (got, (answer or {}).get("code")) == (status, code), answer
        assert sent_headers["content-type"].startswith("application/problem+json")
        assert answer["type"] == f"urn:pmw:error:{code}" and answer["status"] == status
        assert changed(before, row_counts(self.db)) == {}
        return dict(answer)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with Served(tmp_path_factory.mktemp("rest-security"), serve_args=["--no-controller"]) as served:
        yield World(served)
        assert served.health()["status"] == "ok"


def test_no_token_is_401(world: World) -> None:
    for method, path, body in (("GET", "/v1/state/k", None), ("PUT", "/v1/state/k", {"value": 1}),
                               ("POST", "/v1/tasks", {"goal": "g"}), ("GET", "/v1/agents/alice/projection", None),
                               ("POST", "/v1/actions/create_task", {"goal": "g"})):
        world.refused(401, "unauthenticated", method, path, body)
        world.refused(401, "unauthenticated", method, path, body, "pmw_tok_0123456789abcdef_" + "0" * 64)
    _status, headers, _ = call(world.served, "GET", "/v1/tasks")
    assert headers["www-authenticate"].startswith("Bearer")


def test_another_agents_id_in_a_path_or_a_body_is_403(world: World) -> None:
    for path in ("/v1/agents/bob/projection", "/v1/agents/bob/allowed-actions?kind=state&ident=k",
                 "/v1/agents/bob/memory", "/v1/agents/bob/wakes", "/v1/agents/bob/receipts"):
        answer = world.refused(403, "not_permitted", "GET", path, token=world.alice)
        assert answer["id"] == "bob" and answer["actor"] == "alice", answer
    # refused before anything is read: an agent that does not exist is refused the same way, not 404
    world.refused(403, "not_permitted", "GET", "/v1/agents/nobody/projection", token=world.alice)
    for path, body in (("/v1/wakes/claim", {"agent_id": "bob"}), ("/v1/wakes/claim", {"agent_ids": ["bob"]}),
                       ("/v1/actions/claim_wake", {"agent_id": "bob"})):
        answer = world.refused(403, "not_permitted", "POST", path, body, world.alice)
        assert "bob" in answer["id"], answer
    status, _, own = call(world.served, "GET", "/v1/agents/alice/projection", token=world.alice)
    assert status == 200 and own["agent"]["agent_id"] == "alice", own


def test_a_revoked_token_is_refused_on_its_next_call(world: World) -> None:
    for how in ("cli", "rest"):
        token = world.served.issue("alice")
        token_id = "tok_" + token.split("_")[2]
        assert call(world.served, "GET", "/v1/tasks", token=token)[0] == 200
        if how == "cli":
            done = world.served.cli(world.served.governor_token, "--json", "tokens", "revoke", token_id)
            assert done.returncode == 0, done.stderr
        else:
            status, _, revoked = call(world.served, "POST", "/v1/actions/revoke_token", {"token_id": token_id},
                                      world.served.governor_token)
            assert status == 200 and revoked["token_id"] == token_id, revoked
        answer = world.refused(401, "unauthenticated", "GET", "/v1/tasks", token=token)
        assert answer["reason"] == "revoked", answer
        world.refused(401, "unauthenticated", "POST", "/v1/tasks", {"goal": "after revocation"}, token)
    assert call(world.served, "GET", "/v1/tasks", token=world.alice)[0] == 200  # alice's other token lives


def _declared_oversize(world: World, token: str | None) -> tuple[int, dict[str, Any]]:
    """A request declaring a body over the cap and sending 2 bytes of it: answered without waiting for it."""
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(world.served.url).netloc, timeout=30)
    try:
        connection.putrequest("POST", "/v1/tasks")
        headers = {"Content-Type": "application/json", "Content-Length": str(MAX_BODY_BYTES + 1)}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(b"{}")
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _chunked(world: World, body: bytes, token: str) -> tuple[int, dict[str, Any]]:
    """A body sent chunked (no ``Content-Length``): the cap is applied to what arrives."""
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(world.served.url).netloc, timeout=60)
    try:
        step = 1 << 20
        connection.request("POST", "/v1/tasks", body=(body[i:i + step] for i in range(0, len(body), step)),
                           headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
                           encode_chunked=True)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_body_over_the_cap_is_413_before_it_is_read(world: World) -> None:
    before = row_counts(world.db)
    for token in (world.alice, None):  # the size is checked first, with or without a token
        status, answer = _declared_oversize(world, token)
        assert (status, answer["code"]) == (413, "payload_too_large"), answer
        assert answer["limit"] == MAX_BODY_BYTES, answer
    huge = b"[" * (MAX_BODY_BYTES + 10)  # if it were parsed, it would be refused for its depth (400), not 413
    status, _, answer = request(world.served, "POST", "/v1/tasks", huge, world.alice)
    assert (status, answer["code"]) == (413, "payload_too_large"), answer
    status, answer = _chunked(world, huge, world.alice)
    assert (status, answer["code"]) == (413, "payload_too_large"), answer
    assert changed(before, row_counts(world.db)) == {}
    assert world.served.health()["status"] == "ok"
    status, _, small = call(world.served, "POST", "/v1/tasks", {"goal": "x" * 1000}, world.alice)
    assert status == 200, small  # a body under the cap is served as ever


def test_if_match_stale_is_a_conflict_with_the_current_version(world: World) -> None:
    status, headers, entry = call(world.served, "PUT", "/v1/state/plan", {"value": {"step": 1}}, world.alice,
                                  If_None_Match="*")
    assert (status, entry["version"], headers["etag"]) == (200, 1, '"1"'), entry
    status, headers, read = call(world.served, "GET", "/v1/state/plan", token=world.alice)
    assert (status, headers["etag"], read["value"]) == (200, '"1"', {"step": 1})
    status, headers, entry = call(world.served, "PUT", "/v1/state/plan", {"value": {"step": 2}}, world.alice,
                                  If_Match=headers["etag"])
    assert (status, headers["etag"]) == (200, '"2"'), entry
    answer = world.refused(409, "version_conflict", "PUT", "/v1/state/plan", {"value": {"step": 3}}, world.alice,
                           If_Match='"1"')
    assert (answer["expected"], answer["current"]) == (1, 2), answer
    world.refused(409, "already_exists", "PUT", "/v1/state/plan", {"value": 0}, world.alice, If_None_Match="*")
    # the same on a task's claim: If-Match is the task's expected version
    status, headers, task = call(world.served, "POST", "/v1/tasks", {"goal": "claim me"}, world.alice)
    assert status == 200 and headers["etag"] == '"1"'
    answer = world.refused(409, "version_conflict", "POST", f"/v1/tasks/{task['task_id']}/claim", None,
                           world.alice, If_Match='"7"')
    assert answer["current"] == 1, answer
    for bad in ("*", '"1", "2"', "abc"):
        world.refused(400, "invalid_input", "PUT", "/v1/state/plan", {"value": 0}, world.alice, If_Match=bad)
    world.refused(400, "invalid_input", "PUT", "/v1/state/plan", {"value": 0, "expected_version": 1}, world.alice,
                  If_Match='"2"')  # the body and the header disagree


def _events_of(world: World, event_type: str) -> list[dict[str, Any]]:
    status, _, events = call(world.served, "GET", "/v1/events?limit=1000", token=world.served.governor_token)
    assert status == 200, events
    return [e for e in events if e["event_type"] == event_type]


def test_an_idempotency_key_replayed_writes_one_event(world: World) -> None:
    before = len(_events_of(world, "task.created"))
    answers = [call(world.served, "POST", "/v1/tasks", {"goal": "once"}, world.alice, Idempotency_Key="op-once-1")
               for _ in range(5)]
    assert {a[0] for a in answers} == {200}, answers
    assert len({a[2]["task_id"] for a in answers}) == 1  # the stored result, every time
    assert len(_events_of(world, "task.created")) == before + 1
    answer = world.refused(409, "operation_conflict", "POST", "/v1/tasks", {"goal": "another"}, world.alice,
                           Idempotency_Key="op-once-1")
    assert answer["op_id"] == "op-once-1", answer
    # another agent's same request with the same key is not handed alice's stored result
    world.refused(409, "operation_conflict", "POST", "/v1/tasks", {"goal": "once"}, world.bob,
                  Idempotency_Key="op-once-1")
    world.refused(400, "invalid_input", "POST", "/v1/tasks", {"goal": "g"}, world.alice, Idempotency_Key="a b")


def test_framework_errors_are_problem_documents(world: World) -> None:
    answer = world.refused(400, "invalid_input", "GET", "/v1/tasks?limit=abc", token=world.alice)
    assert answer["field"] == "limit", answer  # FastAPI's 422, as PMW's 400 naming the field
    answer = world.refused(400, "invalid_input", "GET", f"/v1/events?after_seq={2**70}", token=world.alice)
    assert answer["field"] == "after_seq", answer
    world.refused(400, "invalid_input", "GET", "/v1/no-such-route", token=world.alice)
    world.refused(405, "invalid_input", "DELETE", "/v1/tasks", token=world.alice)
    answer = world.refused(400, "invalid_input", "POST", "/v1/tasks", {"goal": "g", "actor": "bob"}, world.alice)
    assert answer["field"] == "actor", answer  # not a field of the command: nobody's name is taken from a body
    world.refused(400, "invalid_input", "POST", "/v1/tasks", {"goal": 5}, world.alice)
    world.refused(404, "not_found", "POST", "/v1/actions/record_decision", {}, world.alice)  # runtime's own


def test_the_openapi_document_needs_no_token(world: World) -> None:
    status, _, document = call(world.served, "GET", "/v1/openapi.json")
    assert status == 200 and document["openapi"].startswith("3.1"), document.get("openapi")
    from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR  # the 3.1 meta-schema it ships
    assert [str(e)[:300] for e in OPENAPI_31_VALIDATOR.iter_errors(document)] == []
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    operations = [op for item in document["paths"].values() for op in item.values()]
    assert all(op["security"] == [{"bearer": []}] for op in operations)
    assert all({"400", "401", "403", "404", "503"} <= set(op["responses"]) for op in operations)
    assert not any("422" in op["responses"] for op in operations)
    assert not any(path.startswith("/v1/world/") for path in document["paths"])
