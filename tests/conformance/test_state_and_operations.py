"""Conformance: shared state CAS, operation identity and the event each write appends."""

from __future__ import annotations

import pytest

from engine.errors import AlreadyExists, NotFound, OperationConflict, VersionConflict
from engine.world import Cause, World
from tests.conftest import book_of


@pytest.fixture
def alice(world: World) -> str:
    world.register_agent("alice", "Alice", "worker", "t-alice")
    world.register_agent("bob", "Bob", "worker", "t-bob")
    return "alice"


def test_create_then_update_advances_version_by_exactly_one(world: World, alice: str) -> None:
    assert world.compare_and_set_state(alice, "k", 0, 1).version == 1
    assert world.compare_and_set_state(alice, "k", 1, 2).version == 2
    assert world.get_state("k").value == 2


def test_stale_write_is_a_conflict_carrying_the_current_version(world: World, alice: str) -> None:
    """MVP test 4: A based on version 5, B commits version 6 first, A's commit is refused."""
    world.compare_and_set_state(alice, "k", 0, 0)
    for v in range(1, 5):
        world.compare_and_set_state(alice, "k", v, v)
    assert world.get_state("k").version == 5
    world.compare_and_set_state("bob", "k", 5, "bob")
    with pytest.raises(VersionConflict) as err:
        world.compare_and_set_state(alice, "k", 5, "alice")
    assert (err.value.expected, err.value.current) == (5, 6)
    assert world.get_state("k").value == "bob"


def test_creating_an_existing_key_is_already_exists(world: World, alice: str) -> None:
    world.compare_and_set_state(alice, "k", 0, 1)
    with pytest.raises(AlreadyExists):
        world.compare_and_set_state(alice, "k", 0, 2)


def test_updating_a_missing_key_is_not_found(world: World, alice: str) -> None:
    with pytest.raises(NotFound):
        world.compare_and_set_state(alice, "nope", 3, 1)


def test_event_records_actor_versions_causation_and_correlation(world: World, alice: str) -> None:
    world.compare_and_set_state(alice, "k", 0, 1, cause=Cause(causation_id="evt_root", correlation_id="chain1"))
    event = world.events(newest=True, limit=1)[0]
    assert (event.event_type, event.actor_id, event.subject_id) == ("state.set", alice, "k")
    assert (event.base_version, event.resulting_version) == (0, 1)
    assert (event.causation_id, event.correlation_id) == ("evt_root", "chain1")
    assert event.changes[0].table == "state_entries"


def test_same_operation_id_and_request_returns_the_original_result_once(world: World, alice: str) -> None:
    first = world.compare_and_set_state(alice, "k", 0, 1, op_id="op-1")
    before = len(world.events(limit=10_000))
    again = world.compare_and_set_state(alice, "k", 0, 1, op_id="op-1")
    assert again == first
    assert len(world.events(limit=10_000)) == before
    assert world.get_state("k").version == 1


def test_same_operation_id_with_a_different_request_is_an_error(world: World, alice: str) -> None:
    world.compare_and_set_state(alice, "k", 0, 1, op_id="op-1")
    with pytest.raises(OperationConflict):
        world.compare_and_set_state(alice, "k", 0, 2, op_id="op-1")
    with pytest.raises(OperationConflict):
        world.create_task(alice, "other command, same id", op_id="op-1")
    assert world.get_state("k").value == 1


def test_a_failed_write_records_no_operation(world: World, alice: str) -> None:
    world.compare_and_set_state(alice, "k", 0, 1)
    with pytest.raises(VersionConflict):
        world.compare_and_set_state(alice, "k", 7, 2, op_id="op-x")
    assert book_of(world).store.operation("op-x") is None
    assert world.compare_and_set_state(alice, "k", 1, 2, op_id="op-x").version == 2


def test_append_event_changes_no_state_and_is_in_the_log(world: World, alice: str) -> None:
    image = book_of(world).state_image()
    ref = world.append_event(alice, "conflict.raised", {"claim": "x"}, subject_kind="claim", subject_id="x")
    assert book_of(world).state_image() == image
    last = world.events(newest=True, limit=1)[0]
    assert (last.event_id, last.payload) == (ref.event_id, {"claim": "x"})


def test_events_are_in_strictly_increasing_log_order(world: World, alice: str) -> None:
    for i in range(5):
        world.compare_and_set_state(alice, f"k{i}", 0, i)
    seqs = [e.seq for e in world.events(limit=100)]
    assert seqs == sorted(set(seqs))
    assert [e.seq for e in world.events(after_seq=seqs[2])] == seqs[3:]
