"""The controller gives the wakes it queues their layered-wake signals (issue 16 item 4, seed 001 §46):
rules/wake_signals.yaml weighs the event that caused each wake (importance from the cause and the change,
risk from a side-effect class, ...), the step writes ``payload.signals`` and ``payload.signal_reasons`` on
the wake, and the worker routes it by depth with the layer reached on its receipt; nobody sets signals by
hand. With the rules' ``layered_wake`` off (the shipped default) no wake carries signals: a full run each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.runloop import InProcessRunner
from engine.runloop.follower import wake_signals
from engine.world import World
from tests.conftest import add_agent, book_of
from tests.controller.support import copy_rules, set_constants
from tests.envelope.test_layered_wake import Counting


def play(world: World, rule_dir: Path, adapter: Counting) -> list[dict[str, Any]]:
    """ann changes ``plan`` (bo follows it), posts a note on it, then announces an S2 change of it, 5 s
    apart; the controller wakes bo for each and the worker runs him. bo's wakes, oldest first."""
    add_agent(world, "ann", ["state.write"])
    add_agent(world, "bo", ["state.write"])
    world.subscribe("bo", "plan")
    r = InProcessRunner(book_of(world), adapters={"bo": adapter}, rule_dir=rule_dir)
    r.start()
    try:
        world.compare_and_set_state("ann", "plan", 0, {"step": 1})
        r.run_until_quiet()
        world.clock.advance(5)  # type: ignore[attr-defined]
        world.append_event("ann", "note.posted", {"text": "lunch at noon"}, subject_kind="note", subject_id="plan")
        r.run_until_quiet()
        world.clock.advance(5)  # type: ignore[attr-defined]
        world.append_event("ann", "ops.change", {"side_effect": "S2", "what": "send the release mail"},
                           subject_kind="note", subject_id="plan")
        r.run_until_quiet()
    finally:
        r.close()
    read = book_of(world).store.read
    return [dict(w) for w in read.rows("wakes", {"target_agent": "bo"}, order_by=["created_at_us"])]


def receipt_of(world: World, wake_id: str) -> dict[str, Any]:
    (row,) = book_of(world).store.read.rows("receipts", {"wake_id": wake_id})
    return dict(row)


def test_controller_wakes_carry_signals_from_their_cause_and_are_routed_by_depth(pworld: World,
                                                                               tmp_path: Path) -> None:
    rules = copy_rules(tmp_path / "rules")
    set_constants(rules, "wake_signals", layered_wake=True)
    bo = Counting(worth=False)  # his cheap check finds nothing worth a full run
    change, note, risky = play(pworld, rules, bo)
    assert [w["cause"] for w in (change, note, risky)] == ["subscriber"] * 3
    signals = [w["payload"]["signals"] for w in (change, note, risky)]
    assert signals == [
        {"importance": 0.6, "uncertainty": 0.0, "risk": 0.0, "novelty": 0.0},
        {"importance": 0.2, "uncertainty": 0.0, "risk": 0.0, "novelty": 0.0},
        {"importance": 0.8, "uncertainty": 0.0, "risk": 0.9, "novelty": 0.0}]
    assert change["payload"]["signal_reasons"] == [
        "wake_signals/weigh_by_cause: importance from the wake's cause (importance 0.2)",
        "wake_signals/weigh_state_change: plan changed (importance 0.6)"]
    assert "wake_signals/weigh_side_effect_high: ops.change has side effect S2 (importance 0.8, risk 0.9)" in \
        risky["payload"]["signal_reasons"]
    assert [w["payload"]["trigger"] for w in (change, note, risky)] == [  # what a check is told
        {"type": "state.set", "subject_kind": "state", "subject_id": "plan"},
        {"type": "note.posted", "subject_kind": "note", "subject_id": "plan"},
        {"type": "ops.change", "subject_kind": "note", "subject_id": "plan"}]
    layers = [receipt_of(pworld, w["wake_id"]) for w in (change, note, risky)]
    assert [(r["outcome"], r["payload"]["wake_layer"]["depth"]) for r in layers] == [
        ("no_action", "check"), ("monitored", "monitor"), ("acted", "full")]
    assert [r["payload"]["wake_layer"].get("reached") for r in layers] == ["check", None, "full"]
    assert bo.checks == [change["wake_id"]] and bo.runs == [risky["wake_id"]]


def test_with_layered_wake_off_no_wake_carries_signals(pworld: World, tmp_path: Path) -> None:
    bo = Counting(worth=False)
    wakes = play(pworld, copy_rules(tmp_path / "rules"), bo)  # the shipped rules: layered_wake false
    assert len(wakes) == 3 and all("signals" not in w["payload"] and "trigger" not in w["payload"] for w in wakes)
    assert bo.checks == [] and bo.runs == [w["wake_id"] for w in wakes]  # a full run each, as before


def test_signals_take_the_highest_value_set_and_name_each_reason() -> None:
    from engine.controller.decisions import WeighWakes

    def weigh(rule: str, **kw: Any) -> WeighWakes:
        return WeighWakes(world="w", position=1, rule=rule, reason=rule, **kw)

    signals, reasons = wake_signals([weigh("a", importance=0.3, importance_by_cause={"task_owner": 0.8}),
                                     weigh("b", risk=0.9, importance=0.5), weigh("c")], "task_owner")
    assert signals == {"importance": 0.8, "uncertainty": 0.0, "risk": 0.9, "novelty": 0.0}
    assert reasons == ["a: a (importance 0.8)", "b: b (importance 0.5, risk 0.9)"]
    assert wake_signals([weigh("c")], "subscriber") == (None, None)
