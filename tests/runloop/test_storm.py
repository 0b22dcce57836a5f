"""The wake storm A -> B -> C -> A, end to end: controller, workers, the real PDP and the gateway."""

from __future__ import annotations

from engine.runloop import InProcessRunner
from engine.world import World
from tests.conftest import book_of
from tests.runloop.support import relay, ring


def test_a_ring_of_agents_is_stopped_at_the_configured_depth(pworld: World) -> None:
    runner = ring(pworld, ["a", "b", "c"])
    pworld.compare_and_set_state("a", "a-out", 0, 1)           # A acts on its own: depth 0
    stats = runner.run_until_quiet(max_rounds=50)
    wakes = pworld.list_wakes(actor="gov")
    hops = sorted((w.payload["depth"], w.target_agent) for w in wakes)
    assert hops == [(0, "b"), (1, "c"), (2, "a")]               # B, C, A woken; the 4th hop is stopped
    steps = [e for e in pworld.events(limit=1000, actor="gov") if e.event_type == "controller.step"]
    suppressed = [d for e in steps for d in e.payload["decisions"] if d["kind"] == "suppress"]
    assert [(d["agent"], d["reason"], d["depth"]) for d in suppressed] == [("b", "depth", 3)]
    assert suppressed[0]["detail"] == "cascade depth 3 reached the limit of 3"
    assert stats.suppressed == 1 and stats.cycles == 3
    for w in wakes:                                             # every wake ended with exactly one receipt
        assert pworld.receipt_for_wake(w.wake_id, actor="gov").outcome.value == "acted"
    chain = {w.payload["chain"] for w in wakes}
    assert len(chain) == 1                                      # one cascade, one chain id
    runner.close()


def test_a_restarted_controller_rebuilds_from_sql_and_fires_nothing_twice(pworld: World) -> None:
    runner = ring(pworld, ["a", "b", "c"])
    pworld.compare_and_set_state("a", "a-out", 0, 1)
    runner.run_until_quiet(max_rounds=50)
    before = len(pworld.list_wakes(actor="gov"))
    position = book_of(pworld).controller_position("main")
    runner.close()
    again = InProcessRunner(book_of(pworld), adapters={n: relay(f"{n}-out") for n in ["a", "b", "c"]})
    again.start()
    assert position is not None and again.loop is not None and again.loop.position == position.position
    stats = again.run_until_quiet(max_rounds=50)
    assert (stats.wakes, stats.cycles, len(pworld.list_wakes(actor="gov"))) == (0, 0, before)
    again.close()

