"""Rooms (issue 9, "Rooms"): joining needs an invitation or the capability the room policy names; only a
member leaves itself, a moderator removes others (audited); blind answers are sealed from everyone,
governors included, until the reveal, through every read: get, list, projections, room answers and the
log's row images."""

from __future__ import annotations

import pytest

from engine.errors import NotPermitted, PolicyDenied
from engine.world import World
from tests.conftest import add_agent, book_of

GOV = "gov"


def staff(world: World) -> str:
    """ann opens a room with ben; cal is a colleague; oscar an outsider; mo a moderator (granted); jan holds
    room.join_any. Returns the room id."""
    add_agent(world, "ann", ["room.open", "memory.write", "state.write"])
    for name in ("ben", "cal", "oscar"):
        add_agent(world, name, ["memory.write", "state.write"])
    add_agent(world, "mo", ["state.write"])
    world.grant(GOV, "mo", role_id="moderator")
    add_agent(world, "jan", ["room.join_any"])
    return world.create_room("ann", "is the report right?", members=["ben"], room_id="r1").room_id


def active(world: World, room_id: str) -> set[str]:
    return {m.agent_id for m in world.room_members(room_id, actor=GOV)}


def test_an_outsider_cannot_join_without_an_invitation(pworld: World) -> None:
    room = staff(pworld)
    with pytest.raises(PolicyDenied):
        pworld.join_room("oscar", room)
    with pytest.raises(PolicyDenied):  # a member invites, it never seats anyone
        pworld.join_room("ben", room, agent_id="oscar")
    with pytest.raises(PolicyDenied):  # nobody invites itself in
        pworld.invite_to_room("oscar", room, "oscar")
    assert active(pworld, room) == {"ann", "ben"}
    assert book_of(pworld).store.read.get("room_members", room_id=room, agent_id="oscar") is None

    invitation = pworld.invite_to_room("ben", room, "oscar")  # a member invites
    assert (invitation.active, invitation.left_at_us) == (False, None)
    assert active(pworld, room) == {"ann", "ben"}  # an invitation is no membership: it shows nothing yet
    assert room not in book_of(pworld).store.read.active_rooms_of("oscar")
    assert pworld.join_room("oscar", room).active
    pworld.leave_room("oscar", room)
    with pytest.raises(PolicyDenied):  # leaving ended the invitation
        pworld.join_room("oscar", room)
    assert pworld.join_room("jan", room).active  # the capability the policy names needs no invitation


def test_only_a_member_leaves_itself_and_a_moderators_removal_is_audited(pworld: World) -> None:
    room = staff(pworld)
    pworld.invite_to_room("ann", room, "cal")
    pworld.join_room("cal", room)
    for actor in ("oscar", "ann", "cal"):  # an outsider, the opener, another member
        with pytest.raises(PolicyDenied) as err:
            pworld.leave_room(actor, room, agent_id="ben")
        assert (err.value.action, err.value.kind) == ("leave", "room")
    assert active(pworld, room) == {"ann", "ben", "cal"}

    removed = pworld.leave_room("mo", room, agent_id="ben")
    assert not removed.active
    (audit,) = [e for e in pworld.events(0, 1000, actor=GOV) if e.event_type == "room.member_removed"]
    assert (audit.actor_id, audit.subject_id, audit.payload) == ("mo", room, {"agent_id": "ben", "removed_by": "mo"})
    assert not [e for e in pworld.events(0, 1000, actor=GOV) if e.event_type == "room.left"]
    assert active(pworld, room) == {"ann", "cal"}
    with pytest.raises(PolicyDenied):  # a removed member needs a new invitation
        pworld.join_room("ben", room)
    assert pworld.leave_room("cal", room).active is False  # a member leaves itself: room.left
    assert [e.actor_id for e in pworld.events(0, 1000, actor=GOV) if e.event_type == "room.left"] == ["cal"]


def test_the_outsiders_attack_chain_fails_at_every_step(pworld: World) -> None:
    """The issue's chain: an outsider joins, removes a member who has not answered, answers, triggers the
    reveal and reads the other answers. Each step is refused and nothing is revealed."""
    room = staff(pworld)
    ann = pworld.commit_answer("ann", room, "ann's blind answer 7f3a")
    with pytest.raises(PolicyDenied):
        pworld.join_room("oscar", room)
    with pytest.raises(PolicyDenied):
        pworld.leave_room("oscar", room, agent_id="ben")
    with pytest.raises(NotPermitted):
        pworld.commit_answer("oscar", room, "anything")
    assert not any(a.revealed for a in pworld.room_answers(room, actor="ann"))
    assert pworld.room_answers(room, actor="oscar") == []
    with pytest.raises(PolicyDenied):
        pworld.get_memory("oscar", ann.memory_id)


def sealed_from(world: World, reader: str, memory_id: str, secret: str) -> bool:
    """``reader`` learns nothing of the memory through get, list, its own projection, the answerer's
    projection (when a governor may view it), the room's answers and the log (envelopes and row images)."""
    try:
        world.get_memory(reader, memory_id)
        return False
    except PolicyDenied:
        pass
    if memory_id in {m.memory_id for m in world.list_memory(reader)}:
        return False
    if memory_id in world.project_world(reader, budget=10_000).memory_ids():
        return False
    if reader == GOV:
        owner = book_of(world).store.read.get("memory", memory_id=memory_id)["owner"]  # type: ignore[index]
        if memory_id in world.project_world(owner, budget=10_000, actor=GOV).memory_ids():
            return False
    if memory_id in {a.memory_id for a in world.room_answers("r1", actor=reader)}:
        return False
    return all(secret not in e.model_dump_json() for e in world.events(0, 10_000, actor=reader))


def test_blind_answers_are_sealed_from_everyone_governors_included_until_the_reveal(pworld: World) -> None:
    room = staff(pworld)
    pworld.invite_to_room("ann", room, "cal")
    pworld.join_room("cal", room)
    a = pworld.commit_answer("ann", room, "ann answers 41c2")
    b = pworld.commit_answer("ben", room, "ben answers 9d0e")
    for reader in (GOV, "ben", "cal", "oscar", "mo"):
        assert sealed_from(pworld, reader, a.memory_id, "ann answers 41c2"), reader
    for reader in (GOV, "ann", "cal", "oscar"):
        assert sealed_from(pworld, reader, b.memory_id, "ben answers 9d0e"), reader
    assert pworld.get_memory("ann", a.memory_id).content == "ann answers 41c2"  # its author reads it

    assert pworld.commit_answer("cal", room, "cal answers 5b77").revealed  # the last commit reveals the round
    for reader in (GOV, "ben", "cal"):
        assert pworld.get_memory(reader, a.memory_id).content == "ann answers 41c2"
    assert any("ann answers 41c2" in e.model_dump_json() for e in pworld.events(0, 10_000, actor=GOV))
    assert sealed_from(pworld, "oscar", a.memory_id, "ann answers 41c2")  # outsiders never


def test_a_governor_who_joins_the_room_still_cannot_read_an_answer_before_the_reveal(pworld: World) -> None:
    room = staff(pworld)
    pworld.join_room(GOV, room)
    a = pworld.commit_answer("ann", room, "ann answers 77aa")
    assert sealed_from(pworld, GOV, a.memory_id, "ann answers 77aa")
