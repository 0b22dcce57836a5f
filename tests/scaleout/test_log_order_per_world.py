"""Log order per world (issue 13): on PostgreSQL the log lock is keyed by the world (its database and its
schema), so two worlds' writers never wait on each other; within a world positions are still handed out in
commit order, and each world's log folds to its state."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import InvalidInput
from engine.world import World
from store import world_in_schema
from tests.conftest import book_of, close_world, open_local_world

WAIT_S = 10.0


@pytest.fixture
def two_worlds(pg_url: str, tmp_path: Path) -> Iterator[tuple[World, World]]:
    """Worlds ``a`` and ``b`` in two schemas of ONE database (the worst case: one database's advisory locks)."""
    url_a, url_b = world_in_schema(pg_url, "world_a"), world_in_schema(pg_url, "world_b")
    a, b = open_local_world(url_a, tmp_path / "a"), open_local_world(url_b, tmp_path / "b")
    for world in (a, b):
        world.register_agent("x", "X", "worker", "t-x")
    yield a, b
    close_world(a)
    close_world(b)


def commit_in_thread(world: World, key: str) -> threading.Thread:
    thread = threading.Thread(target=world.compare_and_set_state, args=("x", key, 0, {"v": key}), daemon=True)
    thread.start()
    return thread


def test_a_writer_holding_world_as_log_lock_never_delays_world_b(two_worlds: tuple[World, World]) -> None:
    a, b = two_worlds
    with book_of(a).store.holding_log_lock():  # a writer of world a between its append and its commit
        in_b = commit_in_thread(b, "kb")
        in_b.join(WAIT_S)
        assert not in_b.is_alive(), "world b's commit waited for world a's log lock"
        assert b.get_state("kb").value == {"v": "kb"}
        in_a = commit_in_thread(a, "ka")  # the lock is real: world a's own writer waits for it
        in_a.join(0.5)
        assert in_a.is_alive()
    in_a.join(WAIT_S)
    assert not in_a.is_alive() and a.get_state("ka").value == {"v": "ka"}


def test_each_world_has_its_own_gapless_positions_and_folds_to_its_state(
        two_worlds: tuple[World, World]) -> None:
    a, b = two_worlds
    for n in range(5):
        (a if n % 2 else b).compare_and_set_state("x", f"k{n}", 0, n)
    for world in (a, b):
        seqs = [int(e.seq) for e in world.events(limit=1000)]
        assert seqs == list(range(1, len(seqs) + 1))
        assert book_of(world).rebuild_state(from_snapshot=False) == book_of(world).state_image()
    assert {s.key for s in a.list_state()} == {"k1", "k3"}
    assert {s.key for s in b.list_state()} == {"k0", "k2", "k4"}


@pytest.mark.parametrize(("url", "schema", "field"), [
    ("postgresql://u@/db", "World-A", "schema"), ("postgresql://u@/db", "a; DROP SCHEMA public", "schema"),
    ("postgresql://u@/db", "", "schema"), ("sqlite:///w.db", "world_a", "db_url"),
])
def test_a_bad_schema_or_backend_is_refused_before_connecting(url: str, schema: str, field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        world_in_schema(url, schema)
    assert refused.value.field == field
