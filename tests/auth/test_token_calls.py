"""Token calls on the World, decided by the real PDP: who may issue, revoke and list; what a replay answers;
what the ledger, the events and lists show (never the secret, never its hash)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.auth.tokens import authenticate, hash_secret, parse_token
from engine.errors import IllegalTransition, InvalidInput, NotFound, PolicyDenied, Unauthenticated
from engine.models.tokens import DEFAULT_EXPIRES_IN_S, TokenScope, TokenStatus
from engine.policy.cerbos_adapter import CerbosPdp
from engine.sources import ManualClock
from engine.world import World
from store import Reader
from tests.conftest import add_agent, book_of, close_world, open_pdp_world


@pytest.fixture
def world(pworld: World) -> World:
    add_agent(pworld, "alice", ["state.write"])
    add_agent(pworld, "bob", ["state.write"])
    return pworld


def _read(world: World) -> Reader:
    """The runtime's reader of the world's store (``authenticate`` needs no World)."""
    return book_of(world).store.read


def _counts(world: World) -> dict[str, int]:
    read = _read(world)
    return {"events": read.count("events"), "agent_tokens": read.count("agent_tokens")}


def test_a_governor_issues_a_token_that_authenticates_as_its_agent(world: World) -> None:
    issued = world.issue_token("gov", "alice", scope="read", label="ci")
    assert issued.token is not None and issued.token.startswith(f"pmw_{issued.token_id}_")
    assert (issued.agent_id, issued.scope, issued.issued_by, issued.label) == ("alice", TokenScope.READ, "gov", "ci")
    assert issued.expires_at_us == issued.created_at_us + DEFAULT_EXPIRES_IN_S * 1_000_000
    now = world.clock.now_us()
    principal = authenticate(_read(world), issued.token, now)
    assert (principal.agent_id, principal.token_id, principal.scope) == ("alice", issued.token_id, TokenScope.READ)
    never = world.issue_token("gov", "gov", expires_in_s=None)
    assert never.expires_at_us is None and authenticate(_read(world), never.token, now).agent_id == "gov"


@pytest.mark.parametrize(("actor", "agent"), [("alice", "alice"), ("alice", "bob"), ("bob", "gov")])
def test_no_agent_issues_a_token_for_itself_or_another(world: World, actor: str, agent: str) -> None:
    before = _counts(world)
    with pytest.raises(PolicyDenied) as denied:
        world.issue_token(actor, agent)
    assert (denied.value.kind, denied.value.id, denied.value.action) == ("agent", agent, "issue_token")
    after = _counts(world)
    assert after == {"events": before["events"] + 1, "agent_tokens": before["agent_tokens"]}  # the denial only
    assert _read(world).events(0, 1, newest=True)[0]["event_type"] == "policy.denied"


def test_an_offline_governor_issues_nothing(world: World) -> None:
    world.detach_session("term:t-gov")
    with pytest.raises(PolicyDenied):
        world.issue_token("gov", "alice")


def test_an_agent_revokes_its_own_token_never_anothers(world: World) -> None:
    alices = world.issue_token("gov", "alice")
    bobs = world.issue_token("gov", "bob")
    with pytest.raises(PolicyDenied):
        world.revoke_token("alice", bobs.token_id)
    assert authenticate(_read(world), bobs.token, world.clock.now_us()).agent_id == "bob"  # still good
    revoked = world.revoke_token("alice", alices.token_id)
    assert (revoked.revoked_by, revoked.version) == ("alice", 2)
    with pytest.raises(Unauthenticated) as refused:
        authenticate(_read(world), alices.token, world.clock.now_us())  # the very next call
    assert (refused.value.reason, refused.value.token_id) == ("revoked", alices.token_id)
    assert world.revoke_token("gov", bobs.token_id).revoked_by == "gov"  # a governor revokes anyone's


def test_revoking_twice_is_an_illegal_transition_and_unknown_is_not_found(world: World) -> None:
    token = world.issue_token("gov", "alice")
    world.revoke_token("gov", token.token_id)
    with pytest.raises(IllegalTransition):
        world.revoke_token("alice", token.token_id)
    with pytest.raises(PolicyDenied):  # who may not revoke it is not told its status
        world.revoke_token("bob", token.token_id)
    with pytest.raises(NotFound):
        world.revoke_token("gov", "tok_nothing")


def test_an_expired_token_is_refused_on_the_next_call(world: World) -> None:
    clock = world.clock
    assert isinstance(clock, ManualClock)
    token = world.issue_token("gov", "alice", expires_in_s=60)
    clock.advance(59.999)
    assert authenticate(_read(world), token.token, clock.now_us()).agent_id == "alice"
    clock.advance(0.001)
    with pytest.raises(Unauthenticated) as refused:
        authenticate(_read(world), token.token, clock.now_us())
    assert refused.value.reason == "expired"
    assert world.list_tokens("alice")[0].status_at(clock.now_us()) is TokenStatus.EXPIRED


def test_lists_show_what_the_lister_may_see_and_never_a_hash(world: World) -> None:
    alices = world.issue_token("gov", "alice")
    bobs = world.issue_token("gov", "bob")
    assert [t.token_id for t in world.list_tokens("alice")] == [alices.token_id]
    assert [t.token_id for t in world.list_tokens("bob", agent_id="bob")] == [bobs.token_id]
    assert sorted(t.token_id for t in world.list_tokens("gov")) == sorted([alices.token_id, bobs.token_id])
    with pytest.raises(PolicyDenied):
        world.list_tokens("alice", agent_id="bob")
    listed = json.dumps([t.model_dump(mode="json") for t in world.list_tokens("gov")])
    for token in (alices, bobs):
        assert token.token is not None
        _, secret = parse_token(token.token)
        assert secret not in listed and hash_secret(secret) not in listed
    assert "secret_sha256" not in listed


def test_a_replay_of_the_same_op_id_answers_without_the_secret(world: World) -> None:
    first = world.issue_token("gov", "alice", op_id="issue-alice-1")
    again = world.issue_token("gov", "alice", op_id="issue-alice-1")
    assert first.token is not None and again.token is None
    assert again.model_dump(exclude={"token"}) == first.model_dump(exclude={"token"})
    assert _read(world).count("agent_tokens") == 1
    _, secret = parse_token(first.token)
    stored = book_of(world).store.operation("issue-alice-1")
    assert stored is not None and secret not in json.dumps(dict(stored.result))


def test_no_event_carries_the_secret_and_no_shown_row_image_its_hash(world: World) -> None:
    token = world.issue_token("gov", "alice", op_id="issue-1")
    world.revoke_token("alice", token.token_id)
    assert token.token is not None
    _, secret = parse_token(token.token)
    digest = hash_secret(secret)
    stored = _read(world).events(0)
    assert secret not in json.dumps(stored)
    assert digest not in json.dumps(stored)  # the raw log too: the hash is in the agent_tokens row only
    assert _read(world).get("agent_tokens", token_id=token.token_id)["secret_sha256"] == digest
    for row in stored:
        if row["event_type"] in ("token.issued", "token.revoked"):
            assert digest not in json.dumps([row["payload"], row["result"]])
            assert set(row["payload"]) == {"token_id", "agent_id", "scope", "expires_at_us"}
    shown = [e.model_dump(mode="json") for e in world.events(actor="gov", limit=1000)]  # the governor's full view
    issued = [e for e in shown if e["event_type"] == "token.issued"]
    assert issued and issued[0]["changes"][0]["table"] == "agent_tokens"
    assert issued[0]["changes"][0]["values"]["token_id"] == token.token_id  # the metadata is shown ...
    assert digest not in json.dumps(shown) and "secret_sha256" not in json.dumps(shown)  # ... never the hash


def test_token_events_are_the_worlds_own(world: World) -> None:
    for event_type in ("token.issued", "token.revoked"):
        with pytest.raises(InvalidInput) as refused:
            world.append_event("gov", event_type, {}, subject_kind="token", subject_id="tok_x")
        assert refused.value.field == "event_type"


@pytest.mark.parametrize("bad", [{"scope": "admin"}, {"expires_in_s": 0}, {"expires_in_s": -5},
                                 {"expires_in_s": 10**12}, {"label": ""}, {"agent_id": "no such id!"}])
def test_bad_input_is_refused_and_changes_nothing(world: World, bad: dict[str, object]) -> None:
    before = _counts(world)
    args: dict[str, object] = {"agent_id": "alice", **bad}
    with pytest.raises(InvalidInput):
        world.issue_token("gov", **args)  # type: ignore[arg-type]
    assert _counts(world) == before


def test_a_token_for_an_unknown_agent_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        world.issue_token("gov", "ghost")


def test_tokens_on_postgresql(pg_url: str, tmp_path: Path, pdp_client: CerbosPdp) -> None:
    """The same calls on a real PostgreSQL: issue, authenticate, list, revoke, refused next."""
    world = open_pdp_world(pg_url, pdp_client, tmp_path / "artifacts")
    try:
        add_agent(world, "alice", ["state.write"])
        token = world.issue_token("gov", "alice", expires_in_s=3600, label="pg")
        assert token.token is not None
        read = _read(world)
        assert authenticate(read, token.token, world.clock.now_us()).agent_id == "alice"
        assert [t.token_id for t in world.list_tokens("alice")] == [token.token_id]
        world.revoke_token("alice", token.token_id)
        with pytest.raises(Unauthenticated):
            authenticate(read, token.token, world.clock.now_us())
        _, secret = parse_token(token.token)
        assert secret not in json.dumps(read.events(0))
    finally:
        close_world(world)
