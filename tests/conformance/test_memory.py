"""Conformance: scoped memory, review before sharing, revocation through provenance."""

from __future__ import annotations

import pytest

from engine.errors import IllegalTransition, InvalidInput, NotPermitted
from engine.models.memory import MemoryScope, MemoryStatus
from engine.world import World


@pytest.fixture
def team(world: World) -> World:
    for name in ("a", "b", "rev"):
        world.register_agent(name, name.upper(), "worker", f"t-{name}")
    return world


def test_private_memory_is_invisible_to_others(team: World) -> None:
    """MVP test 5: A's private memory x is not in B's projection."""
    x = team.store_memory("a", "the secret plan", "hypothesis")
    assert x.memory_id in team.project_world("a").memory_ids()
    assert x.memory_id not in team.project_world("b").memory_ids()
    with pytest.raises(NotPermitted):
        team.get_memory("b", x.memory_id)


def test_candidate_is_not_a_stable_shared_fact_before_review(team: World) -> None:
    """MVP test 6: a proposed hypothesis is a CANDIDATE, not among stable shared facts until reviewed."""
    x = team.store_memory("a", "x holds", "hypothesis")
    team.propose_memory("a", x.memory_id)
    for agent in ("a", "b", "rev"):
        assert x.memory_id not in {m.memory_id for m in team.project_world(agent).shared_facts}
    team.review_memory("rev", x.memory_id)
    shared = team.promote_memory("rev", x.memory_id)
    assert (shared.status, shared.scope) == (MemoryStatus.SHARED, MemoryScope.SHARED)
    assert x.memory_id in {m.memory_id for m in team.project_world("b").shared_facts}


def test_owner_cannot_promote_its_own_memory(team: World) -> None:
    x = team.store_memory("a", "self-approved", "inference")
    team.propose_memory("a", x.memory_id)
    with pytest.raises(NotPermitted):
        team.promote_memory("a", x.memory_id)


def test_private_memory_cannot_jump_to_shared(team: World) -> None:
    x = team.store_memory("a", "jump", "inference")
    with pytest.raises(IllegalTransition):
        team.promote_memory("rev", x.memory_id)
    with pytest.raises(InvalidInput):
        team.store_memory("a", "direct", "inference", scope="shared")


def test_archive_reopen_supersede(team: World) -> None:
    old = team.store_memory("a", "v1", "decision")
    new = team.store_memory("a", "v2", "decision")
    for m in (old, new):
        team.propose_memory("a", m.memory_id)
        team.promote_memory("rev", m.memory_id)
    superseded = team.supersede_memory("a", old.memory_id, new.memory_id)
    assert (superseded.status, superseded.superseded_by) == (MemoryStatus.SUPERSEDED, new.memory_id)
    assert team.get_memory("b", new.memory_id).supersedes == old.memory_id
    archived = team.archive_memory("a", new.memory_id)
    assert archived.scope is MemoryScope.ARCHIVE
    assert team.reopen_memory("rev", new.memory_id, "doubt").status is MemoryStatus.REOPENED


def test_revoking_a_source_revokes_what_was_derived_from_it(team: World) -> None:
    src = team.store_memory("a", "raw", "observation")
    derived = team.store_memory("a", "from raw", "inference", source_refs=[src.memory_id])
    twice = team.store_memory("a", "from derived", "inference", source_refs=[derived.memory_id])
    other = team.store_memory("a", "unrelated", "inference")
    team.revoke_memory("a", src.memory_id, "source withdrawn")
    statuses = {m: team.get_memory("a", m).status for m in (src.memory_id, derived.memory_id, twice.memory_id)}
    assert set(statuses.values()) == {MemoryStatus.REVOKED}
    assert team.get_memory("a", other.memory_id).status is MemoryStatus.PRIVATE


def test_room_memory_is_visible_to_active_members_only(team: World) -> None:
    room = team.create_room("a", "settle x", members=["b"])
    note = team.store_memory("b", "room note", "observation", scope="room", room_id=room.room_id)
    assert note.memory_id in team.project_world("a").memory_ids()
    assert note.memory_id not in team.project_world("rev").memory_ids()
    with pytest.raises(NotPermitted):
        team.store_memory("rev", "gatecrash", "observation", scope="room", room_id=room.room_id)
    team.leave_room("a", room.room_id)
    assert note.memory_id not in team.project_world("a").memory_ids()


def test_join_never_grants_a_secret(team: World) -> None:
    """MVP test 9 at the store level: after B joins A's room, A's private secret stays invisible to B."""
    secret = team.store_memory("a", "secret", "verified_fact")
    room = team.create_room("a", "work together")
    team.join_room("b", room.room_id)
    assert secret.memory_id not in team.project_world("b").memory_ids()


def test_ttl_expires_memory_from_views(team: World, clock) -> None:  # type: ignore[no-untyped-def]
    m = team.store_memory("a", "short-lived", "observation", ttl_seconds=60)
    assert m.memory_id in team.project_world("a").memory_ids()
    clock.advance(61)
    assert m.memory_id not in team.project_world("a").memory_ids()
