"""Operation identity holds for session calls whose actor is derived from their target: a retry is answered
from the ledger before the target (which the first attempt changed) is resolved again."""

from __future__ import annotations

import pytest

from engine.errors import OperationConflict
from engine.world import World
from tests.conftest import book_of


def test_a_retried_detach_returns_the_original_session(world: World) -> None:
    world.register_agent("alice", "Alice", "worker", "t-a")
    first = world.detach_session("term:t-a", op_id="op-detach-1")
    events = book_of(world).store.read.count("events")
    again = world.detach_session("term:t-a", op_id="op-detach-1")  # the terminal has no live session now
    assert again == first
    assert book_of(world).store.read.count("events") == events
    with pytest.raises(OperationConflict):
        world.activate_session("term:t-a", op_id="op-detach-1")


def test_a_retried_unregister_returns_the_original_sessions(world: World) -> None:
    world.register_agent("bob", "Bob", "worker", "t-b")
    first = world.unregister_agent("term:t-b", op_id="op-unreg-1")
    assert [s.status.value for s in first] == ["offline"]
    assert world.unregister_agent("term:t-b", op_id="op-unreg-1") == first
    with pytest.raises(OperationConflict):
        world.unregister_agent("agent:bob", op_id="op-unreg-1")
