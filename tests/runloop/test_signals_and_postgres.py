"""Event-driven waiting (the in-process commit signal; LISTEN/NOTIFY across connections on PostgreSQL) and
the run loop on PostgreSQL."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from engine.errors import AlreadyExists, VersionConflict
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import LocalScopeRules
from engine.runloop import CommitSignal
from engine.world.book import open_world
from tests.conftest import close_world, open_pdp_world
from tests.runloop.support import ring


def test_the_in_process_signal_wakes_a_waiter_on_commit(tmp_path: Path) -> None:
    book = open_world(f"sqlite:///{tmp_path / 'w.db'}", policy=LocalScopeRules())
    world = book.world
    signal = CommitSignal(book.store)
    assert signal.wait(0.05) is False                      # nothing committed: the bounded wait times out
    woke: list[float] = []

    def waiter() -> None:
        t0 = time.monotonic()
        if signal.wait(10):
            woke.append(time.monotonic() - t0)
    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.05)
    world.compare_and_set_state("a", "k", 0, 1)
    thread.join(10)
    assert woke and woke[0] < 5                            # woken by the commit, not by the timeout
    signal.close()
    book.close()


@pytest.mark.postgres
def test_listen_notify_wakes_a_waiter_on_another_connection_only_on_commit(pg_url: str) -> None:
    listener = open_world(pg_url, policy=LocalScopeRules())
    writer_book = open_world(pg_url, policy=LocalScopeRules(), init=False)  # another pool: another "process"
    writer = writer_book.world
    signal = CommitSignal(listener.store)
    try:
        assert signal.wait(0.1) is False
        writer.compare_and_set_state("a", "k", 0, 1)
        assert signal.wait(5) is True                      # delivered across connections
        with pytest.raises((VersionConflict, AlreadyExists)):
            writer.compare_and_set_state("a", "k", 0, 2)   # refused: its transaction rolls back
        assert signal.wait(0.3) is False                   # a rolled-back write notifies nobody
    finally:
        signal.close()
        writer_book.close()
        listener.close()


@pytest.mark.postgres
def test_the_wake_storm_is_stopped_on_postgresql_too(pg_url: str, tmp_path: Path, pdp_client: CerbosPdp) -> None:
    world = open_pdp_world(pg_url, pdp_client, tmp_path / "artifacts")
    runner = ring(world, ["a", "b", "c"])
    world.compare_and_set_state("a", "a-out", 0, 1)
    stats = runner.run_until_quiet(max_rounds=50)
    hops = sorted((w.payload["depth"], w.target_agent) for w in world.list_wakes(actor="gov"))
    assert hops == [(0, "b"), (1, "c"), (2, "a")]
    assert (stats.suppressed, stats.cycles) == (1, 3)
    assert all(world.receipt_for_wake(w.wake_id, actor="gov").outcome.value == "acted"
               for w in world.list_wakes(actor="gov"))
    runner.close()
    close_world(world)
