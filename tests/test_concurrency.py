"""Multi-process concurrency against real databases (a SQLite file and a real PostgreSQL).

1. Lost updates: 8 processes x 200 read-modify-write increments of one state key through the gateway
   (compare-and-set at the version read, re-read on ``VersionConflict``) end at exactly 1,600 with
   version 1,601, exactly 1,600 ``state.set`` events after the creation, and the log folds to the state.
2. One winner: 20 registered agents, each in its own process, claim one task at the same instant
   (file barrier); exactly one wins, every other gets a typed PMW error (``IllegalTransition`` or
   ``VersionConflict``), the task is claimed by the winner and the log has one claim event.
3. Log order is commit order (PostgreSQL): a write cannot commit while another holding a lower log
   position is still in flight, so a snapshot or a log follower never skips an event.

The database is created and migrated in the parent; children are ``python -m tests.procs.*`` programs,
waited for with a deadline and killed by PID in a ``finally``.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import store.gateway
from engine.policy.enforcement import LocalScopeRules
from engine.world import World
from engine.world.book import open_world
from tests.conftest import DbUrlFactory, book_of, close_world, kept
from tests.procs import Child, spawn, stop_all, wait_all, wait_until

pytestmark = pytest.mark.slow

REAL_BACKENDS = [
    pytest.param("sqlite-file", id="sqlite-file"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]

WORKERS = 8
INCREMENTS = 200
CLAIMERS = 20
READY_TIMEOUT = 60.0
RUN_TIMEOUT = 120.0


def _state_set_events(world: World, key: str) -> list[dict[str, object]]:
    return [e.model_dump() for e in world.events(0, limit=100_000)
            if e.event_type == "state.set" and e.subject_id == key]


def _assert_fold_equals_state(world: World) -> None:
    book = book_of(world)
    assert book.rebuild_state(from_snapshot=False) == book.state_image()


def _start_together(children: list[Child], ready: list[Path], start: Path) -> None:
    """Wait (bounded) until every child is connected and waiting, then release them all at once."""
    def all_ready() -> bool:
        dead = [c for c in children if c.proc.poll() is not None]
        if dead:
            raise AssertionError("a child exited before the barrier:\n" + dead[0].describe())
        return all(p.exists() for p in ready)
    wait_until(all_ready, READY_TIMEOUT, "every child to be ready")
    start.touch()


@pytest.mark.parametrize("backend", REAL_BACKENDS)
def test_concurrent_increments_lose_no_update(db_url_factory: DbUrlFactory, tmp_path: Path) -> None:
    url = db_url_factory()
    key = "shared/counter"
    # create and migrate the schema once, in the parent; the children only open it
    world = kept(open_world(url, policy=LocalScopeRules(), artifact_dir=tmp_path / "artifacts"))
    children: list[Child] = []
    try:
        actors = [f"worker-{i}" for i in range(WORKERS)]
        for i, actor in enumerate(actors):
            world.register_agent(actor, f"Worker {i}", "worker", f"term-{i}")
        created = world.compare_and_set_state(actors[0], key, 0, 0)
        assert (created.version, created.value) == (1, 0)

        ready = [tmp_path / f"ready-{i}" for i in range(WORKERS)]
        start = tmp_path / "start"
        children = [spawn("incrementer", url, actor, key, str(INCREMENTS), str(ready[i]), str(start),
                          name=f"inc-{i}", workdir=tmp_path) for i, actor in enumerate(actors)]
        _start_together(children, ready, start)
        wait_all(children, RUN_TIMEOUT)
        for child in children:
            assert child.proc.returncode == 0, child.describe()
        reports = [json.loads(c.stdout().strip().splitlines()[-1]) for c in children]
        assert [r["increments"] for r in reports] == [INCREMENTS] * WORKERS

        entry = world.get_state(key)
        assert entry.value == WORKERS * INCREMENTS == 1_600
        assert entry.version == 1 + WORKERS * INCREMENTS == 1_601

        events = _state_set_events(world, key)
        assert len(events) == 1 + 1_600  # the creation, then one event per increment
        updates = events[1:]
        # in log order every increment moved the key by exactly one version and one unit
        assert [e["resulting_version"] for e in events] == list(range(1, 1_602))
        assert [e["base_version"] for e in updates] == list(range(1, 1_601))
        assert [e["changes"][0]["values"]["value"] for e in updates] == list(range(1, 1_601))
        assert Counter(e["actor_id"] for e in updates) == dict.fromkeys(actors, INCREMENTS)
        assert len({e["op_id"] for e in events}) == len(events)
        _assert_fold_equals_state(world)
    finally:
        stop_all(children)
        close_world(world)


@pytest.mark.parametrize("backend", REAL_BACKENDS)
def test_concurrent_claims_have_exactly_one_winner(db_url_factory: DbUrlFactory, tmp_path: Path) -> None:
    url = db_url_factory()
    world = kept(open_world(url, policy=LocalScopeRules(), artifact_dir=tmp_path / "artifacts"))
    children: list[Child] = []
    try:
        world.register_agent("owner", "Owner", "lead", "term-owner")
        agents = [f"claimer-{i:02d}" for i in range(CLAIMERS)]
        for i, agent in enumerate(agents):
            world.register_agent(agent, f"Claimer {i}", "worker", f"term-{i}")
        task = world.create_task("owner", "one task, twenty claimers", task_id="race-task")
        assert (task.status.value, task.version) == ("open", 1)
        before = len(world.events(0, limit=100_000))

        ready = [tmp_path / f"ready-{i}" for i in range(CLAIMERS)]
        start = tmp_path / "start"
        children = [spawn("claimer", url, agent, task.task_id, str(ready[i]), str(start),
                          name=f"claim-{i}", workdir=tmp_path) for i, agent in enumerate(agents)]
        _start_together(children, ready, start)
        wait_all(children, RUN_TIMEOUT)
        for child in children:
            assert child.proc.returncode == 0, child.describe()
        outcomes = [json.loads(c.stdout().strip().splitlines()[-1]) for c in children]

        winners = [o for o in outcomes if o["outcome"] == "won"]
        losers = [o for o in outcomes if o["outcome"] != "won"]
        assert len(winners) == 1, outcomes
        winner = winners[0]["agent"]
        assert winners[0]["assignee"] == winner
        assert winners[0]["status"] == "claimed"
        assert winners[0]["version"] == 2
        assert len(losers) == CLAIMERS - 1
        for o in losers:
            assert o["outcome"] == "error", o
            assert (o["type"], o["code"]) in {("IllegalTransition", "illegal_transition"),
                                              ("VersionConflict", "version_conflict")}, o

        final = world.get_task(task.task_id)
        assert (final.status.value, final.assignee, final.version) == ("claimed", winner, 2)
        new_events = world.events(before, limit=100_000)
        assert [(e.event_type, e.actor_id, e.subject_id) for e in new_events] == [
            ("task.claim", winner, task.task_id)]
        _assert_fold_equals_state(world)
    finally:
        stop_all(children)
        close_world(world)


@pytest.mark.postgres
def test_log_positions_follow_commit_order_on_postgres(pg_url: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic interleaving (threads, one pause point just before commit):

    A: CAS on key ``a`` reaches its commit point and pauses; B: CAS on key ``b`` starts meanwhile. B must
    not commit before A (otherwise A's event would carry a lower log position than an event already
    visible, and a snapshot or a log follower could skip it). Then the log order is the commit order and
    snapshot + tail folds to the state.
    """
    setup = kept(open_world(pg_url, policy=LocalScopeRules(), artifact_dir=tmp_path / "artifacts"))
    setup.compare_and_set_state("writer", "a", 0, 0)
    setup.compare_and_set_state("writer", "b", 0, 0)
    close_world(setup)

    in_flight, release = threading.Event(), threading.Event()
    original_apply = store.gateway._Tx.apply

    def apply_then_pause(self: store.gateway._Tx, request: store.gateway.WriteRequest, *, undecided_ok: bool) -> None:
        original_apply(self, request, undecided_ok=undecided_ok)
        if request.op_id == "slow-a":
            in_flight.set()
            release.wait(30)  # bounded: the main thread releases it

    monkeypatch.setattr(store.gateway._Tx, "apply", apply_then_pause)
    slow = kept(open_world(pg_url, policy=LocalScopeRules(), init=False))
    fast = kept(open_world(pg_url, policy=LocalScopeRules(), init=False))
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    a = threading.Thread(target=run, args=(lambda: slow.compare_and_set_state("writer", "a", 1, 1, op_id="slow-a"),))
    b = threading.Thread(target=run, args=(lambda: fast.compare_and_set_state("writer", "b", 1, 1, op_id="fast-b"),))
    try:
        a.start()
        assert in_flight.wait(30), "the slow write never reached its pause point"
        b.start()
        b.join(1.0)
        assert b.is_alive(), "B committed while A, holding a lower log position, was still in flight"
    finally:
        release.set()
        a.join(30)
        b.join(30)
    try:
        assert not a.is_alive() and not b.is_alive()
        assert not errors, errors
        seq = {e.op_id: e.seq for e in fast.events(0, limit=1000)}
        assert seq["slow-a"] < seq["fast-b"]
        book_of(fast).take_snapshot("writer")
        fast.compare_and_set_state("writer", "a", 2, 2)
        assert book_of(fast).rebuild_state(from_snapshot=False) == book_of(fast).state_image()
        assert book_of(fast).rebuild_state(from_snapshot=True) == book_of(fast).state_image()
    finally:
        close_world(slow)
        close_world(fast)
