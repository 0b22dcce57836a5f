"""The wake storm A -> B -> C -> A, end to end: controller, workers, the real PDP and the gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.policy.cerbos_adapter import CerbosPdp
from engine.runloop import InProcessRunner
from engine.sources import ManualClock
from engine.world import World
from tests.conftest import add_agent, book_of, close_world, open_pdp_world
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



COOLDOWN_US = 2_000_000  # rules/wake_storm.yaml cooldown_us


def _cooling_world(tmp_path: Path, pdp: CerbosPdp) -> tuple[World, ManualClock, InProcessRunner]:
    """``b`` follows ``x``; ``a`` and ``d`` write it. A runner (controller and worker) on a manual clock."""
    clock = ManualClock()
    world = open_pdp_world(f"sqlite:///{tmp_path / 'world.db'}", pdp, tmp_path / "artifacts", clock=clock)
    for name in ("a", "b", "d"):
        add_agent(world, name, ["state.write"])
    world.subscribe("b", "x")
    runner = InProcessRunner(book_of(world), adapters={"b": relay("b-out")})
    runner.start()
    return world, clock, runner


def _step_decisions(world: World) -> list[dict[str, Any]]:
    return [d for e in world.events(limit=1000, actor="gov") if e.event_type == "controller.step"
            for d in e.payload["decisions"]]


def test_a_wake_stopped_by_the_cooldown_runs_once_at_the_cooldowns_end(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    world, clock, runner = _cooling_world(tmp_path, pdp_client)
    t0 = clock.now_us()
    world.compare_and_set_state("a", "x", 0, 1)                # b is woken now and cools down for 2 s
    first = runner.run_until_quiet(max_rounds=20)
    assert (first.wakes, first.cycles, first.deferred) == (1, 1, 0)
    clock.advance(0.5)
    world.compare_and_set_state("d", "x", 1, 2)                # inside the cooldown: deferred to its end
    clock.advance(0.5)
    world.compare_and_set_state("d", "x", 2, 3)                # inside the same cooldown: joins that wake
    waiting = runner.run_until_quiet(max_rounds=20)            # the clock does not move: nothing is due yet
    assert (waiting.cycles, waiting.deferred, waiting.suppressed) == (0, 2, 0)
    [deferred] = [w for w in world.list_wakes(actor="gov", target_agent="b") if w.payload.get("deferred")]
    end = t0 + COOLDOWN_US
    assert deferred.status.value == "pending" and deferred.not_before_us == end
    by_d = [e for e in world.events(limit=1000, actor="gov") if e.actor_id == "d" and e.subject_id == "x"]
    assert deferred.payload["deferred"] == {"reason": "cooldown", "until_us": end, "deferrals": 1,
                                            "position": by_d[0].seq, "detail": f"deferred by cooldown until {end}"}
    assert (deferred.payload["chain"], deferred.payload["depth"], deferred.cause, deferred.cause_event_id) == (
        by_d[0].correlation_id or by_d[0].event_id, 0, "subscriber", by_d[0].event_id)
    decisions = [d for d in _step_decisions(world) if d["kind"] == "defer"]
    assert [(d["agent"], d["not_before_us"], d["joins"]) for d in decisions] == [
        ("b", end, None), ("b", end, deferred.idempotency_key)]
    assert (decisions[0]["idempotency_key"], decisions[0]["reason"]) == (deferred.idempotency_key, "cooldown")

    ran = runner.run_until_quiet(max_rounds=20, advance_clock=True)   # the clock jumps to the cooldown's end
    assert (ran.cycles, ran.wakes, ran.deferred) == (1, 0, 0)
    assert clock.now_us() == end
    receipt = world.receipt_for_wake(deferred.wake_id, actor="gov")
    assert receipt.outcome.value == "acted" and receipt.created_at_us >= end
    assert receipt.payload["deferred"] == deferred.payload["deferred"]  # the receipt says it was deferred, and why
    ran_trace = world.get_trace(deferred.wake_id, actor="gov")
    assert ran_trace.started_at_us >= end
    assert ran_trace.decisions[0]["deferred"]["detail"] == f"deferred by cooldown until {end}"
    wakes = world.list_wakes(actor="gov", target_agent="b")
    assert len(wakes) == 2 and all(w.status.value == "acked" for w in wakes)  # two candidates, one deferred wake
    again = runner.run_until_quiet(max_rounds=20, advance_clock=True)
    assert (again.cycles, again.wakes, again.deferred) == (0, 0, 0)
    runner.close()
    close_world(world)


def test_a_restarted_controller_queues_a_deferred_wake_once(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    world, clock, runner = _cooling_world(tmp_path, pdp_client)
    world.compare_and_set_state("a", "x", 0, 1)
    runner.run_until_quiet(max_rounds=20)
    clock.advance(0.5)
    world.compare_and_set_state("d", "x", 1, 2)
    runner.run_until_quiet(max_rounds=20)
    facts = book_of(world).controller_facts("main")
    runner.close()
    again = InProcessRunner(book_of(world), adapters={"b": relay("b-out")})
    again.start()
    assert again.loop is not None
    assert sorted(again.loop.controller.facts(), key=lambda f: f["id"]) == sorted(facts, key=lambda f: f["id"])
    stats = again.run_until_quiet(max_rounds=20, advance_clock=True)
    assert (stats.deferred, stats.cycles) == (0, 1)
    wakes = world.list_wakes(actor="gov", target_agent="b")
    assert len(wakes) == 2 and all(w.status.value == "acked" for w in wakes)
    again.close()
    close_world(world)
