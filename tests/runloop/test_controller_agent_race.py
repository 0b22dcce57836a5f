"""Controllers starting together (a leader and its standby, or several hosts' controllers) each make sure
the controller's own agent exists, is active and holds its grant (``ensure_controller_agent``). Started at
the same instant on one fresh world they must all succeed and leave ONE agent with ONE session.

Found by the multi-host fault harness (CI, twice): two controllers both read "no agent", both registered it
(the second registration recovered the agent the first had just made and attached a second session on the
same terminal), and both then failed to activate ``term:t-pmw-controller`` ("names 2 sessions"), a crash
the retry did not cover. Each round here releases the starters with a barrier on a fresh database, one of
them held after its first read until another has finished (so the collision happens every round, not by
luck of timing); bounded (ROUNDS x STARTERS threads, each joined with a deadline).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.errors import PMWError
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer
from engine.runloop.follower import (
    CONTROLLER_AGENT,
    CONTROLLER_CAPABILITIES,
    CONTROLLER_SESSION,
    CONTROLLER_TERMINAL,
    ensure_controller_agent,
)
from engine.sources import RandomIds, SystemClock
from engine.world.book import RuntimeBook
from store import Store
from tests.conftest import DbUrlFactory, book_of, close_world, open_pdp_world

ROUNDS = 6
STARTERS = 3
JOIN_S = 60.0


class AfterFirstAgentRead:
    """The store's reader, except that after the first read of the controller's agent row ``then`` runs
    before the row is handed back: the reader goes on with what it saw only once ``then`` is done (another
    starter finished, or ran to its end). Every read still goes to the real store."""

    def __init__(self, reader: Any, then: Callable[[], object]) -> None:
        self._reader, self._then = reader, then
        self._done = False

    def get(self, table: str, **key: Any) -> Any:
        row = self._reader.get(table, **key)
        if table == "agents" and key.get("agent_id") == CONTROLLER_AGENT and not self._done:
            self._done = True
            self._then()
        return row

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


def _held_until(release: threading.Event) -> None:
    assert release.wait(JOIN_S), "the first starter did not finish"


def _round(url: str, pdp: CerbosPdp, art: Path) -> list[BaseException]:
    """One fresh world, STARTERS starters released together; the first of them (``late``) reads the agent
    row and holds what it saw until another starter has finished. Every starter's exception, if any."""
    world = open_pdp_world(url, pdp, art)
    books = [RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read), clock=SystemClock(), ids=RandomIds(),
                         artifact_dir=art) for store in (Store(url) for _ in range(STARTERS))]
    barrier = threading.Barrier(STARTERS, timeout=JOIN_S)
    errors: list[BaseException] = []
    first_done = threading.Event()
    late = books[0]
    late.store.read = AfterFirstAgentRead(late.store.read, lambda: _held_until(first_done))  # type: ignore[assignment]

    def start(book: RuntimeBook) -> None:
        try:
            barrier.wait()
            ensure_controller_agent(book, "gov")
        except (PMWError, AssertionError) as exc:  # collected: the test reports every starter's failure
            errors.append(exc)
        finally:
            if book is not late:
                first_done.set()

    threads = [threading.Thread(target=start, args=(b,), daemon=True) for b in books]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(JOIN_S)
        assert not any(t.is_alive() for t in threads), "a starter did not finish"
        read = book_of(world).store.read
        sessions = read.rows("sessions", {"agent_id": CONTROLLER_AGENT})
        agent = read.get("agents", agent_id=CONTROLLER_AGENT)
        if not errors:
            assert len(sessions) == 1, sessions
            assert sessions[0]["status"] == "active"
            assert agent is not None and agent["status"] == "active"
            assert set(CONTROLLER_CAPABILITIES) <= set(agent["capability_profile"]["capabilities"])
        return errors
    finally:
        for b in books:
            b.close()
        close_world(world)


@pytest.mark.parametrize("backend", [pytest.param("sqlite-file"),
                                     pytest.param("postgres", marks=pytest.mark.postgres)])
def test_controllers_starting_together_leave_one_agent_with_one_session(
        db_url_factory: DbUrlFactory, pdp_client: CerbosPdp, tmp_path: Path) -> None:
    for n in range(ROUNDS):
        errors = _round(db_url_factory(), pdp_client, tmp_path / f"art{n}")
        assert errors == [], (n, [f"{type(e).__name__}: {e}" for e in errors])


@pytest.mark.parametrize("detached", [False, True], ids=["registered", "every-session-detached"])
def test_a_starter_that_saw_the_agent_attached_while_another_activated_it_adds_no_session(
        pdp_client: CerbosPdp, tmp_path: Path, detached: bool) -> None:
    """CI, stop 27: starter A read the agent ``attached`` (B had registered it), B then activated the
    session, and A, finding no attached session, took it for "every session detached" and attached a
    second one. Here A's agent read is followed by B's whole start before A goes on; both succeed and
    one session is active, the only one not offline (with every earlier session detached too: B names
    the new session by the count, A sees it active)."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    world = open_pdp_world(url, pdp_client, tmp_path / "art")
    books = [RuntimeBook(store, policy=PdpAuthorizer(pdp_client, store.read), clock=SystemClock(),
                         ids=RandomIds(), artifact_dir=tmp_path / "art") for store in (Store(url), Store(url))]
    try:
        read = book_of(world).store.read
        world.register_agent(CONTROLLER_AGENT, "PMW controller", "controller", CONTROLLER_TERMINAL,
                             session_id=CONTROLLER_SESSION)
        if detached:
            world.activate_session(f"session:{CONTROLLER_SESSION}")
            world.detach_session(f"session:{CONTROLLER_SESSION}", actor="gov")
        a, b = books
        a.store.read = AfterFirstAgentRead(a.store.read, lambda: ensure_controller_agent(b, "gov"))  # type: ignore[assignment]
        ensure_controller_agent(a, "gov")
        sessions = read.rows("sessions", {"agent_id": CONTROLLER_AGENT})
        live = [s for s in sessions if s["status"] in ("active", "attached")]
        assert [s["status"] for s in live] == ["active"], sessions
        assert (read.get("agents", agent_id=CONTROLLER_AGENT) or {}).get("status") == "active"
    finally:
        for book in books:
            book.close()
        close_world(world)


def test_a_world_left_with_two_sessions_by_racing_starters_is_started_again(
        pdp_client: CerbosPdp, tmp_path: Path) -> None:
    """What the race left in a world made before the fix (two attached sessions, none active) and a
    controller whose every session was detached both start: one session is made active."""
    world = open_pdp_world(f"sqlite:///{tmp_path / 'w.db'}", pdp_client, tmp_path / "art")
    try:
        book = book_of(world)
        for _ in range(2):
            world.register_agent(CONTROLLER_AGENT, "PMW controller", "controller", CONTROLLER_TERMINAL)
        read = book.store.read
        assert [s["status"] for s in read.rows("sessions", {"agent_id": CONTROLLER_AGENT})] == ["attached"] * 2
        ensure_controller_agent(book, "gov")
        statuses = sorted(s["status"] for s in read.rows("sessions", {"agent_id": CONTROLLER_AGENT}))
        assert statuses == ["active", "attached"]
        for s in read.rows("sessions", {"agent_id": CONTROLLER_AGENT}):
            world.detach_session(f"session:{s['session_id']}", actor="gov")
        assert (read.get("agents", agent_id=CONTROLLER_AGENT) or {}).get("status") != "active"
        ensure_controller_agent(book, "gov")
        assert (read.get("agents", agent_id=CONTROLLER_AGENT) or {}).get("status") == "active"
        assert [s["status"] for s in read.rows("sessions", {"agent_id": CONTROLLER_AGENT})].count("active") == 1
    finally:
        close_world(world)
