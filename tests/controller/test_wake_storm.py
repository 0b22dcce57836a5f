"""Wake-storm suppression: each guard, with its reason, and the A -> B -> C -> A storm."""

from __future__ import annotations

from pathlib import Path

from engine.controller import DeferWake, Suppress, SuppressReason, WakeTarget
from tests.controller.conftest import MakeController
from tests.controller.support import SECOND, T0, brief, handoff, set_constants


def test_storm_a_b_c_a_is_stopped_at_the_configured_depth(make_controller: MakeController) -> None:
    ctl = make_controller()
    hops = [("A", "B"), ("B", "C"), ("C", "A"), ("A", "B"), ("B", "C")]
    out = [ctl.observe(handoff(i + 1, src, dst, depth=i)) for i, (src, dst) in enumerate(hops)]
    assert [brief(d) for d in out] == [
        [("wake", "B")], [("wake", "C")], [("wake", "A")],
        [("suppress", "B", "depth")], [("suppress", "C", "depth")],
    ]
    stop = out[3][0]
    assert isinstance(stop, Suppress)
    assert stop.detail == "cascade depth 3 reached the limit of 3"
    assert stop.rule == "wake_storm/storm_depth"
    assert (stop.position, stop.depth, stop.chain) == (4, 3, "ch1")


def test_storm_depth_follows_the_rule_file(make_controller: MakeController, rule_dir: Path) -> None:
    set_constants(rule_dir, "wake_storm", max_depth=2)
    ctl = make_controller()
    hops = [("A", "B"), ("B", "C"), ("C", "A")]
    out = [brief(ctl.observe(handoff(i + 1, s, d, depth=i))) for i, (s, d) in enumerate(hops)]
    assert out == [[("wake", "B")], [("wake", "C")], [("suppress", "A", "depth")]]


def test_ttl_stops_wakes_of_a_stale_chain(make_controller: MakeController) -> None:
    ctl = make_controller()
    now = T0 + 3600 * SECOND
    [stale] = ctl.observe(handoff(1, "A", "B", now=now, origin=now - 601 * SECOND))
    assert isinstance(stale, Suppress)
    assert stale.reason is SuppressReason.TTL
    assert stale.detail == "chain ch1 began 601000000 us ago; the limit is 600000000 us"
    [fresh] = ctl.observe(handoff(2, "A", "B", chain="ch2", now=now, origin=now - 599 * SECOND))
    assert isinstance(fresh, WakeTarget)


def test_ttl_is_checked_before_depth(make_controller: MakeController) -> None:
    ctl = make_controller()
    [d] = ctl.observe(handoff(1, "A", "B", depth=7, now=T0, origin=T0 - 3600 * SECOND))
    assert isinstance(d, Suppress) and d.reason is SuppressReason.TTL


def test_cooldown_defers_another_chain_waking_the_same_agent_too_soon(make_controller: MakeController) -> None:
    ctl = make_controller()
    assert brief(ctl.observe(handoff(1, "A", "B", chain="c1", now=T0))) == [("wake", "B")]
    [cool] = ctl.observe(handoff(2, "D", "B", chain="c2", now=T0 + SECOND))
    assert isinstance(cool, DeferWake) and cool.reason is SuppressReason.COOLDOWN
    assert (cool.not_before_us, cool.joins) == (T0 + 2 * SECOND, None)
    assert cool.detail == f"deferred by cooldown until {T0 + 2 * SECOND}"
    # the deferred wake runs at T0+2s, so the agent cools down until T0+4s: a candidate then is deferred again
    assert brief(ctl.observe(handoff(3, "D", "B", chain="c3", now=T0 + 2 * SECOND))) == [
        ("defer", "B", str(T0 + 4 * SECOND))]
    assert brief(ctl.observe(handoff(4, "D", "B", chain="c4", now=T0 + 6 * SECOND))) == [("wake", "B")]


def test_dedupe_stops_a_chain_waking_the_same_agent_twice(make_controller: MakeController) -> None:
    ctl = make_controller()
    assert brief(ctl.observe(handoff(1, "A", "B", chain="c1", now=T0))) == [("wake", "B")]
    [dup] = ctl.observe(handoff(2, "C", "B", chain="c1", depth=1, now=T0 + 10 * SECOND))
    assert isinstance(dup, Suppress) and dup.reason is SuppressReason.DEDUPE
    assert dup.detail == "chain c1 already woke B"
    assert brief(ctl.observe(handoff(3, "C", "B", chain="c2", depth=1, now=T0 + 20 * SECOND))) == [("wake", "B")]


def test_budget_stops_an_agent_woken_too_often_in_a_window(make_controller: MakeController) -> None:
    ctl = make_controller()
    for i in range(20):
        assert brief(ctl.observe(handoff(i + 1, "A", "B", chain=f"c{i}", now=T0 + 3 * i * SECOND))) == [("wake", "B")]
    [over] = ctl.observe(handoff(21, "A", "B", chain="c20", now=T0 + 60 * SECOND))
    assert isinstance(over, Suppress) and over.reason is SuppressReason.BUDGET
    assert over.detail == f"B used 20 of 20 wakes in the window ending {T0 + 3600 * SECOND}"
    later = ctl.observe(handoff(22, "A", "B", chain="c21", now=T0 + 3600 * SECOND))
    assert brief(later) == [("wake", "B")]  # a new window opens


def test_budget_counts_per_agent(make_controller: MakeController, rule_dir: Path) -> None:
    set_constants(rule_dir, "wake_storm", budget=1)
    ctl = make_controller()
    assert brief(ctl.observe(handoff(1, "A", "B", chain="c1", now=T0))) == [("wake", "B")]
    assert brief(ctl.observe(handoff(2, "A", "C", chain="c2", now=T0 + 5 * SECOND))) == [("wake", "C")]
    assert brief(ctl.observe(handoff(3, "A", "B", chain="c3", now=T0 + 10 * SECOND))) == [("suppress", "B", "budget")]


def test_an_agent_is_never_woken_by_its_own_event(make_controller: MakeController) -> None:
    ctl = make_controller()
    assert ctl.observe(handoff(1, "A", "A")) == []


def test_allowed_wake_carries_the_chain_for_the_next_hop(make_controller: MakeController) -> None:
    ctl = make_controller()
    [wake] = ctl.observe(handoff(5, "A", "B", chain="c9", depth=1, now=T0 + 7, origin=T0))
    assert isinstance(wake, WakeTarget)
    assert (wake.agent, wake.cause, wake.depth, wake.chain, wake.origin_us, wake.source) == (
        "B", "handoff_target", 1, "c9", T0, "A")
    assert wake.idempotency_key == "ctl:w1:5:B"
    assert (wake.world, wake.position, wake.index, wake.key) == ("w1", 5, 0, "w1:5:0")


def test_allowing_a_wake_records_the_guards_facts(make_controller: MakeController) -> None:
    ctl = make_controller()
    step = ctl.observe_step(handoff(1, "A", "B", chain="c1", now=T0))
    ids = {f["id"]: f for f in step.changes.upserted}
    assert set(ids) == {"woken:c1:B", "cooldown:B", "budget:B"}
    assert ids["cooldown:B"]["until"] == T0 + 2 * SECOND
    assert (ids["cooldown:B"]["wake_at"], ids["cooldown:B"]["deferrals"], ids["cooldown:B"]["wake_key"]) == (
        T0, 0, "ctl:w1:1:B")
    assert ids["budget:B"]["used"] == 1
    assert step.changes.retracted == ()
    assert {f["id"] for f in ctl.facts()} == set(ids)  # the transient event and candidate are gone


def test_expired_controller_facts_are_retracted_lazily(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.observe(handoff(1, "A", "B", chain="c1", now=T0))
    step = ctl.observe_step(handoff(2, "A", "C", chain="c2", now=T0 + 3 * SECOND))
    assert "cooldown:B" in step.changes.retracted
    assert "cooldown:B" not in {f["id"] for f in ctl.facts()}
