"""Migration 8: the events' subject index only for room events (issue 12, item 3).

A world written by the schema before migration 8 (``ix_events_subject`` on every event) is carried over on
SQLite and PostgreSQL: the old index is gone, the partial ``ix_events_room`` is there, every row is kept, the
room reads (discussion, stale-room idle check) answer as before and use the new index; a state
compare-and-set no longer writes an entry in any subject index. A new world ends with the same indexes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.policy.enforcement import LocalScopeRules
from engine.sources import ManualClock, SeededIds
from engine.world import World
from engine.world.book import open_world
from store import LATEST, Store, migrations
from tests.conftest import book_of, close_world, kept

BACKENDS = ["sqlite-file", pytest.param("postgres", marks=pytest.mark.postgres)]


def _url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return f"sqlite:///{tmp_path / 'world.db'}" if backend == "sqlite-file" else str(
        request.getfixturevalue("pg_url"))


def _event_indexes(world: World) -> dict[str, str]:
    return migrations.index_definitions(world_store(world).db, "events")


def _world_before_8(url: str, monkeypatch: pytest.MonkeyPatch, clock: ManualClock) -> World:
    """A world at schema 7 with its events indexed as migrations 1-7 left them (``ix_events_subject``)."""
    with monkeypatch.context() as old:
        old.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:7])
        old.setattr(migrations, "LATEST", 7)
        world = kept(open_world(url, policy=LocalScopeRules(), clock=clock, ids=SeededIds(4)))
    migrations.as_before_8(world_store(world).db)  # migration 1 as first released: the subject index
    assert world_store(world).schema_version() == 7
    assert "ix_events_subject" in _event_indexes(world) and "ix_events_room" not in _event_indexes(world)
    return world


def world_store(world: World) -> Store:
    return book_of(world).store


def _populate(world: World, clock: ManualClock) -> tuple[str, str]:
    for a in ("ann", "ben"):
        world.register_agent(a, a.title(), "worker", f"t-{a}")
    quiet = world.create_room("ann", "quiet room", members=["ben"], stop_condition="idle:60").room_id
    busy = world.create_room("ann", "busy room", members=["ben"], stop_condition="idle:60").room_id
    for n in range(5):
        world.discuss("ann" if n % 2 else "ben", busy, f"message {n}", payload={"n": n})
        world.compare_and_set_state("ann", f"k{n}", expected_version=0, value={"n": n})
    clock.advance(30)
    world.discuss("ben", busy, "still here")
    clock.advance(45)  # quiet: idle 75 s; busy: idle 45 s
    return quiet, busy


def _discussion(world: World, room: str) -> list[tuple[Any, ...]]:
    return [(m.event_id, m.sender, m.body, m.payload, m.seq) for m in world.room_discussion(room, limit=4)]


def _kept_rows(store: Store) -> dict[str, int]:
    return {k: v for k, v in store.read.counts_and_versions().items() if not k.startswith("schema_migrations")}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_world_before_8_is_carried_over(backend: str, tmp_path: Path, request: pytest.FixtureRequest,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    url = _url(backend, tmp_path, request)
    clock = ManualClock()
    world = _world_before_8(url, monkeypatch, clock)
    rooms = _populate(world, clock)
    store = world_store(world)
    before = _kept_rows(store), store.read.events(), _discussion(world, rooms[1])
    assert len(before[2]) == 4
    close_world(world)

    again = kept(open_world(url, policy=LocalScopeRules(), clock=clock, ids=SeededIds(5)))  # migrates to 8
    store = world_store(again)
    try:
        assert store.schema_version() == LATEST >= 8
        indexes = _event_indexes(again)
        assert "ix_events_subject" not in indexes
        assert "(subject_id, seq)" in indexes["ix_events_room"] and "'room'" in indexes["ix_events_room"]
        rows = _kept_rows(store)  # every row kept; tables of later migrations (9: controller_leases) are empty
        assert {k: v for k, v in rows.items() if k in before[0]} == before[0]
        assert all(v == 0 for k, v in rows.items() if k not in before[0])
        assert (store.read.events(), _discussion(again, rooms[1])) == before[1:]
        # the idle check reads each room's last activity: the quiet room (75 s) is closed, the busy one (45 s) not
        assert [r.room_id for r in again.close_stale_rooms("ann")] == [rooms[0]]
        assert "ix_events_room" in migrations.room_events_plan(store.db, rooms[1])
    finally:
        close_world(again)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_world_has_the_indexes_of_a_migrated_one(backend: str, tmp_path: Path,
                                                        request: pytest.FixtureRequest,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    old_url = _url(backend, tmp_path, request)
    old = _world_before_8(old_url, monkeypatch, ManualClock())
    close_world(old)
    migrated = kept(open_world(old_url, policy=LocalScopeRules()))
    new_url = f"sqlite:///{tmp_path / 'new.db'}" if backend == "sqlite-file" else str(
        request.getfixturevalue("pg_cluster").create_database())
    new = kept(open_world(new_url, policy=LocalScopeRules()))
    try:
        assert _event_indexes(migrated) == _event_indexes(new)
        assert "ix_events_room" in _event_indexes(new) and "ix_events_subject" not in _event_indexes(new)
        assert world_store(new).init(1) == []  # idempotent
    finally:
        close_world(migrated)
        close_world(new)
