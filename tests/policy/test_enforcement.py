"""Every World call is decided by the real PDP before it acts; a denial is typed, audited, changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.errors import InvalidInput, NotPermitted, PolicyDenied, PolicyEpochChanged
from engine.world import World
from store import Update, WriteRequest
from tests.conftest import add_agent, book_of

ALL = ["state.write", "task.create", "task.work", "task.assign", "memory.write", "memory.review",
       "memory.invoke", "artifact.write", "artifact.invoke", "wake.enqueue", "handoff.create", "room.open",
       "message.send", "topology.write"]


def without_events(counts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in counts.items() if not k.startswith("events")}


WRITES: list[tuple[str, Callable[[World], Any]]] = [
    ("state write", lambda w: w.compare_and_set_state("mallory", "k", 0, 1)),
    ("task create", lambda w: w.create_task("mallory", "x")),
    ("memory create", lambda w: w.store_memory("mallory", "x", "observation")),
    ("artifact create", lambda w: w.register_artifact("mallory", "doc", b"x")),
    ("wake enqueue", lambda w: w.enqueue_wake("mallory", "alice", "ping", "k-m")),
    ("room create", lambda w: w.create_room("mallory", "g")),
    ("message send", lambda w: w.send_message("mallory", "c", "all", "hi")),
    ("topology write", lambda w: w.set_topology_edge("mallory", "alice", "mallory", "info")),
    ("tool invoke", lambda w: w.invoke("mallory", "tool", "deploy")),
    ("grant itself", lambda w: w.grant("mallory", "mallory", capabilities=ALL)),
]


@pytest.fixture
def team(pworld: World) -> World:
    add_agent(pworld, "alice", ALL, clearance=3)
    add_agent(pworld, "mallory")  # registered, live, but granted nothing
    return pworld


@pytest.mark.parametrize(("name", "call"), WRITES, ids=[w[0] for w in WRITES])
def test_a_write_without_authority_is_denied_audited_and_changes_nothing(
        team: World, name: str, call: Callable[[World], Any]) -> None:
    before = book_of(team).store.read.counts_and_versions()
    with pytest.raises(PolicyDenied) as denied:
        call(team)
    assert denied.value.policy_epoch == team.current_policy_epoch().epoch  # type: ignore[union-attr]
    assert without_events(book_of(team).store.read.counts_and_versions()) == without_events(before)
    audit = team.events(actor="gov", newest=True, limit=1)[0]
    assert (audit.event_type, audit.actor_id, audit.changes) == ("policy.denied", "mallory", [])


def test_an_allowed_write_records_its_policy_epoch(team: World) -> None:
    team.compare_and_set_state("alice", "plan", 0, {"step": 1})
    event = team.events(actor="alice", newest=True, limit=1)[0]
    assert event.policy_epoch == team.current_policy_epoch().epoch  # type: ignore[union-attr]
    assert event.policy_epoch is not None and event.policy_epoch.startswith("p-")


def test_reads_are_decided_too(team: World) -> None:
    with pytest.raises(InvalidInput):
        team.get_state("plan")  # who is reading?
    secret = team.store_memory("alice", "alice's own", "observation")
    with pytest.raises(PolicyDenied):
        team.get_memory("mallory", secret.memory_id)
    assert secret.memory_id not in {m.memory_id for m in team.list_memory("mallory")}
    assert team.get_memory("alice", secret.memory_id).content == "alice's own"


def test_an_unregistered_principal_is_refused(team: World) -> None:
    with pytest.raises(NotPermitted):
        team.compare_and_set_state("ghost", "k", 0, 1)


def test_offline_agents_may_read_but_not_write(team: World) -> None:
    team.compare_and_set_state("alice", "k", 0, 1)
    team.unregister_agent("agent:alice", actor="alice")
    assert team.get_state("k", actor="alice").value == 1
    with pytest.raises(PolicyDenied):
        team.compare_and_set_state("alice", "k", 1, 2)


def test_capabilities_are_rechecked_on_every_call(team: World) -> None:
    team.compare_and_set_state("alice", "k", 0, 1)
    team.grant("gov", "alice", capabilities=["task.create"])  # state.write withdrawn
    with pytest.raises(PolicyDenied):
        team.compare_and_set_state("alice", "k", 1, 2)


def test_allowed_actions_lists_every_action_in_one_call(team: World) -> None:
    task = team.create_task("alice", "x")
    mine = team.allowed_actions("alice", "task", task.task_id)
    theirs = team.allowed_actions("mallory", "task", task.task_id)
    assert set(mine.allowed) | set(mine.denied) == {"read", "create", "assign", "claim", "complete", "fail",
                                                    "release", "abort"}
    assert {"assign", "abort", "read"} <= set(mine.allowed)
    assert "abort" in theirs.denied and "read" in theirs.allowed
    batch = team.allowed_actions_batch("alice", [("task", task.task_id), ("tool", "deploy"), ("topology", "world")])
    assert [b.kind for b in batch] == ["task", "tool", "topology"]
    assert batch[2].allowed == ["read", "write"]


def test_allowed_actions_rejects_unknown_kinds(team: World) -> None:
    with pytest.raises(InvalidInput):
        team.allowed_actions("alice", "spaceship", "x")


def test_the_gateway_refuses_a_write_decided_under_an_old_epoch(team: World) -> None:
    team.compare_and_set_state("alice", "k", 0, 1)
    before = book_of(team).store.read.counts_and_versions()
    stale = WriteRequest(op_id="op-stale", command="compare_and_set_state", request_hash="0" * 64,
                         actor_id="alice", event_id="evt_stale", event_type="state.set", subject_kind="state",
                         subject_id="k", created_at_us=1, result={}, policy_epoch="p-0000000000000000",
                         changes=[Update("state_entries", {"key": "k"}, 1, {"value": 2}, "state", "k")])
    with pytest.raises(PolicyEpochChanged) as err:
        book_of(team).store.decided_door().commit(stale)  # the agent-facing World's door to the gateway
    assert err.value.current == team.current_policy_epoch().epoch  # type: ignore[union-attr]
    assert book_of(team).store.read.counts_and_versions() == before


def test_join_never_merges_permissions(team: World) -> None:
    """MVP test 9 under the PDP: B joins A's room; A's private secret stays invisible to B."""
    add_agent(team, "bob", ["memory.write"], clearance=3)
    secret = team.store_memory("alice", "the secret", "verified_fact")
    room = team.create_room("alice", "work together")
    team.invite_to_room("alice", room.room_id, "bob")  # joining needs an invitation
    team.join_room("bob", room.room_id)
    assert secret.memory_id not in team.project_world("bob").memory_ids()
    with pytest.raises(PolicyDenied):
        team.get_memory("bob", secret.memory_id)
    shared_note = team.store_memory("alice", "for the room", "observation", scope="room", room_id=room.room_id)
    assert shared_note.memory_id in team.project_world("bob").memory_ids()


def test_s3_needs_an_approval_bound_to_the_exact_action(team: World) -> None:
    team.grant("gov", "alice", capabilities=[*ALL, "tool:deploy"], clearance=3)
    with pytest.raises(NotPermitted):
        team.invoke("alice", "tool", "deploy", side_effect="S3", payload={"env": "prod"})
    approval = team.request_approval("alice", "tool", "deploy", payload={"env": "prod"})
    with pytest.raises(PolicyDenied):
        team.approve("alice", approval.approval_id)  # nobody approves its own request
    team.approve("gov", approval.approval_id, ttl_seconds=60)
    with pytest.raises(NotPermitted, match="another action or payload"):
        team.invoke("alice", "tool", "deploy", side_effect="S3", payload={"env": "staging"},
                    approval_id=approval.approval_id)
    done = team.invoke("alice", "tool", "deploy", side_effect="S3", payload={"env": "prod"},
                       approval_id=approval.approval_id)
    assert done.approval_id == approval.approval_id
    with pytest.raises(NotPermitted, match="consumed"):
        team.invoke("alice", "tool", "deploy", side_effect="S3", payload={"env": "prod"},
                    approval_id=approval.approval_id)


def test_an_expired_approval_is_refused(team: World) -> None:
    team.grant("gov", "alice", capabilities=["tool:deploy"])
    approval = team.request_approval("alice", "tool", "deploy")
    team.approve("gov", approval.approval_id, ttl_seconds=5)
    team.clock.advance(6)  # type: ignore[attr-defined]
    with pytest.raises(NotPermitted, match="expired"):
        team.invoke("alice", "tool", "deploy", side_effect="S3", approval_id=approval.approval_id)


def test_an_approval_dies_with_its_policy_epoch(team: World) -> None:
    team.grant("gov", "alice", capabilities=["tool:deploy"])
    approval = team.request_approval("alice", "tool", "deploy")
    team.approve("gov", approval.approval_id, ttl_seconds=600)
    current = team.current_policy_epoch()
    assert current is not None
    team.clock.advance(0.000001)  # type: ignore[attr-defined]
    book_of(team).activate_policy_epoch("p-next", "test")  # a newer epoch becomes current (as a reload records it)
    assert team.current_policy_epoch().epoch == "p-next"  # type: ignore[union-attr]
    with pytest.raises(Exception, match="epoch"):
        team.invoke("alice", "tool", "deploy", side_effect="S3", approval_id=approval.approval_id)


def test_an_agents_view_is_its_own_or_a_governors_without_its_private_memory(team: World) -> None:
    secret = team.store_memory("alice", "mine", "observation")
    with pytest.raises(NotPermitted):
        team.project_world("alice", actor="mallory")
    assert secret.memory_id in team.project_world("alice").memory_ids()
    governors = team.project_world("alice", actor="gov")  # a governor sees her view, sealed: no private memory
    assert governors.agent.agent_id == "alice" and secret.memory_id not in governors.memory_ids()


def test_a_known_agent_keeps_its_grants_when_it_registers_again(team: World) -> None:
    team.register_agent("alice", "Alice", "worker", "t-alice-2")  # a second terminal, no profiles given
    assert team.compare_and_set_state("alice", "still-granted", 0, 1).version == 1
    team.unregister_agent("agent:alice", actor="alice")
    team.register_agent("alice", "Alice", "worker", "t-alice-3")  # an offline agent recovers itself
    with pytest.raises(PolicyDenied):  # but cannot grant itself more
        team.register_agent("alice", "Alice", "worker", "t-alice-4", capability_profile={"capabilities": ["x.y"]})
