"""Wakes pushed: one thread tails the event log and tells its listeners and subscribers of every wake queued.

A wake is queued by exactly the events whose recorded row changes (``events.changes``, the post-images the
gateway writes, ``store.gateway._post_image``) insert a row into ``wakes``: ``wake.issued``
(``World.enqueue_wake``) and ``controller.step`` (the controller's wakes, committed with its step,
``engine.world.controller_steps``). :func:`notices_of` reads them from an event row; nothing else in the log
creates a wake, and an update of a wake (claim, ack, cancel) is not a new wake.

:class:`WakeFeed` polls the log on ONE background thread (``events.seq > last seen``, at most
:data:`BATCH` rows a query: an indexed range read that answers nothing most of the time; at once after a
commit of this process that queued a wake, when the store's commit hook is :meth:`WakeFeed.commit_hook`).
What only the poll can see is a commit of another process on the same store; the poll backs off while the
log is idle: ``poll_s`` after the last activity (a poke or a read that found rows), doubling on every empty
read up to ``idle_poll_s`` (:data:`DEFAULT_IDLE_POLL_S`), so an idle server does not spend a fifth of a core
re-reading an unchanged log (measured: 183 ms of CPU a second at a fixed 5 ms poll) and another process's
wake is seen within ``idle_poll_s``. In ``seq`` order, for each new wake the feed:

- calls every listener added with :meth:`WakeFeed.add_listener` (on the feed thread; a listener must not
  block; an exception it raises is recorded and the listener kept);
- hands the notice to every :class:`WakeSubscription` of the wake's agent (:meth:`WakeFeed.subscribe`): an
  async iterator that first replays, from the log, the agent's wakes after ``after_seq`` (resume), then the
  live ones, each exactly once and in ``seq`` order. A subscription holds at most ``queue_limit`` notices
  not yet taken: a consumer that falls that far behind is dropped (its iteration ends, ``end_reason`` is
  ``"overflow"``) rather than growing memory; it resumes with a new subscription after its last ``seq``.

A replay is bounded: the log has no index from an agent to the events that queued its wakes, so a replay
reads the log after ``after_seq`` (:data:`BATCH` rows a read) and keeps the agent's. A subscription whose
``after_seq`` lies more than the feed's ``replay_limit`` (:data:`DEFAULT_REPLAY_LIMIT`) log positions behind
the feed reads nothing: it ends at once with ``end_reason == "replay_too_far"`` (:func:`replay_too_far`
says what to do: re-sync with a fresh read of the agent's wakes, then subscribe from the feed's position).
So a reconnect costs at most ``replay_limit / BATCH + 1`` reads, whatever the log's length.

Notices say only that a wake exists (its id, agent, seq and what the log recorded of it when it was
queued). A transport that shows a wake reads it through the dispatcher as its principal. Nothing here
holds the world's lock, writes, or decides anything.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from anyio import to_thread

from engine.errors import Closed, InvalidInput, ReplayTooFar, StoreUnavailable
from store import Insert, Reader, WriteRequest

log = logging.getLogger(__name__)

#: Seconds between two polls right after activity (a full batch is read again at once).
DEFAULT_POLL_S = 0.005
#: The longest wait between two polls of an idle log (each empty read doubles the wait up to it).
DEFAULT_IDLE_POLL_S = 0.05
#: Events read by one poll (and one replay step).
BATCH = 500
#: Log positions a subscription may replay (further behind the feed: it ends with ``replay_too_far``).
DEFAULT_REPLAY_LIMIT = 5000
#: Notices a subscription may hold untaken before it is dropped.
DEFAULT_QUEUE_LIMIT = 1000
#: Seconds the feed waits after the store failed before it polls again.
ERROR_BACKOFF_S = 0.5
STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class WakeNotice:
    """A wake was queued: by the event at log position ``seq`` (``event_id``, ``event_type``), for
    ``agent_id``. The other fields are what that event recorded of the new row (the wake may have moved on
    since: read it to know its state)."""

    seq: int
    wake_id: str
    agent_id: str
    event_id: str
    event_type: str
    cause: str
    priority: int
    not_before_us: int
    created_at_us: int

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "wake_id": self.wake_id, "agent_id": self.agent_id, "event_id": self.event_id,
                "event_type": self.event_type, "cause": self.cause, "priority": self.priority,
                "not_before_us": self.not_before_us, "created_at_us": self.created_at_us}


def notices_of(event: Mapping[str, Any]) -> list[WakeNotice]:
    """The wakes an event row (``store.Reader.events``) queued: its changes that insert into ``wakes``, in
    the order recorded. Anything else (another table, an update of a wake, a malformed change) is none."""
    changes = event.get("changes")
    if not isinstance(changes, list):
        return []
    found = []
    for change in changes:
        if not isinstance(change, dict) or change.get("table") != "wakes" or change.get("op") != "insert":
            continue
        values = change.get("values")
        if not isinstance(values, dict) or not isinstance(values.get("wake_id"), str) \
                or not isinstance(values.get("target_agent"), str):
            continue
        found.append(WakeNotice(
            seq=int(event["seq"]), wake_id=values["wake_id"], agent_id=values["target_agent"],
            event_id=str(event.get("event_id")), event_type=str(event.get("event_type")),
            cause=str(values.get("cause", "")), priority=int(values.get("priority") or 0),
            not_before_us=int(values.get("not_before_us") or 0), created_at_us=int(values.get("created_at_us") or 0)))
    return found


def replay_too_far(sub: WakeSubscription) -> ReplayTooFar:
    """The error a subscription that ended with ``"replay_too_far"`` reports (its ``after_seq``, the feed's
    ``position`` when it subscribed, the ``limit``)."""
    return ReplayTooFar(sub.after_seq or 0, sub.live_from, sub.feed.replay_limit)


def check_after_seq(after_seq: object) -> int | None:
    """``after_seq`` as a log position (``None``: no resume); ``InvalidInput`` unless a non-negative int."""
    if after_seq is None:
        return None
    if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < 0:
        raise InvalidInput("after_seq", "must be a log position: an integer >= 0")
    return after_seq


class WakeSubscription:
    """One agent's wakes, as an async iterator of :class:`WakeNotice` (made by :meth:`WakeFeed.subscribe`).

    Replays from the log the agent's wakes with ``after_seq < seq <= live_from`` (``live_from``: the feed's
    position when the subscription was made), then yields the live ones (``seq > live_from``), each once, in
    ``seq`` order. Ends (``StopAsyncIteration``; :attr:`end_reason` says why) when closed (``"closed"``),
    when the feed stops (``"feed_stopped"``) or when more than the feed's ``queue_limit`` notices wait
    untaken (``"overflow"``: nothing after the last notice taken is lost from the log; resume from it), and
    at once, having read nothing, when ``after_seq`` is more than the feed's ``replay_limit`` positions behind
    ``live_from`` (``"replay_too_far"``: re-sync with a fresh read, :func:`replay_too_far`). Use it on the
    event loop it was made on."""

    def __init__(self, feed: WakeFeed, agent_id: str, after_seq: int | None, live_from: int, limit: int,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.feed = feed
        self.agent_id = agent_id
        self.after_seq = after_seq
        self.live_from = live_from
        self._limit = limit
        self._loop = loop
        self._lock = threading.Lock()
        self._items: collections.deque[WakeNotice] = collections.deque()
        self._replay: collections.deque[WakeNotice] = collections.deque()
        self._replay_at: int | None = after_seq if after_seq is not None and after_seq < live_from else None
        self._waiter: asyncio.Event | None = None
        self._ended: str | None = None
        if after_seq is not None and live_from - after_seq > feed.replay_limit:
            self._replay_at = None
            self._ended = "replay_too_far"
        #: the ``seq`` of the last notice taken (where a resume starts)
        self.last_seq: int | None = after_seq

    @property
    def end_reason(self) -> str | None:
        """Why the subscription ended (None while it runs or while notices remain to be taken)."""
        with self._lock:
            return self._ended if not self._items and not self._replay and self._replay_at is None else None

    # -- the feed thread's side ----------------------------------------------------------------------------

    def _offer(self, notice: WakeNotice) -> None:
        """Called by the feed (its thread, under its lock) for a live notice of this agent."""
        with self._lock:
            if self._ended is not None:
                return
            if self.after_seq is not None and notice.seq <= self.after_seq:
                return
            if len(self._items) >= self._limit:
                self._ended = "overflow"
                self._items.clear()
            else:
                self._items.append(notice)
            waiter, self._waiter = self._waiter, None
        self._wake(waiter)

    def _end(self, reason: str) -> None:
        with self._lock:
            if self._ended is None:
                self._ended = reason
            waiter, self._waiter = self._waiter, None
        self._wake(waiter)

    def _wake(self, waiter: asyncio.Event | None) -> None:
        if waiter is None:
            return
        try:
            self._loop.call_soon_threadsafe(waiter.set)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            with self._lock:
                self._ended = self._ended or "closed"

    # -- the consumer's side -------------------------------------------------------------------------------

    async def next_notice(self, timeout_s: float | None = None) -> WakeNotice | None:
        """The next notice; None when ``timeout_s`` passed first or the subscription ended (then
        :attr:`end_reason` is set). A replay step (one bounded log read, on a worker thread) is never cut
        short by the timeout, so no notice is ever skipped."""
        while self._replay_at is not None and not self._replay:
            self._replay_at = await to_thread.run_sync(self._replay_step, self._replay_at)
        if self._replay:
            return self._take(self._replay.popleft())
        deadline = None if timeout_s is None else self._loop.time() + max(0.0, timeout_s)
        while True:
            with self._lock:
                if self._ended == "overflow":
                    return None
                if self._items:
                    return self._take(self._items.popleft())
                if self._ended is not None:
                    return None
                waiter = self._waiter = self._waiter or asyncio.Event()
            remaining = None if deadline is None else deadline - self._loop.time()
            if remaining is not None and remaining <= 0:
                return None
            try:
                await asyncio.wait_for(waiter.wait(), remaining)
            except TimeoutError:
                return None

    def _take(self, notice: WakeNotice) -> WakeNotice:
        self.last_seq = notice.seq
        return notice

    def _replay_step(self, after: int) -> int | None:
        """One bounded read of the log after ``after`` (up to ``live_from``): this agent's notices kept;
        the position to read from next (None: the replay is done)."""
        rows = self.feed.read.events(after_seq=after, limit=BATCH)
        for row in rows:
            seq = int(row["seq"])
            if seq > self.live_from:
                return None
            self._replay.extend(n for n in notices_of(row) if n.agent_id == self.agent_id)
            after = seq
        return None if len(rows) < BATCH or after >= self.live_from else after

    def __aiter__(self) -> WakeSubscription:
        return self

    async def __anext__(self) -> WakeNotice:
        notice = await self.next_notice(None)
        if notice is None:
            raise StopAsyncIteration
        return notice

    def close(self) -> None:
        """End the subscription and leave the feed (idempotent)."""
        self.feed._remove(self)
        self._end("closed")


class WakeFeed:
    """Tails ``read``'s event log on one thread (:meth:`start` / :meth:`stop`) and fans out the wakes queued.
    Starts at the log's end (earlier wakes are reached by a subscription's replay)."""

    def __init__(self, read: Reader, *, poll_s: float = DEFAULT_POLL_S, idle_poll_s: float | None = None,
                 queue_limit: int = DEFAULT_QUEUE_LIMIT, replay_limit: int = DEFAULT_REPLAY_LIMIT) -> None:
        if not 0 < poll_s <= 1.0:
            raise InvalidInput("poll_s", "must be in (0, 1] seconds")
        idle = max(poll_s, DEFAULT_IDLE_POLL_S) if idle_poll_s is None else idle_poll_s
        if not poll_s <= idle <= 1.0:
            raise InvalidInput("idle_poll_s", "must be in [poll_s, 1] seconds")
        if queue_limit < 1:
            raise InvalidInput("queue_limit", "must be at least 1")
        if isinstance(replay_limit, bool) or not isinstance(replay_limit, int) or replay_limit < 0:
            raise InvalidInput("replay_limit", "must be an integer >= 0 (log positions)")
        self.replay_limit = replay_limit
        self.read = read
        self.poll_s = poll_s
        self.idle_poll_s = idle
        self.queue_limit = queue_limit
        self._lock = threading.Lock()
        self._listeners: list[Callable[[WakeNotice], None]] = []
        self._subscriptions: dict[str, list[WakeSubscription]] = {}
        self._position = 0
        self._stop = threading.Event()
        self._poked = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False
        #: the last store error the feed met (None once a poll succeeded again)
        self.error: str | None = None
        #: listener exceptions seen (the listener is kept)
        self.listener_errors = 0

    @property
    def position(self) -> int:
        """The log position up to which every wake has been handed out."""
        with self._lock:
            return self._position

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Read the log's end, then start the feed thread. A feed starts once."""
        if self._started:
            raise RuntimeError("a wake feed starts once")  # a programming error
        self._started = True
        self._position = self.read.last_seq()
        self._thread = threading.Thread(target=self._run, name="pmw-wake-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (bounded wait) and end every subscription (``"feed_stopped"``). Idempotent."""
        self._stop.set()
        self._poked.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(STOP_TIMEOUT_S)
        with self._lock:
            subscriptions = [s for group in self._subscriptions.values() for s in group]
            self._subscriptions.clear()
            self._listeners.clear()
        for sub in subscriptions:
            sub._end("feed_stopped")

    def poke(self) -> None:
        """Read the log now rather than at the next poll (cheap; any thread)."""
        self._poked.set()

    def commit_hook(self, request: WriteRequest) -> None:
        """For ``Store.on_commit``: after a commit of this process that inserted a wake, :meth:`poke`."""
        if any(isinstance(c, Insert) and c.table == "wakes" for c in request.changes):
            self._poked.set()

    def add_listener(self, callback: Callable[[WakeNotice], None]) -> Callable[[], None]:
        """Call ``callback(notice)`` on the feed thread for every wake queued from now on (it must not
        block); the returned function removes it (idempotent)."""
        with self._lock:
            self._listeners.append(callback)

        def remove() -> None:
            with self._lock:
                if callback in self._listeners:
                    self._listeners.remove(callback)
        return remove

    def subscribe(self, agent_id: str, after_seq: int | None) -> WakeSubscription:
        """``agent_id``'s wakes as an async iterator (call on the event loop that will iterate it): those after
        log position ``after_seq`` replayed from the log first (None: only wakes queued from now on; more
        than ``replay_limit`` positions behind: a subscription already ended with ``"replay_too_far"``, not
        registered). ``InvalidInput`` for a bad ``after_seq``; ``Closed`` once the feed has stopped."""
        after = check_after_seq(after_seq)
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._stop.is_set():
                raise Closed("wake feed")
            sub = WakeSubscription(self, agent_id, after, self._position, self.queue_limit, loop)
            if sub._ended is None:
                self._subscriptions.setdefault(agent_id, []).append(sub)
        return sub

    def subscribers(self, agent_id: str | None = None) -> int:
        """How many subscriptions are open (of ``agent_id``, if given)."""
        with self._lock:
            if agent_id is not None:
                return len(self._subscriptions.get(agent_id, ()))
            return sum(len(group) for group in self._subscriptions.values())

    def _remove(self, sub: WakeSubscription) -> None:
        with self._lock:
            group = self._subscriptions.get(sub.agent_id)
            if group is not None and sub in group:
                group.remove(sub)
                if not group:
                    del self._subscriptions[sub.agent_id]

    # -- the feed thread -----------------------------------------------------------------------------------

    def _run(self) -> None:
        delay = 0.0
        idle = self.poll_s  # the wait after the next empty read: poll_s after activity, doubling to idle_poll_s
        while True:
            if delay and self._poked.wait(delay):
                idle = self.poll_s
            self._poked.clear()  # before the read: a commit during it makes the next wait return at once
            if self._stop.is_set():
                return
            try:
                rows = self.read.events(after_seq=self._position, limit=BATCH)
            except (StoreUnavailable, Closed) as exc:
                self.error = exc.message[:500]
                delay = ERROR_BACKOFF_S
                continue
            except Exception as exc:  # never let the feed die on a bad read: recorded, tried again
                self.error = f"{type(exc).__name__}: {exc}"[:500]
                log.exception("wake feed: reading the log failed")
                delay = ERROR_BACKOFF_S
                continue
            self.error = None
            self._deliver(rows)
            if rows:
                idle = self.poll_s
            delay = 0.0 if len(rows) >= BATCH else idle
            if not rows:
                idle = min(idle * 2, self.idle_poll_s)

    def _deliver(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            notices = notices_of(row)
            with self._lock:
                self._position = max(self._position, int(row["seq"]))
                listeners = list(self._listeners)
                for notice in notices:
                    for sub in list(self._subscriptions.get(notice.agent_id, ())):
                        sub._offer(notice)
                        if sub._ended == "overflow":
                            self._subscriptions[notice.agent_id].remove(sub)
                    if not self._subscriptions.get(notice.agent_id, True):
                        del self._subscriptions[notice.agent_id]
            for notice in notices:
                for listener in listeners:
                    try:
                        listener(notice)
                    except Exception:
                        self.listener_errors += 1
                        log.exception("wake feed: a listener raised (kept)")


__all__ = ["BATCH", "DEFAULT_IDLE_POLL_S", "DEFAULT_POLL_S", "DEFAULT_QUEUE_LIMIT", "DEFAULT_REPLAY_LIMIT",
           "WakeFeed", "WakeNotice", "WakeSubscription", "check_after_seq", "notices_of", "replay_too_far"]
