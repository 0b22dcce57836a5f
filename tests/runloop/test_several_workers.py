"""Several workers (and two controllers) on one world at once: every wake runs once and ends with exactly
one receipt; every controller step is committed once."""

from __future__ import annotations

import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer
from engine.runloop import DEFAULT_RULES, InProcessRunner
from engine.sources import RandomIds, SystemClock
from engine.world import World
from engine.world.book import RuntimeBook
from store import Store
from tests.conftest import add_agent, book_of, close_world, open_pdp_world
from tests.runloop.support import relay

AGENTS = [f"w{i}" for i in range(6)]


def test_two_runners_share_the_work_and_nothing_runs_twice(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    url = f"sqlite:///{tmp_path / 'world.db'}"
    setup = open_pdp_world(url, pdp_client, tmp_path / "art", seed=3)
    for a in [*AGENTS, "src"]:
        add_agent(setup, a, ["state.write", "wake.enqueue"])
    for a in AGENTS:
        setup.subscribe(a, "src-out")
    close_world(setup)

    def open_book() -> RuntimeBook:
        store = Store(url)
        return RuntimeBook(store, policy=PdpAuthorizer(pdp_client, store.read), clock=SystemClock(), ids=RandomIds())

    books = [open_book(), open_book()]
    worlds = [b.world for b in books]
    runners = [InProcessRunner(b, adapters={a: relay(f"{a}-out") for a in AGENTS}, worker_id=f"worker-{n}")
               for n, b in enumerate(books)]
    for r in runners:
        r.start()
    for n in range(20):  # 20 direct wakes per agent, plus the controller's (one event wakes all six)
        for a in AGENTS:
            worlds[0].enqueue_wake("src", a, "direct", f"k-{a}-{n}")
    worlds[0].compare_and_set_state("src", "src-out", 0, 1)

    def run(r: InProcessRunner) -> None:
        for _ in range(5):
            r.run_until_quiet(max_rounds=500)
    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(run, r) for r in runners]:
            done.result(timeout=300)  # an error in either runner is raised here
    w = worlds[0]
    wakes = w.list_wakes(actor="gov", limit=10_000)
    assert len(wakes) == 20 * len(AGENTS) + len(AGENTS)
    receipts = Counter(r.wake_id for r in w.list_receipts(actor="gov", limit=10_000))
    assert all(receipts[x.wake_id] == 1 for x in wakes) and len(receipts) == len(wakes)
    by_worker = Counter(x.lease_owner for x in wakes)
    assert set(by_worker) == {"worker-0", "worker-1"}          # both workers took part
    outcomes = Counter((r.agent_id, r.outcome.value) for r in w.list_receipts(actor="gov", limit=10_000))
    for a in AGENTS:
        # two workers may run wakes of one agent at once: the slower write is refused (a conflict receipt),
        # never applied over the other; every acted wake's effect is applied exactly once
        assert outcomes[(a, "acted")] + outcomes[(a, "conflict")] == 21
        assert w.get_state(f"{a}-out", actor="gov").value == outcomes[(a, "acted")]
    steps = [e.op_id for e in w.events(limit=100_000, actor="gov") if e.event_type == "controller.step"]
    assert len(steps) == len(set(steps))
    for r in runners:
        r.close()
    for b in books:
        b.close()


def test_a_second_controller_behind_the_first_rebuilds_and_carries_on(pworld: World) -> None:
    """Both controllers start at the same position; the first commits the next steps; the second, observing
    the same events, sends the same step requests, which return the stored steps: nothing twice."""
    for a in ("src", "w0", "w1"):
        add_agent(pworld, a, ["state.write"])
    for a in ("w0", "w1"):
        pworld.subscribe(a, "src-out")
    first = InProcessRunner(book_of(pworld), adapters={}, worker_id="worker-a")
    second = InProcessRunner(book_of(pworld), adapters={}, worker_id="worker-b")
    first.start()
    second.start()
    first.run_until_quiet(max_rounds=10)
    pworld.compare_and_set_state("src", "src-out", 0, 1)
    assert first.loop is not None and second.loop is not None
    first.loop.drain()
    second.loop.drain()        # the same event: op id taken / position moved -> rebuilt, nothing raised
    second.loop.drain()
    assert second.loop.position == first.loop.position
    assert len(pworld.list_wakes(actor="gov")) == 2
    steps = [e.op_id for e in pworld.events(limit=10_000, actor="gov") if e.event_type == "controller.step"]
    assert len(steps) == len(set(steps))
    first.close()
    second.close()


def test_a_controller_whose_steps_diverge_rebuilds_from_what_the_other_committed(pworld: World,
                                                                                 tmp_path: Path) -> None:
    """During a rule rollout two controllers may run different rules: the one without the subscriber rule
    commits nothing for an event the other commits a step for, so its next step request differs from the
    one stored under the same operation id. It must rebuild from SQL and carry on, not fail."""
    for a in ("src", "w0"):
        add_agent(pworld, a, ["state.write"])
    pworld.subscribe("w0", "src-out")
    old_rules = tmp_path / "old-rules"
    shutil.copytree(DEFAULT_RULES, old_rules)
    text = (old_rules / "wake_targeting.yaml").read_text()
    start, end = text.index("  - name: wake_subscribers"), text.index("  - name: wake_room_members")
    (old_rules / "wake_targeting.yaml").write_text(text[:start] + text[end:])
    first = InProcessRunner(book_of(pworld), adapters={}, worker_id="worker-a")
    second = InProcessRunner(book_of(pworld), adapters={}, worker_id="worker-b", rule_dir=old_rules)
    first.start()
    second.start()
    first.run_until_quiet(max_rounds=10)
    second.run_until_quiet(max_rounds=10)
    pworld.compare_and_set_state("src", "src-out", 0, 1)   # the first wakes w0 (a step); the second: nothing
    pworld.append_event("src", "claim.asserted", {"term": "t", "claim": "c", "value": 1})  # a fact: both step
    assert first.loop is not None and second.loop is not None
    first.loop.drain()
    second.loop.drain()                                      # must not raise OperationConflict
    second.loop.drain()
    assert second.loop.position == first.loop.position
    steps = [e.op_id for e in pworld.events(limit=10_000, actor="gov") if e.event_type == "controller.step"]
    assert len(steps) == len(set(steps))
    first.close()
    second.close()
