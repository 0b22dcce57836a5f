"""The controller served only while leading (issue 13): a standby takes over when the leader's lease lapses
or is released, rebuilds from SQL, and the old leader's step after the takeover is refused: every step is
committed once, by the generation that led. Real PDP and rules, SQLite file."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from engine.controller.leadership import ControllerLeadership
from engine.errors import NotLeader
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer
from engine.runloop import DEFAULT_RULES
from engine.runloop.follower import ControllerLoop
from engine.runloop.leader import LeaderRunner, LeaderStats, serve_while_leader
from engine.sources import Clock, RandomIds, SystemClock
from engine.world import World
from engine.world.book import RuntimeBook
from store import Store
from tests.conftest import add_agent, book_of, close_world, open_pdp_world

LEASE_S = 3.0


def candidate(book: RuntimeBook, holder: str, clock: Clock, lease_s: float = LEASE_S) -> LeaderRunner:
    lead = ControllerLeadership(book.store, "main", holder, lease_s, clock=clock)
    return LeaderRunner(ControllerLoop(book, DEFAULT_RULES, leadership=lead), governor="gov")


def steps(world: World) -> list[tuple[str, int | None]]:
    """(operation id, generation) of every controller step in the log."""
    return [(e.op_id, e.payload.get("generation")) for e in world.events(limit=10_000, actor="gov")
            if e.event_type == "controller.step"]


@pytest.fixture
def team(pworld: World) -> World:
    for a in ("src", "w0", "w1"):
        add_agent(pworld, a, ["state.write"])
    for a in ("w0", "w1"):
        pworld.subscribe(a, "src-out")
    return pworld


def test_a_paused_leaders_step_after_the_takeover_is_refused_and_the_successor_commits_it(team: World) -> None:
    book, clock = book_of(team), team.clock
    a, b = candidate(book, "ctl-a", clock), candidate(book, "ctl-b", clock)
    stats = LeaderStats()
    a.round(stats)
    b.round(stats)
    assert (a.leadership.fencing_token, b.leadership.fencing_token, stats.standby) == (1, None, 1)
    team.compare_and_set_state("src", "src-out", 0, 1)
    a.round(stats)
    assert len(team.list_wakes(actor="gov")) == 2
    team.compare_and_set_state("src", "src-out", 1, 2)   # a decides on this one, then is paused past its lease
    clock.advance(LEASE_S + 1)  # type: ignore[attr-defined]
    assert b.leadership.acquire() and b.leadership.fencing_token == 2   # the standby took over
    seq = book.store.read.last_seq()
    with pytest.raises(NotLeader) as refused:
        a.loop.drain()                                   # the old leader wakes up mid-step
    assert (refused.value.reason, refused.value.current_holder) == ("stale_generation", "ctl-b")
    assert book.store.read.last_seq() == seq and len(team.list_wakes(actor="gov")) == 2  # nothing written
    b.round(stats)                                       # the successor rebuilds from SQL and commits it
    assert len(team.list_wakes(actor="gov")) == 4
    assert not a.round(stats) and a.leadership.fencing_token is None   # the old leader stands by
    done = steps(team)
    assert len(done) == len({op for op, _ in done}) and [g for _, g in done][-1] == 2
    assert {g for _, g in done} <= {1, 2}
    assert book.rebuild_state(from_snapshot=False) == book.state_image()


def test_a_leader_whose_rules_compile_slowly_keeps_the_lease_it_takes(team: World) -> None:
    """CI, stop 27's rerun: on a loaded host the first round of a 0.6 s lease lost it (fencing token None):
    the rules were compiled after the lease was taken. Here compiling takes 1.5 leases of the world's clock;
    the runner compiles before it takes the lease, and still leads after its first round."""
    book, clock = book_of(team), team.clock
    a = candidate(book, "ctl-a", clock)
    compile_rules, compiled = a.loop.load, []

    def slow_load() -> None:  # the first call compiles (slowly); later ones find the rules compiled
        if not compiled:
            clock.advance(LEASE_S * 1.5)  # type: ignore[attr-defined]
            compiled.append(True)
        compile_rules()

    a.loop.load = slow_load  # type: ignore[method-assign]
    stats = LeaderStats()
    a.round(stats)
    assert (a.leadership.fencing_token, stats.takeovers, stats.lost) == (1, 1, 0)


TAKEOVER_SLACK_S = 4.0


def test_a_standby_takes_over_from_a_dead_leader_within_its_lease(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    """Real time, two threads: the leader stops renewing (dies); the standby serves within lease + lease/3."""
    url = f"sqlite:///{tmp_path / 'world.db'}"
    setup = open_pdp_world(url, pdp_client, tmp_path / "art")
    for a in ("src", "w0"):
        add_agent(setup, a, ["state.write"])
    setup.subscribe("w0", "src-out")
    close_world(setup)
    books = []
    for _ in range(2):
        store = Store(url)
        books.append(RuntimeBook(store, policy=PdpAuthorizer(pdp_client, store.read), clock=SystemClock(),
                                 ids=RandomIds()))
    lease_s = 0.6
    dead = candidate(books[0], "ctl-dead", SystemClock(), lease_s)
    dead.round(LeaderStats())
    assert dead.leadership.fencing_token == 1
    died = time.monotonic()  # it never renews again (killed)
    standby = candidate(books[1], "ctl-standby", SystemClock(), lease_s)
    stop = threading.Event()
    served: list[LeaderStats] = []
    thread = threading.Thread(target=lambda: served.append(serve_while_leader(standby, stop, poll_s=0.05)))
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while standby.leadership.fencing_token != 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        takeover_s = time.monotonic() - died
        # the standby polls every lease/3: it takes over at its first poll after the lease ran out; the slack
        # is for a loaded 2-core machine (failed at 1.0 s under the soak and two test workers), the takeover
        # times themselves are measured by the fault harness (tests/multihost/test_deployment_faults.py)
        assert standby.leadership.fencing_token == 2 and takeover_s < lease_s * 4 / 3 + TAKEOVER_SLACK_S, takeover_s
        books[0].world.compare_and_set_state("src", "src-out", 0, 1)
        while not books[0].world.list_wakes(actor="gov") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(books[0].world.list_wakes(actor="gov")) == 1   # the new leader serves
    finally:
        stop.set()
        thread.join(10)
    assert served and served[0].takeovers == 1
    lease = books[0].store.lease("main")
    assert lease is not None and lease.expires_at_us < SystemClock().now_us()   # released on stop
    for b in books:
        b.close()
