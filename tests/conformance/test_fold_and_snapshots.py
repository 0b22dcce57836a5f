"""Conformance: the event log folds to exactly the state; snapshot + tail folds to the same."""

from __future__ import annotations

from engine.fold import fold
from engine.world import World
from tests.conftest import book_of


def busy_world(world: World) -> None:
    """A little of everything: agents, state, tasks, memory, wakes, receipts, handoffs, artifacts, rooms..."""
    for name in ("a", "b"):
        world.register_agent(name, name, "worker", f"t-{name}")
        world.activate_session(f"term:t-{name}")
    world.compare_and_set_state("a", "plan", 0, {"step": 1})
    world.compare_and_set_state("b", "plan", 1, {"step": 2})
    task = world.create_task("a", "do it")
    world.claim_task("a", task.task_id)
    m = world.store_memory("a", "note", "observation")
    world.propose_memory("a", m.memory_id)
    world.promote_memory("b", m.memory_id)
    world.enqueue_wake("a", "b", "look", "k1")
    wake = world.claim_wake("w")
    assert wake is not None
    world.ack_wake("w", wake.wake_id, "no_action")
    art = world.register_artifact("a", "doc", b"x", task_id=task.task_id)
    world.new_artifact_version("a", art.artifact_id, b"y")
    h = world.create_handoff("a", "b", task.task_id, "finish", artifact_refs=[art.artifact_id])
    world.accept_handoff("b", h.handoff_id)
    room = world.create_room("a", "talk", members=["b"])
    world.leave_room("b", room.room_id)
    world.set_topology_edge("a", "a", "b", "info")
    world.send_message("a", "c", "all", "hi")


def test_fold_of_the_log_equals_the_state(world: World) -> None:
    busy_world(world)
    assert book_of(world).rebuild_state(from_snapshot=False) == book_of(world).state_image()


def test_snapshot_plus_tail_equals_the_state(world: World) -> None:
    busy_world(world)
    snap = book_of(world).take_snapshot("a")
    world.compare_and_set_state("a", "plan", 2, {"step": 3})
    world.store_memory("b", "after the snapshot", "observation")
    assert book_of(world).rebuild_state(from_snapshot=True) == book_of(world).state_image()
    assert book_of(world).rebuild_state(from_snapshot=False) == book_of(world).state_image()
    assert snap.at_seq < world.events(newest=True, limit=1)[0].seq


def test_snapshots_never_delete_the_log(world: World) -> None:
    busy_world(world)
    before = len(world.events(limit=100_000))
    book_of(world).take_snapshot("a")
    assert len(world.events(limit=100_000)) == before + 1


def test_fold_is_a_pure_function_of_the_events(world: World) -> None:
    busy_world(world)
    rows = book_of(world).store.read.events()
    assert fold(rows) == fold(rows)
    assert fold(rows[: len(rows) // 2]) != fold(rows)
