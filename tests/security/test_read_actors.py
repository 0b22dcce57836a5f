"""Review finding 4 (issue 9): reads that took no reader. ``unread("agent:bob")`` was decided as bob, so any
caller read bob's direct messages; ``subscriptions()`` and ``resolve_target()`` skipped the PDP. Every read
now takes the reading actor (``actor=``) and is decided as that actor; with a PDP a missing actor is
``InvalidInput``, as for every other read."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.commands import COMMANDS
from engine.errors import InvalidInput
from engine.world import World
from tests.conftest import add_agent, close_world, open_local_world

DM = "for bob only 0d1e"
#: Public World calls that are no read of the world's objects (the policy epoch's name is public; a planned
#: batch's writes are each a command with its own actor).
NOT_READS = {"execute", "current_policy_epoch", "planning", "commit_planned", "reading"}


def _dm(world: World) -> None:
    add_agent(world, "alice", ["message.send"])
    add_agent(world, "bob")
    add_agent(world, "mallory")
    world.send_message("alice", "general", "agent", DM, recipient="bob")
    world.subscribe("bob", "task-1")


READS: dict[str, Callable[[World, str | None], Any]] = {
    "unread": lambda w, actor: w.unread("agent:bob", actor=actor),
    "subscriptions": lambda w, actor: w.subscriptions(actor=actor),
    "resolve_target": lambda w, actor: w.resolve_target("agent:bob", actor=actor),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_read_without_a_reader_is_refused_under_the_pdp(pworld: World, read: str) -> None:
    _dm(pworld)
    with pytest.raises(InvalidInput) as refused:
        READS[read](pworld, None)
    assert refused.value.field == "actor"
    assert READS[read](pworld, "bob")  # the reader named: decided as it


def test_unread_is_decided_as_its_reader_not_as_the_target(pworld: World) -> None:
    _dm(pworld)
    assert [i.message.body for i in pworld.unread("agent:bob", actor="bob")] == [DM]
    assert pworld.unread("agent:bob", actor="mallory") == []  # someone else's inbox shows nothing
    assert pworld.unread("agent:bob", receiver="bob", actor="mallory") == []
    assert [i.message.body for i in pworld.unread("agent:bob", actor="gov")] == [DM]  # a governor reads it


def test_without_a_pdp_reads_need_no_reader(tmp_path: Path) -> None:
    world = open_local_world(f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "artifacts")
    try:
        world.register_agent("bob", "Bob", "worker", "t-bob")
        world.activate_session("term:t-bob")
        world.subscribe("bob", "task-1")
        assert len(world.resolve_target("agent:bob")) == 1
        assert [s.subject_id for s in world.subscriptions()] == ["task-1"]
        assert world.unread("agent:bob") == []
    finally:
        close_world(world)


def test_every_public_read_takes_its_reader() -> None:
    for name, member in inspect.getmembers(World, inspect.isfunction):
        if name.startswith("_") or name in COMMANDS or name in NOT_READS:
            continue
        assert "actor" in inspect.signature(member).parameters, f"World.{name} reads without a reader"
