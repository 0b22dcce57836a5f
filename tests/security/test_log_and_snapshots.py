"""Review findings 1 and 6 (issue 9): a whole-state image is the runtime's, and the log shows row images only
from the tables it lists, never a snapshot's; a room's discussion is sealed in the log from every reader
that is not an active member (governors included), as ``room_discussion`` refuses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.commands import COMMANDS, RUNTIME_CALLS
from engine.errors import NotPermitted
from engine.world import World
from engine.world.log_view import LOG_TABLES
from store import STATE_TABLE_KEYS
from store.schema import TABLES
from tests.conftest import add_agent, book_of, close_world, open_local_world

GOV = "gov"
SECRET = "alice's plan 5eC12E7"
BODY = "room-only remark b0d7"


def _log_text(world: World, reader: str | None) -> str:
    return "".join(e.model_dump_json() for e in world.events(0, 100_000, actor=reader))


def test_the_world_takes_no_snapshot_and_the_book_does() -> None:
    assert not hasattr(World, "take_snapshot")
    assert "take_snapshot" not in COMMANDS and "take_snapshot" in RUNTIME_CALLS


@pytest.mark.parametrize("reader", ["mallory", GOV, "alice"])
def test_a_snapshot_never_shows_its_image_in_the_log(pworld: World, reader: str) -> None:
    add_agent(pworld, "alice", ["memory.write"])
    add_agent(pworld, "mallory", ["state.write"])
    pworld.store_memory("alice", SECRET, "observation")
    book_of(pworld).take_snapshot(GOV)
    events = pworld.events(0, 100_000, actor=reader)
    (taken,) = [e for e in events if e.event_type == "snapshot.taken"]
    if reader == GOV:  # the governor's audit view: the snapshot's row, its image sealed
        (row,) = taken.changes
        assert (row.table, row.values) == ("snapshots", {"sealed": True})
        assert "snapshot_id" in row.key
    text = "".join(e.model_dump_json() for e in events)
    assert (SECRET in text) == (reader == "alice")  # only its author sees its private memory


def test_the_log_of_a_world_without_pdp_shows_no_snapshot_image(tmp_path: Path) -> None:
    world = open_local_world(f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "artifacts")
    try:
        world.store_memory("alice", SECRET, "observation")
        before = _log_text(world, None).count(SECRET)
        book_of(world).take_snapshot("alice")
        assert _log_text(world, None).count(SECRET) == before  # the image added no copy
        assert book_of(world).rebuild_state(from_snapshot=True) == book_of(world).state_image()
    finally:
        close_world(world)


def test_every_table_is_listed_for_the_log_or_sealed() -> None:
    assert "snapshots" in TABLES and "snapshots" not in LOG_TABLES
    assert set(STATE_TABLE_KEYS) <= LOG_TABLES  # each state table's objects are readable (or sealed later)
    assert set(TABLES) >= LOG_TABLES


def test_a_room_discussion_is_sealed_in_the_log_for_non_members(pworld: World) -> None:
    add_agent(pworld, "alice", ["room.open"])
    add_agent(pworld, "bob")
    pworld.create_room("alice", "private talk", members=["bob"], room_id="r2")
    said = pworld.discuss("alice", "r2", BODY, payload={"hint": BODY})
    with pytest.raises(NotPermitted):
        pworld.room_discussion("r2", actor=GOV)
    assert BODY not in _log_text(pworld, GOV)
    (event,) = [e for e in pworld.events(0, 1000, actor=GOV) if e.event_type == "room.discussed"]
    assert event.payload == {"sealed": True} and event.result["sealed"] is True
    assert event.result["event_id"] == said.event_id  # the envelope stays
    assert BODY in _log_text(pworld, "alice")  # a member reads it, as room_discussion lets it
    pworld.leave_room("alice", "r2")
    assert BODY not in _log_text(pworld, "alice")  # not after leaving
