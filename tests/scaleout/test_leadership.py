"""One controller leader per world, elected through the store; a stale leader's steps are refused (issue 13).

Every test runs on SQLite in memory, on a SQLite file and on a real PostgreSQL (the ``world`` fixture)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from engine.controller.leadership import ControllerLeadership
from engine.errors import InvalidInput, NotLeader
from engine.sources import ManualClock
from engine.world import World
from engine.world.book import RuntimeBook
from engine.world.controller_steps import ControllerStep, StepWake
from store import Store
from tests.conftest import book_of

LEASE_S = 5.0


def lead(world: World, holder: str, *, clock: ManualClock | None = None) -> ControllerLeadership:
    book = book_of(world)
    return ControllerLeadership(book.store, "main", holder, LEASE_S, clock=clock or world.clock)


def step(world: World, position: int, expected_version: int, generation: int | None, key: str) -> ControllerStep:
    return ControllerStep(world_id="main", position=position, expected_version=expected_version,
                          generation=generation,
                          wakes=[StepWake(target_agent="a", cause="look", idempotency_key=key, depth=0, chain="c",
                                          origin_us=world.clock.now_us(), rule="r")])


@pytest.fixture
def team(world: World) -> World:
    world.register_agent("a", "A", "worker", "t-a")
    return world


def log_and_state(book: RuntimeBook) -> tuple[int, object]:
    return book.store.read.last_seq(), book.state_image()


def test_of_two_candidates_one_leads_and_a_takeover_bumps_the_generation(team: World) -> None:
    clock: ManualClock = team.clock  # type: ignore[assignment]
    first, second = lead(team, "host-a"), lead(team, "host-b")
    assert first.acquire() and first.fencing_token == 1
    assert not second.acquire() and second.fencing_token is None
    clock.advance(LEASE_S / 2)
    assert first.renew() and first.acquire() and first.fencing_token == 1  # renewing never bumps
    clock.advance(LEASE_S + 1)  # the leader is paused past its lease
    assert second.acquire() and second.fencing_token == 2
    assert not first.renew() and not first.is_leader
    lease = book_of(team).store.lease("main")
    assert lease is not None and (lease.holder, lease.generation) == ("host-b", 2)


def test_a_released_lease_is_taken_over_at_once(team: World) -> None:
    first, second = lead(team, "host-a"), lead(team, "host-b")
    assert first.acquire()
    first.release()
    assert second.acquire() and second.fencing_token == 2


@pytest.mark.parametrize("backend", ["sqlite-file", "postgres"])  # in memory: one shared connection, no race
def test_racing_candidates_elect_exactly_one(team: World) -> None:
    candidates = [lead(team, f"host-{n}") for n in range(6)]
    start = threading.Barrier(len(candidates))
    won: list[str] = []

    def run(c: ControllerLeadership) -> None:
        start.wait()
        if c.acquire():
            won.append(c.holder)
    threads = [threading.Thread(target=run, args=(c,)) for c in candidates]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1


def test_the_leaders_step_commits_with_its_generation(team: World) -> None:
    book, leader = book_of(team), lead(team, "host-a")
    assert leader.acquire()
    with leader.fenced():
        result = book.commit_controller_step("ctl", step(team, 1, 0, leader.fencing_token, "k1"))
    assert result.version == 1
    event = [e for e in team.events(limit=1000) if e.event_type == "controller.step"][-1]
    assert event.payload["generation"] == 1


def test_a_step_of_a_stale_generation_is_refused_and_writes_nothing(team: World) -> None:
    book, clock = book_of(team), team.clock
    old, new = lead(team, "host-a"), lead(team, "host-b")
    assert old.acquire()
    fence = old.fenced()  # taken while leading: the old leader is then paused past its lease
    clock.advance(LEASE_S + 1)  # type: ignore[attr-defined]
    assert new.acquire()
    before = log_and_state(book)
    with fence, pytest.raises(NotLeader) as refused:
        book.commit_controller_step("ctl", step(team, 1, 0, 1, "k-stale"))
    assert (refused.value.reason, refused.value.current_holder, refused.value.current_generation) == (
        "stale_generation", "host-b", 2)
    assert refused.value.code == "not_leader"
    assert log_and_state(book) == before
    with new.fenced():  # the successor's step at the same position commits
        assert book.commit_controller_step("ctl", step(team, 1, 0, 2, "k-new")).version == 1


def test_a_step_after_the_lease_expired_is_refused_even_before_a_takeover(team: World) -> None:
    book, leader = book_of(team), lead(team, "host-a")
    assert leader.acquire()
    fence = leader.fenced()
    team.clock.advance(LEASE_S + 1)  # type: ignore[attr-defined]
    before = log_and_state(book)
    with fence, pytest.raises(NotLeader) as refused:
        book.commit_controller_step("ctl", step(team, 1, 0, 1, "k-late"))
    assert refused.value.reason == "expired"
    assert log_and_state(book) == before


def test_not_leading_is_refused_before_anything_is_asked(team: World) -> None:
    with pytest.raises(NotLeader) as refused:
        lead(team, "host-a").fenced()
    assert refused.value.reason == "no_lease"


@pytest.mark.parametrize(("holder", "lease_s", "field"), [
    ("", 5.0, "holder"), ("x" * 201, 5.0, "holder"), ("a\nb", 5.0, "holder"),
    ("host", 0, "lease_s"), ("host", -1.0, "lease_s"), ("host", 1e9, "lease_s"), ("host", True, "lease_s"),
])
def test_bad_candidacy_input_is_refused_and_takes_nothing(tmp_path: Path, holder: str, lease_s: float,
                                                          field: str) -> None:
    store = Store(f"sqlite:///{tmp_path / 'w.db'}")
    store.init(1)
    try:
        with pytest.raises(InvalidInput) as refused:
            ControllerLeadership(store, "main", holder, lease_s)
        assert refused.value.field == field
        assert store.lease("main") is None
    finally:
        store.close()


def test_a_stale_leaders_follow_up_world_calls_are_refused_too(team: World) -> None:
    """The controller's follow-ups (rooms, topology, contests) are World writes made inside the step's fence:
    after a takeover they are refused like the step itself."""
    book, old, new = book_of(team), lead(team, "host-a"), lead(team, "host-b")
    assert old.acquire()
    fence = old.fenced()
    team.clock.advance(LEASE_S + 1)  # type: ignore[attr-defined]
    assert new.acquire()
    before = log_and_state(book)
    with fence, pytest.raises(NotLeader):
        team.append_event("a", "note.made", {"term": "t"}, subject_kind="claim", subject_id="t")
    assert log_and_state(book) == before
    team.append_event("a", "note.made", {"term": "t"}, subject_kind="claim", subject_id="t")  # unfenced: as ever
