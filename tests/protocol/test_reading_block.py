"""``World.reading()``: a cycle's reads in ONE read transaction (issue 12, item 1b), on a SQLite file with the
real PDP.

- Several World reads inside the block begin one transaction between them (counted at the driver), where
  outside it each read begins its own.
- A denial a read inside the block records (its own write, which on a SQLite file cannot run inside the
  thread's read transaction) is recorded when the block ends: the read raises ``PolicyDenied`` as outside the
  block, and the log holds the denial once. Without the hold, recording it inside the read transaction fails.
- A decided batch's checks run inside its commit's write transaction (``commit_planned``): the principal's
  rows are read between that transaction's ``BEGIN IMMEDIATE`` and ``COMMIT``, so the policy's answer and the
  commit see one state.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import PolicyDenied
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer
from engine.sources import ManualClock, SeededIds
from engine.world import World
from engine.world.book import RuntimeBook
from store import Store
from tests.conftest import add_agent, book_of, close_world, kept, open_pdp_world


def _traced(tmp_path: Path, pdp_client: CerbosPdp) -> tuple[World, list[str]]:
    url = f"sqlite:///{tmp_path / 'world.db'}"
    setup = open_pdp_world(url, pdp_client, tmp_path / "art")
    add_agent(setup, "alice", ["memory.write", "state.write"])
    add_agent(setup, "mallory", ["memory.write"])
    setup.store_memory("alice", "ALICE-SECRET", "observation", memory_id="m-secret")
    setup.compare_and_set_state("alice", "k", 0, 1)
    close_world(setup)
    statements: list[str] = []
    store = Store(url)
    store.trace_statements(statements.append)
    book = RuntimeBook(store, policy=PdpAuthorizer(pdp_client, store.read), clock=ManualClock(),
                       ids=SeededIds(9), artifact_dir=tmp_path / "art")
    return kept(book), statements


def _begins(statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith("BEGIN")]


def test_reads_inside_the_block_share_one_transaction(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    world, statements = _traced(tmp_path, pdp_client)
    try:
        world.get_agent("alice", actor="alice")  # warm: connections opened, plans remembered
        statements.clear()
        world.get_agent("alice", actor="alice")
        world.get_state("k", actor="alice")
        outside = len(_begins(statements))
        statements.clear()
        with world.reading():
            agent = world.get_agent("alice", actor="alice")
            entry = world.get_state("k", actor="alice")
        inside = list(statements)
    finally:
        close_world(world)
    assert agent.agent_id == "alice" and entry is not None and entry.value == 1
    assert outside >= 2
    assert _begins(inside) == ["BEGIN"]  # one read transaction for both reads and their principals
    assert sum(s.startswith("SELECT agent_id, role_id") for s in inside) == 1  # the principal read once


def test_the_principal_read_once_in_a_block_is_handed_out_as_copies(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    world, _ = _traced(tmp_path, pdp_client)
    read = book_of(world).store.read
    try:
        with world.reading():
            first, _, rooms = read.principal_inputs("alice")
            assert first is not None
            first["status"] = "changed by a caller"
            rooms.append("r-planted")
            again, _, rooms_again = read.principal_inputs("alice")
    finally:
        close_world(world)
    assert again is not None and again["status"] != "changed by a caller" and "r-planted" not in rooms_again


def test_a_denial_inside_the_block_is_recorded_when_it_ends(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    world, _ = _traced(tmp_path, pdp_client)
    try:
        with pytest.raises(PolicyDenied), world.reading():
            world.get_memory("mallory", "m-secret")
        denials = [e for e in world.events(actor="gov", limit=10_000) if e.event_type == "policy.denied"]
        with world.reading():  # the block still works afterwards, and a read that is allowed records nothing
            world.get_agent("mallory", actor="mallory")
        after = [e for e in world.events(actor="gov", limit=10_000) if e.event_type == "policy.denied"]
    finally:
        close_world(world)
    assert len(denials) == 1 and denials[0].actor_id == "mallory"
    assert after == denials


def test_recording_a_denial_inside_the_read_transaction_would_fail(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    """The control: the thread's write inside its open read transaction is refused (what the hold avoids: a
    ``RuntimeError`` naming the read transaction, before SQLite would refuse its BEGIN), so the test above
    can fail."""
    world, _ = _traced(tmp_path, pdp_client)
    book = book_of(world)
    try:
        with world.reading(), pytest.raises(RuntimeError, match="inside this thread's open read transaction"):
            book.world.store_memory("alice", "written inside a read", "observation")
        assert book.world.get_agent("alice", actor="alice").agent_id == "alice"  # nothing left open
    finally:
        close_world(world)


def test_a_batch_is_decided_inside_its_commit(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    world, statements = _traced(tmp_path, pdp_client)
    try:
        with world.planning() as batch:
            world.compare_and_set_state("alice", "k", 1, 2)
        statements.clear()
        world.commit_planned(batch)
        committed = list(statements)
        entry = world.get_state("k", actor="alice")
    finally:
        close_world(world)
    assert entry is not None and entry.value == 2
    begin = committed.index("BEGIN IMMEDIATE")
    end = committed.index("COMMIT", begin)
    assert _begins(committed) == ["BEGIN IMMEDIATE"]  # no read transaction of its own for the decision
    principal = [n for n, s in enumerate(committed) if s.startswith("SELECT agent_id, role_id") and "agents" in s]
    assert principal and all(begin < n < end for n in principal)
