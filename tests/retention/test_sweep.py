"""Retention through the real PDP: a sweep expires memory past its TTL or its type's retention and artifacts
past theirs, with events; expiring or deleting a source invalidates memory derived from it two hops away,
with the provenance path in the event. Only governors sweep."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import PolicyDenied
from engine.models.memory import MemoryStatus
from engine.policy.cerbos_adapter import CerbosPdp
from engine.sources import ManualClock
from engine.world import World
from tests.conftest import add_agent, book_of, close_world, open_pdp_world

DAY_S = 86400


@pytest.fixture
def rworld(tmp_path: Path, pdp_client: CerbosPdp) -> Iterator[tuple[World, ManualClock]]:
    clock = ManualClock()
    world = open_pdp_world(f"sqlite:///{tmp_path / 'world.db'}", pdp_client, tmp_path / "artifacts", clock=clock)
    add_agent(world, "ann", ["artifact.write", "memory.write"])
    yield world, clock
    close_world(world)


def _events(world: World, event_type: str) -> list[dict[str, object]]:
    return [e for e in book_of(world).store.read.events() if e["event_type"] == event_type]


def test_ttl_expiry_expires_only_what_is_due(rworld: tuple[World, ManualClock]) -> None:
    world, clock = rworld
    short = world.store_memory("ann", "the meeting room is free", "observation", ttl_seconds=60)
    kept = world.store_memory("ann", "the build is green", "observation")
    clock.advance(59)
    assert world.sweep_retention("gov").expired == []
    clock.advance(1)
    report = world.sweep_retention("gov")
    assert [(e.kind, e.id, e.rule) for e in report.expired] == [("memory", short.memory_id, "ttl")]
    assert world.get_memory("ann", short.memory_id).status is MemoryStatus.REVOKED
    assert world.get_memory("ann", short.memory_id).valid_to_us == clock.now_us()
    assert world.get_memory("ann", kept.memory_id).status is MemoryStatus.PRIVATE
    assert [e["subject_id"] for e in _events(world, "memory.expired")] == [short.memory_id]
    assert world.sweep_retention("gov").expired == []  # nothing twice


def test_type_retention_expires_memory_and_artifacts(rworld: tuple[World, ManualClock]) -> None:
    world, clock = rworld
    guess = world.store_memory("ann", "maybe the cache is stale", "hypothesis")
    scratch = world.register_artifact("ann", "scratch", b"notes")
    report_art = world.register_artifact("ann", "report", b"final")
    clock.advance(DAY_S)
    assert [(e.kind, e.id) for e in world.sweep_retention("gov").expired] == [("artifact", scratch.artifact_id)]
    assert world.get_artifact(scratch.artifact_id, actor="gov").status.value == "retired"
    assert world.get_artifact(report_art.artifact_id, actor="gov").status.value == "active"
    clock.advance(29 * DAY_S)
    expired = world.sweep_retention("gov").expired
    assert [(e.kind, e.id, e.rule) for e in expired] == [("memory", guess.memory_id, "retention:memory:hypothesis")]


def test_expiring_a_source_invalidates_derived_memory_two_hops_away(rworld: tuple[World, ManualClock]) -> None:
    world, clock = rworld
    raw = world.store_memory("ann", "the customer said tuesday", "user_statement", ttl_seconds=10)
    first = world.store_memory("ann", "the meeting is on tuesday", "inference", source_refs=[raw.memory_id])
    second = world.store_memory("ann", "book the room for tuesday", "decision", source_refs=[first.memory_id])
    other = world.store_memory("ann", "unrelated", "observation")
    clock.advance(10)
    (expired,) = world.sweep_retention("gov").expired
    paths = {i["memory_id"]: i["path"] for i in expired.invalidated}
    assert paths == {first.memory_id: [raw.memory_id, first.memory_id],
                     second.memory_id: [raw.memory_id, first.memory_id, second.memory_id]}
    for mid in (first.memory_id, second.memory_id):
        assert world.get_memory("ann", mid).status is MemoryStatus.REVOKED
    assert world.get_memory("ann", other.memory_id).status is MemoryStatus.PRIVATE
    (event,) = _events(world, "memory.expired")
    assert event["payload"]["invalidated"] == expired.invalidated  # type: ignore[index]


def test_deleting_a_source_records_the_provenance_path(rworld: tuple[World, ManualClock]) -> None:
    world, _ = rworld
    raw = world.store_memory("ann", "a rumour", "observation")
    first = world.store_memory("ann", "so the launch slips", "inference", source_refs=[raw.memory_id])
    second = world.store_memory("ann", "tell sales", "decision", source_refs=[first.memory_id])
    world.revoke_memory("ann", raw.memory_id, "it was false")
    (event,) = [e for e in _events(world, "memory.revoke") if e["subject_id"] == raw.memory_id]
    assert event["payload"]["invalidated"] == [  # type: ignore[index]
        {"memory_id": first.memory_id, "path": [raw.memory_id, first.memory_id]},
        {"memory_id": second.memory_id, "path": [raw.memory_id, first.memory_id, second.memory_id]}]


def test_expiring_an_artifact_invalidates_memory_derived_from_it(rworld: tuple[World, ManualClock]) -> None:
    world, clock = rworld
    scratch = world.register_artifact("ann", "scratch", b"draft numbers")
    derived = world.store_memory("ann", "q3 looks flat", "inference", source_refs=[scratch.artifact_id])
    clock.advance(DAY_S)
    (expired,) = world.sweep_retention("gov").expired
    assert expired.invalidated == [{"memory_id": derived.memory_id, "path": [scratch.artifact_id, derived.memory_id]}]
    assert world.get_memory("ann", derived.memory_id).status is MemoryStatus.REVOKED


def test_only_a_governor_sweeps(rworld: tuple[World, ManualClock]) -> None:
    world, clock = rworld
    mem = world.store_memory("ann", "soon gone", "observation", ttl_seconds=1)
    clock.advance(5)
    with pytest.raises(PolicyDenied):
        world.sweep_retention("ann")
    assert world.get_memory("ann", mem.memory_id).status is MemoryStatus.PRIVATE
