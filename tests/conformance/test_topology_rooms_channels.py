"""Conformance: the versioned topology, rooms and channel mailboxes."""

from __future__ import annotations

import pytest

from engine.errors import IllegalTransition, NotPermitted, TargetUnresolved, VersionConflict
from engine.models.rooms import RoomStatus
from engine.world import World


@pytest.fixture
def team(world: World) -> World:
    for name, role, platform in (("a", "writer", "cc"), ("b", "reviewer", "pg"), ("c", "reviewer", "pg")):
        world.register_agent(name, name.upper(), role, f"t-{name}", platform=platform)
        world.activate_session(f"term:t-{name}")
    return world


def test_every_topology_change_is_a_new_version(team: World) -> None:
    assert team.get_topology().version == 0
    e = team.set_topology_edge("ctl", "a", "b", "info", reason="share deltas")
    assert (e.topology_version, team.get_topology().version) == (1, 1)
    team.set_topology_edge("ctl", "a", "b", "info", active=False, expected_topology_version=1)
    topo = team.get_topology()
    assert (topo.version, topo.edges) == (2, [])
    with pytest.raises(VersionConflict) as err:
        team.set_topology_edge("ctl", "b", "c", "room", expected_topology_version=1)
    assert err.value.current == 2


def test_room_lifecycle(team: World) -> None:
    room = team.create_room("a", "resolve the conflict", members=["b"], stop_condition="answers:all")
    team.join_room("c", room.room_id)
    assert {m.agent_id for m in team.room_members(room.room_id)} == {"a", "b", "c"}
    team.leave_room("c", room.room_id)
    closed = team.close_room("a", room.room_id)
    assert closed.status is RoomStatus.CLOSED and team.room_members(room.room_id) == []
    with pytest.raises(IllegalTransition):
        team.join_room("c", room.room_id)


def test_direct_message_and_ack(team: World) -> None:
    team.send_message("a", "general", "agent", "hello b", recipient="b")
    inbox = team.unread("agent:b")
    assert [i.message.body for i in inbox] == ["hello b"]
    d = inbox[0].delivery
    with pytest.raises(NotPermitted):
        team.claim_message("c", d.delivery_id)
    team.claim_message("b", d.delivery_id)
    team.ack_message("b", d.delivery_id)
    assert team.unread("agent:b") == []


def test_any_mailbox_first_claim_wins(team: World) -> None:
    sent = team.send_message("a", "jobs", "any", "who takes it?")
    did = sent.deliveries[0].delivery_id
    team.claim_message("b", did)
    with pytest.raises(IllegalTransition):
        team.claim_message("c", did)


def test_role_pool_reaches_only_that_role(team: World) -> None:
    sent = team.send_message("a", "review", "role", "please review", recipient="reviewer")
    assert [i.message.message_id for i in team.unread("agent:c")] == [sent.message.message_id]
    assert team.unread("agent:a") == []
    with pytest.raises(NotPermitted):
        team.claim_message("a", sent.deliveries[0].delivery_id)


def test_broadcast_reaches_active_agents_except_the_sender(team: World) -> None:
    team.unregister_agent("agent:c")
    sent = team.send_message("a", "all-hands", "all", "status?")
    assert sorted(d.recipient or "" for d in sent.deliveries) == ["b"]


def test_unread_needs_a_receiver_among_the_targets_identities(team: World) -> None:
    team.send_message("a", "general", "agent", "hi", recipient="b")
    with pytest.raises(TargetUnresolved):
        team.unread("term:t-b", receiver="c")
    assert len(team.unread("term:t-b", receiver="b")) == 1


def test_messages_create_no_ownership(team: World) -> None:
    task = team.create_task("a", "x")
    team.send_message("a", "general", "agent", f"please do {task.task_id}", recipient="b")
    assert team.get_task(task.task_id).assignee is None
