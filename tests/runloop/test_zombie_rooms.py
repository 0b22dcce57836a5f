"""A conflict room its agents abandon is a zombie: the run loop closes it by its stop condition."""

from __future__ import annotations

from engine.models.rooms import RoomStatus
from engine.runloop import InProcessRunner
from engine.world import World
from tests.conftest import add_agent, book_of


def conflict_room(world: World) -> InProcessRunner:
    """Two agents claim different values for one term: the controller opens the room ``conflict-plan``."""
    for name in ("a", "b"):
        add_agent(world, name, ["state.write"])
    runner = InProcessRunner(book_of(world), adapters={})
    runner.start()
    world.append_event("a", "claim.asserted", {"term": "plan", "claim": "a1", "value": "x"})
    world.append_event("b", "claim.asserted", {"term": "plan", "claim": "b1", "value": "y"})
    runner.run_until_quiet(max_rounds=20)
    return runner


def test_an_abandoned_conflict_room_is_closed_by_the_run_loop(pworld: World) -> None:
    runner = conflict_room(pworld)
    room = pworld.get_room("conflict-plan", actor="gov")
    assert room.status is RoomStatus.OPEN and room.stop_condition == "members:0|idle:3600"
    pworld.leave_room("a", "conflict-plan")
    assert runner.run_until_quiet(max_rounds=20).rooms_closed == 0   # b is still there
    pworld.leave_room("b", "conflict-plan")
    assert runner.run_until_quiet(max_rounds=20).rooms_closed == 1
    assert pworld.get_room("conflict-plan", actor="gov").status is RoomStatus.CLOSED
    runner.close()


def test_an_idle_conflict_room_is_closed_after_an_hour(pworld: World) -> None:
    runner = conflict_room(pworld)
    pworld.clock.advance(3599)  # type: ignore[attr-defined]
    assert runner.run_until_quiet(max_rounds=20).rooms_closed == 0
    pworld.clock.advance(2)  # type: ignore[attr-defined]
    assert runner.run_until_quiet(max_rounds=20).rooms_closed == 1
    runner.close()
