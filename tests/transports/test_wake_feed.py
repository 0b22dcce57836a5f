"""The wake feed (engine/service/wake_feed.py) on a real world: a SQLite file decided by the real PDP, the
feed tailing it through a store of its own (as ``pmw serve``'s feed tails what its runner writes).

What it proves: every wake queued (``wake.issued`` and a controller step's wakes) reaches the listeners once,
in log order, and nothing else does (a duplicate delivery of a wake, a claim, an ack); a subscription
replays an agent's wakes after ``after_seq`` from the log and then the live ones, none lost and none twice,
and only that agent's; a slow subscriber is dropped with ``end_reason == "overflow"`` (bounded memory) and
resumes from its last ``seq``; a stopped feed ends its subscriptions; bad input is refused.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import Closed, InvalidInput
from engine.policy.cerbos_adapter import CerbosPdp
from engine.service.wake_feed import WakeFeed, WakeNotice, WakeSubscription, notices_of
from engine.world import World
from engine.world.controller_steps import ControllerStep, StepWake
from store import Store
from tests.conftest import add_agent, book_of, close_world, open_pdp_world

WAIT_S = 10.0


@pytest.fixture
def team(pworld: World) -> World:
    add_agent(pworld, "boss", ["wake.enqueue"])
    add_agent(pworld, "alice")
    add_agent(pworld, "bob")
    return pworld


@pytest.fixture
def feed(team: World, tmp_path: Path) -> Iterator[WakeFeed]:
    store = Store(f"sqlite:///{tmp_path / 'world.db'}")
    feed = WakeFeed(store.read, poll_s=0.005, queue_limit=5)
    feed.start()
    yield feed
    feed.stop()
    store.close()


def wait_for(predicate: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S} s"
        time.sleep(0.005)


def enqueue(world: World, target: str, key: str) -> str:
    return world.enqueue_wake("boss", target, "ping", key).wake.wake_id


def test_listeners_get_every_queued_wake_once_in_log_order(team: World, feed: WakeFeed) -> None:
    got: list[WakeNotice] = []
    lock = threading.Lock()

    def listen(notice: WakeNotice) -> None:
        assert threading.current_thread().name == "pmw-wake-feed"
        with lock:
            got.append(notice)
    remove = feed.add_listener(listen)
    first = enqueue(team, "alice", "k1")
    assert team.enqueue_wake("boss", "alice", "ping", "k1").created is False  # the same wake again: none new
    second = enqueue(team, "bob", "k2")
    team.claim_wake("alice", agent_id="alice")  # claims, acks: not new wakes
    step = ControllerStep(world_id="w-test", position=1, expected_version=0, wakes=[
        StepWake(target_agent="bob", cause="rule", idempotency_key="ctl-1", depth=0, chain="c", origin_us=1,
                 rule="r1"),
        StepWake(target_agent="alice", cause="rule", idempotency_key="ctl-2", depth=0, chain="c", origin_us=1,
                 rule="r1")])
    stepped = book_of(team).commit_controller_step("gov", step)
    wait_for(lambda: len(got) >= 4, "four notices")
    time.sleep(0.05)  # nothing more arrives
    with lock:
        assert [n.wake_id for n in got] == [first, second, *stepped.wake_ids]
        assert [n.agent_id for n in got] == ["alice", "bob", "bob", "alice"]
        assert [n.event_type for n in got] == ["wake.issued", "wake.issued", "controller.step", "controller.step"]
        seqs = [n.seq for n in got]
    assert seqs == sorted(seqs) and seqs[2] == seqs[3]  # both step wakes: one event
    remove()
    remove()  # idempotent
    enqueue(team, "alice", "k3")
    wait_for(lambda: feed.position >= seqs[-1] + 1, "the feed passes the next event")
    time.sleep(0.02)
    assert len(got) == 4


def test_a_failing_listener_is_kept_and_the_feed_goes_on(team: World, feed: WakeFeed) -> None:
    got: list[str] = []

    def bad(_notice: WakeNotice) -> None:
        raise ValueError("boom")
    feed.add_listener(bad)
    feed.add_listener(lambda n: got.append(n.wake_id))
    ids = [enqueue(team, "alice", f"k{n}") for n in range(3)]
    wait_for(lambda: len(got) == 3, "three notices")
    assert got == ids and feed.listener_errors == 3 and feed.running


async def take(sub: WakeSubscription, n: int) -> list[WakeNotice]:
    out: list[WakeNotice] = []
    while len(out) < n:
        notice = await sub.next_notice(WAIT_S)
        assert notice is not None, f"only {len(out)} of {n} notices (end: {sub.end_reason})"
        out.append(notice)
    return out


def test_subscribe_replays_after_seq_then_goes_live_none_lost_none_twice(team: World, feed: WakeFeed) -> None:
    start = feed.position
    early = [enqueue(team, "alice", f"early{n}") for n in range(3)]
    enqueue(team, "bob", "not-alice")
    wait_for(lambda: feed.position >= start + 4, "the feed passes the early wakes")

    async def scenario() -> tuple[list[WakeNotice], list[WakeNotice], str | None, int]:
        sub = feed.subscribe("alice", after_seq=start)
        assert feed.subscribers("alice") == 1
        late: list[str] = []

        def more() -> None:
            late.extend(enqueue(team, who, f"late{n}-{who}") for n in range(3) for who in ("alice", "bob"))
        writer = asyncio.get_running_loop().run_in_executor(None, more)
        got = await take(sub, 6)
        await writer
        assert await sub.next_notice(0.1) is None  # nothing more for alice
        resumed = feed.subscribe("alice", after_seq=got[2].seq)  # resume after the third: the last three again
        again = await take(resumed, 3)
        sub.close()
        resumed.close()
        return got, again, sub.end_reason, feed.subscribers("alice")
    got, again, reason, left = asyncio.run(scenario())
    assert [n.wake_id for n in got[:3]] == early
    assert all(n.agent_id == "alice" for n in got + again)
    seqs = [n.seq for n in got]
    assert seqs == sorted(set(seqs))  # in order, none twice
    assert [n.wake_id for n in again] == [n.wake_id for n in got[3:]]
    assert reason == "closed" and left == 0


def test_after_seq_none_is_live_only(team: World, feed: WakeFeed) -> None:
    enqueue(team, "alice", "before")
    wait_for(lambda: feed.position > 0, "the feed moves")

    async def scenario() -> list[WakeNotice]:
        await asyncio.sleep(0.05)
        sub = feed.subscribe("alice", after_seq=None)
        wid = await asyncio.get_running_loop().run_in_executor(None, enqueue, team, "alice", "after")
        got = await take(sub, 1)
        assert got[0].wake_id == wid
        assert await sub.next_notice(0.05) is None
        sub.close()
        return got
    assert len(asyncio.run(scenario())) == 1


def test_a_slow_subscriber_is_dropped_and_resumes_from_its_last_seq(team: World, feed: WakeFeed) -> None:
    async def scenario() -> tuple[str | None, list[str], list[str]]:
        sub = feed.subscribe("alice", after_seq=feed.position)
        first = await asyncio.get_running_loop().run_in_executor(None, enqueue, team, "alice", "s0")
        assert (await take(sub, 1))[0].wake_id == first
        ids = await asyncio.get_running_loop().run_in_executor(
            None, lambda: [enqueue(team, "alice", f"s{n}") for n in range(1, 9)])  # 8 > queue_limit 5, untaken
        wait_for(lambda: feed.subscribers("alice") == 0, "the slow subscriber dropped")
        assert await sub.next_notice(0.5) is None
        assert sub.last_seq is not None
        resumed = feed.subscribe("alice", after_seq=sub.last_seq)
        rest = [n.wake_id for n in await take(resumed, 8)]
        resumed.close()
        return sub.end_reason, ids, rest
    reason, ids, rest = asyncio.run(scenario())
    assert reason == "overflow"
    assert rest == ids  # nothing lost by the drop


def test_stopping_the_feed_ends_subscriptions_and_refuses_new_ones(team: World, feed: WakeFeed) -> None:
    async def scenario() -> tuple[str | None, BaseException | None]:
        sub = feed.subscribe("alice", after_seq=None)
        waiting = asyncio.ensure_future(sub.next_notice(WAIT_S))
        await asyncio.sleep(0.05)
        await asyncio.get_running_loop().run_in_executor(None, feed.stop)
        assert await asyncio.wait_for(waiting, 2.0) is None
        try:
            feed.subscribe("alice", after_seq=None)
        except Closed as exc:
            return sub.end_reason, exc
        return sub.end_reason, None
    reason, refused = asyncio.run(scenario())
    assert reason == "feed_stopped" and isinstance(refused, Closed)
    assert not feed.running


@pytest.mark.parametrize("bad", [-1, "3", 1.5, True])
def test_bad_after_seq_is_refused(feed: WakeFeed, bad: object) -> None:
    async def scenario() -> None:
        feed.subscribe("alice", after_seq=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput) as refused:
        asyncio.run(scenario())
    assert refused.value.field == "after_seq" and feed.subscribers() == 0


def test_notices_of_reads_only_wake_inserts() -> None:
    values = {"wake_id": "w1", "target_agent": "a", "cause": "c", "priority": 2, "not_before_us": 5,
              "created_at_us": 4}
    event = {"seq": 9, "event_id": "e", "event_type": "x", "changes": [
        {"table": "wakes", "op": "insert", "key": {"wake_id": "w1"}, "values": values},
        {"table": "wakes", "op": "update", "key": {"wake_id": "w0"}, "values": {"status": "claimed"}},
        {"table": "tasks", "op": "insert", "key": {}, "values": values},
        {"table": "wakes", "op": "insert", "values": {"wake_id": 3}}, "junk"]}
    assert notices_of(event) == [WakeNotice(9, "w1", "a", "e", "x", "c", 2, 5, 4)]
    assert notices_of({"seq": 1, "changes": None}) == []


def test_a_commit_of_this_process_is_pushed_at_once_not_at_the_next_poll(team: World, tmp_path: Path) -> None:
    """With the store's commit hook (what ``pmw serve`` wires), a wake reaches the feed without waiting for its
    next poll: the poll is 1 s here and every wake is queued just after the poll that found the previous one,
    so without the hook each would wait about 1 s (loose bound: 0.7 s)."""
    store = Store(f"sqlite:///{tmp_path / 'world.db'}")
    slow = WakeFeed(store.read, poll_s=1.0)
    book_of(team).store.on_commit(slow.commit_hook)
    got: list[tuple[str, float]] = []
    slow.add_listener(lambda n: got.append((n.wake_id, time.monotonic())))
    slow.start()
    try:
        enqueue(team, "alice", "hook-0")
        wait_for(lambda: len(got) == 1, "the first notice")
        for n in range(1, 4):
            started = time.monotonic()
            wid = enqueue(team, "alice", f"hook-{n}")
            wait_for(lambda n=n: len(got) == n + 1, f"notice {n}")
            assert got[-1][0] == wid and got[-1][1] - started < 0.7, got[-1][1] - started
    finally:
        slow.stop()
        store.close()


class PollCounter:
    """The real reader of a store, counting the log reads the feed makes (nothing else changed)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reads = 0

    def events(self, *args: object, **kwargs: object) -> list[dict[str, object]]:
        self.reads += 1
        return self.store.read.events(*args, **kwargs)  # type: ignore[arg-type]

    def last_seq(self) -> int:
        return self.store.read.last_seq()


def test_an_idle_feed_backs_off_and_still_sees_another_process_s_commit(team: World, tmp_path: Path) -> None:
    """An idle log is re-read at a doubling interval up to ``idle_poll_s`` (here 0.2 s), not every ``poll_s``
    (5 ms: about 200 reads a second, a fifth of a core on a server doing nothing); a wake committed by another
    store with no commit hook (another process) is still seen, within the idle interval (loose bound 1 s)."""
    store = Store(f"sqlite:///{tmp_path / 'world.db'}")
    reader = PollCounter(store)
    feed = WakeFeed(reader, poll_s=0.005, idle_poll_s=0.2)  # type: ignore[arg-type]
    got: list[tuple[str, float]] = []
    feed.add_listener(lambda n: got.append((n.wake_id, time.monotonic())))
    feed.start()
    try:
        time.sleep(1.5)
        assert reader.reads <= 15, reader.reads  # 6 doublings to 0.2 s, then about 5 a second; fixed 5 ms: ~300
        started = time.monotonic()
        wid = enqueue(team, "alice", "idle-0")  # the team's own store: no hook on the feed's store
        wait_for(lambda: len(got) == 1, "the notice of another store's commit")
        assert got[0][0] == wid and got[0][1] - started < 1.0, got[0][1] - started
    finally:
        feed.stop()
        store.close()


def test_idle_poll_below_poll_s_is_refused(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'feed.db'}")
    try:
        with pytest.raises(InvalidInput) as refused:
            WakeFeed(store.read, poll_s=0.1, idle_poll_s=0.05)
        assert refused.value.field == "idle_poll_s"
    finally:
        store.close()


@pytest.mark.postgres
def test_on_postgresql_concurrent_writers_wakes_arrive_once_in_log_order(pg_url: str, pdp_client: CerbosPdp,
                                                                      tmp_path: Path) -> None:
    """On PostgreSQL (log positions handed out in commit order), wakes queued by four threads at once reach
    the feed each exactly once, in ``seq`` order, and a subscription's replay gives the same."""
    world = open_pdp_world(pg_url, pdp_client, tmp_path / "artifacts")
    store = Store(pg_url)
    try:
        add_agent(world, "boss", ["wake.enqueue"])
        add_agent(world, "alice")
        feed = WakeFeed(store.read, poll_s=0.005)
        start = store.read.last_seq()
        got: list[WakeNotice] = []
        feed.add_listener(got.append)
        feed.start()
        try:
            def burst(n: int) -> list[str]:
                return [enqueue(world, "alice", f"pg-{n}-{k}") for k in range(5)]
            threads_out: list[list[str]] = []
            threads = [threading.Thread(target=lambda n=n: threads_out.append(burst(n))) for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            queued = {wid for batch in threads_out for wid in batch}
            assert len(queued) == 20
            wait_for(lambda: len(got) >= 20, "twenty notices")
            time.sleep(0.05)
            assert {n.wake_id for n in got} == queued and len(got) == 20
            assert [n.seq for n in got] == sorted({n.seq for n in got})

            async def replayed() -> list[str]:
                sub = feed.subscribe("alice", after_seq=start)
                out = [n.wake_id for n in await take(sub, 20)]
                sub.close()
                return out
            assert asyncio.run(replayed()) == [n.wake_id for n in got]
        finally:
            feed.stop()
    finally:
        store.close()
        close_world(world)


class CountingReader:
    """The feed's real reader, counting the log reads (statements) and event rows it answers for reads that
    start below ``below`` (a replay's: the feed's own polls start at its position, never below it)."""

    def __init__(self, read: object) -> None:
        self._read = read
        self.below = 0
        self.statements = 0
        self.rows = 0

    def events(self, after_seq: int = 0, limit: int | None = None) -> list[dict[str, object]]:
        found: list[dict[str, object]] = self._read.events(after_seq, limit)  # type: ignore[attr-defined]
        if after_seq < self.below:
            self.statements += 1
            self.rows += len(found)
        return found

    def __getattr__(self, name: str) -> object:
        return getattr(self._read, name)


def test_a_replay_reads_a_bounded_part_of_a_long_log_none_lost(team: World, tmp_path: Path) -> None:
    """A log of many other events: ``after_seq=0`` reads nothing and ends ``replay_too_far``; a resume
    within ``replay_limit`` reads at most ``replay_limit / BATCH + 1`` statements and gets every wake of
    the agent queued after it, once. (Without the bound, ``after_seq=0`` reads the whole log.)"""
    from engine.client.http import ServerClient
    from engine.client.sse import WakeStream, parse_events
    from engine.errors import ReplayTooFar
    from engine.service.sse_routes import end_frame
    from engine.service.wake_feed import BATCH, replay_too_far

    first = enqueue(team, "alice", "old")
    for n in range(600):  # other agents' events: bob's wakes, one event each
        enqueue(team, "bob", f"bob{n}")
    middle = book_of(team).store.read.last_seq()
    late = [enqueue(team, "alice", f"late{n}") for n in range(2)]
    enqueue(team, "bob", "bobs")
    store = Store(f"sqlite:///{tmp_path / 'world.db'}")
    counting = CountingReader(store.read)
    feed = WakeFeed(counting, replay_limit=BATCH)  # type: ignore[arg-type]
    feed.start()
    counting.below = feed.position
    try:
        async def scenario() -> tuple[str | None, list[str], str | None]:
            far = feed.subscribe("alice", after_seq=0)
            assert await far.next_notice(0.1) is None
            reason = far.end_reason
            assert feed.subscribers("alice") == 0  # an ended subscription is not registered
            error = replay_too_far(far)
            assert isinstance(error, ReplayTooFar) and error.after_seq == 0 and error.position == feed.position
            # as the stream sends it (sse_routes.end_frame) and the client reads it: raised as ReplayTooFar
            event = next(parse_events(end_frame(far).splitlines(keepends=True)))
            with pytest.raises(ReplayTooFar) as raised:
                WakeStream(ServerClient("http://127.0.0.1:9", None), "alice")._ended(event)
            assert (raised.value.after_seq, raised.value.position, raised.value.limit) == (0, far.live_from, BATCH)
            assert counting.statements == 0 and counting.rows == 0
            near = feed.subscribe("alice", after_seq=middle)
            got = [n.wake_id for n in [await near.next_notice(0.5), await near.next_notice(0.5)] if n]
            after = await near.next_notice(0.1)
            near.close()
            return reason, got, None if after is None else after.wake_id
        reason, got, extra = asyncio.run(scenario())
    finally:
        feed.stop()
        store.close()
    assert reason == "replay_too_far"
    assert got == late and extra is None and first not in got
    assert counting.statements <= feed.replay_limit // BATCH + 1
    assert counting.rows <= feed.replay_limit + 1
