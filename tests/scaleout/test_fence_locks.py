"""A writer paused inside a fenced commit on PostgreSQL (SIGSTOP, a VM freeze, a cut link) holds the row lock
its fence took: the controller lease ``FOR SHARE``. A standby's takeover of that lease waits on the lock for
as long as the pause lasts, unless the paused session is ended by the server: the runtime sets its sessions'
``idle_in_transaction_session_timeout`` (``PMW_PG_IDLE_IN_TRANSACTION_MS``), so the locks go with the
session and the standby takes over. The paused leader's commit then fails; nothing of it is written.

Two stores on one real PostgreSQL database stand for two processes; the pause is a fenced write transaction
(the gateway's, on the driver cursor) that checks its fence and then sends nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from engine.controller.leadership import ControllerLeadership
from engine.errors import PMWError
from store import Store
from store.database import DatabaseOptions

LEASE_S = 1.0
PAUSE_S = 30.0   # the paused leader's pause (it is woken by the test when the test is done with it)
IDLE_MS = 500    # the paused leader's sessions end after this long idle inside a transaction
BLOCKED_S = 3.0  # without the setting, the standby is still waiting this long after the lease expired


def _store(url: str, idle_ms: int) -> Store:
    store = Store(url, DatabaseOptions(pg_idle_in_transaction_ms=idle_ms))
    store.init(time.time_ns() // 1000)
    return store


@pytest.fixture
def stores(pg_url: str) -> Iterator[tuple[str, list[Store]]]:
    opened: list[Store] = []
    yield pg_url, opened
    for s in opened:
        s.db.dispose()


def _paused_commit(leader: Store, leadership: ControllerLeadership, resume: threading.Event,
                   outcome: list[object]) -> None:
    """A fenced commit of the leader that checks its lease (FOR SHARE, the row lock) and then pauses."""
    try:
        with leader.db.write_cursor() as cur:
            leadership.fence().check(cur, "postgresql")
            cur.execute("INSERT INTO state_entries (key, value, updated_by, updated_at_us, version) "
                        "VALUES ('paused-write', '1', 'a', 1, 1)")
            resume.wait(PAUSE_S)
        outcome.append("committed")
    except (PMWError, leader.db.database_error) as exc:
        outcome.append(exc)


def _standby_takes_over(standby: ControllerLeadership, took: list[float], started: float) -> None:
    if standby.acquire():
        took.append(time.monotonic() - started)


def _race(stores: tuple[str, list[Store]], idle_ms: int) -> tuple[list[float], list[object], Store,
                                                                     threading.Event, threading.Thread]:
    url, opened = stores
    leader, other = _store(url, idle_ms), _store(url, 10_000)
    opened += [leader, other]
    a = ControllerLeadership(leader, "main", "host-a", LEASE_S)
    assert a.acquire()
    resume, outcome = threading.Event(), []  # type: ignore[var-annotated]
    paused = threading.Thread(target=_paused_commit, args=(leader, a, resume, outcome), daemon=True)
    paused.start()
    time.sleep(LEASE_S + 0.3)  # the paused leader's lease expires
    took: list[float] = []
    standby = threading.Thread(target=_standby_takes_over,
                               args=(ControllerLeadership(other, "main", "host-b", 5.0), took, time.monotonic()),
                               daemon=True)
    standby.start()
    return took, outcome, other, resume, standby


def test_a_leader_paused_inside_a_fenced_commit_does_not_hold_the_takeover(stores: tuple[str, list[Store]]) -> None:
    took, outcome, other, resume, standby = _race(stores, IDLE_MS)
    standby.join(20)
    assert took, "the standby never took the lease over"
    assert took[0] < 10, f"the takeover waited {took[0]:.1f} s"
    lease = other.lease("main")
    assert lease is not None and (lease.holder, lease.generation) == ("host-b", 2)
    resume.set()  # the paused leader resumes: its session is gone, its commit fails, nothing of it written
    deadline = time.monotonic() + 20
    while not outcome and time.monotonic() < deadline:
        time.sleep(0.05)
    assert outcome and outcome[0] != "committed"
    assert other.read.get("state_entries", key="paused-write") is None


def test_without_the_setting_the_takeover_waits_for_the_paused_leader(stores: tuple[str, list[Store]]) -> None:
    """The control: the same pause with the session setting off holds the standby (so the test above can
    fail), until the paused leader resumes."""
    took, outcome, other, resume, standby = _race(stores, 0)
    standby.join(BLOCKED_S)
    assert standby.is_alive() and not took  # still waiting on the paused leader's row lock
    resume.set()
    standby.join(20)
    deadline = time.monotonic() + 20  # the standby may run on before the leader's thread records its commit
    while not outcome and time.monotonic() < deadline:
        time.sleep(0.05)
    assert outcome == ["committed"]  # its lease had expired, but its own transaction's fence was checked first
    assert took and other.lease("main") is not None


def test_the_session_setting_keeps_the_options_a_url_names(stores: tuple[str, list[Store]]) -> None:
    """The setting is added to the URL's libpq ``options``; a ``search_path`` the URL names stays."""
    url, opened = stores
    joined = "&" if "?" in url else "?"
    store = Store(f"{url}{joined}options=-csearch_path%3Dpmw_elsewhere,public",
                  DatabaseOptions(pg_idle_in_transaction_ms=1234))
    opened.append(store)
    with store.db.read_cursor() as cur:
        cur.execute("SHOW idle_in_transaction_session_timeout")
        idle = cur.fetchone()[0]
        cur.execute("SHOW search_path")
        path = cur.fetchone()[0]
    assert idle == "1234ms" and path.startswith("pmw_elsewhere")
    off = Store(url, DatabaseOptions(pg_idle_in_transaction_ms=0))
    opened.append(off)
    with off.db.read_cursor() as cur:
        cur.execute("SHOW idle_in_transaction_session_timeout")
        assert cur.fetchone()[0] == "0"  # the server's own default
