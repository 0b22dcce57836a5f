"""Review finding 2 (issue 9): the conflict room cannot be squatted. Its id is ``conflict-<term>`` and the
claimant picks the term; an agent with ``room.open`` that creates that room first would own it, the
controller's seating would be denied and the governor's resolution could not close it. The World refuses
an agent's room ids in the controller's namespace, rules may only use that namespace, and the controller
never treats a room it finds there as its own unless its agent opened it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from engine.controller.actions import OpenConflictRoom
from engine.errors import InvalidInput
from engine.policy.model import CONTROLLER_ROOM_PREFIX
from engine.world import CONTROLLER_AGENT, World
from tests.conftest import add_agent, book_of
from tests.mvp.support import GOV, controller_decisions, runner_for


def _contest(world: World, term: str) -> None:
    world.append_event("alice", "claim.asserted", {"term": term, "claim": "c-a", "value": "A"})
    world.append_event("mallory", "claim.asserted", {"term": term, "claim": "c-m", "value": "M"})


@pytest.mark.parametrize("room_id", ["conflict-t2", f"{CONTROLLER_ROOM_PREFIX}anything", "conflict-"])
def test_an_agent_cannot_open_a_room_in_the_controllers_namespace(pworld: World, room_id: str) -> None:
    add_agent(pworld, "mallory", ["state.write", "room.open"])
    for actor in ("mallory", GOV):  # governors too: the namespace is the controller's
        before = book_of(pworld).store.read.last_seq()
        with pytest.raises(InvalidInput) as refused:
            pworld.create_room(actor, "my room", room_id=room_id)
        assert refused.value.field == "room_id"
        assert book_of(pworld).store.read.last_seq() == before  # nothing written, not even a denial
    assert pworld.create_room("mallory", "my room", room_id="my-conflict-t2").opened_by == "mallory"


def test_rules_may_only_name_the_controllers_namespace() -> None:
    assert OpenConflictRoom().room_prefix == CONTROLLER_ROOM_PREFIX
    assert OpenConflictRoom(room_prefix=f"{CONTROLLER_ROOM_PREFIX}x-").room_prefix.startswith(CONTROLLER_ROOM_PREFIX)
    with pytest.raises(ValidationError):
        OpenConflictRoom(room_prefix="room-")


def test_the_squat_fails_and_the_governor_closes_the_conflict_room(pworld: World) -> None:
    add_agent(pworld, "alice", ["state.write"])
    add_agent(pworld, "mallory", ["state.write", "room.open"])
    runner = runner_for(pworld, {})
    try:
        runner.run_until_quiet(max_rounds=10)
        with pytest.raises(InvalidInput):
            pworld.create_room("mallory", "my room", room_id="conflict-t2")
        _contest(pworld, "t2")
        runner.run_until_quiet(max_rounds=10)
        room = pworld.get_room("conflict-t2", actor=GOV)
        assert room.opened_by == CONTROLLER_AGENT
        assert {m.agent_id for m in pworld.room_members("conflict-t2", actor=GOV)} == {"alice", "mallory"}
        pworld.append_event(GOV, "conflict.resolved", {"term": "t2", "value": "A"})
        runner.run_until_quiet(max_rounds=10)
        assert pworld.get_room("conflict-t2", actor=GOV).status.value == "closed"
    finally:
        runner.close()


def test_the_controller_never_seats_agents_in_a_room_someone_else_opened(pworld: World,
                                                                         monkeypatch: Any) -> None:
    """A world written before the namespace was refused may hold a squatted room: the controller records
    ``room_taken`` and seats nobody in it."""
    add_agent(pworld, "alice", ["state.write"])
    add_agent(pworld, "mallory", ["state.write", "room.open"])
    with monkeypatch.context() as old_world:  # the World as it was: no namespace check
        old_world.setattr("engine.world.rooms._reserved_room", lambda actor, room_id: None)
        pworld.create_room("mallory", "my room", room_id="conflict-t3")
    runner = runner_for(pworld, {})
    try:
        runner.run_until_quiet(max_rounds=10)
        _contest(pworld, "t3")
        runner.run_until_quiet(max_rounds=10)
    finally:
        runner.close()
    joins = [d for d in controller_decisions(pworld, "topology") if d.get("room") == "conflict-t3"]
    assert [d.get("error") for d in joins] == ["room_taken"]
    assert [m.agent_id for m in pworld.room_members("conflict-t3", actor=GOV)] == ["mallory"]
