"""The fault harness's checkers (``tests/multihost/invariants.py``) pass a legal history and catch each kind of
violation on a doctored one: a step committed twice, by a stale generation, outside its lease, under an
unknown generation or none; a trigger lost or doubled, a wake without a receipt or with two, an effect applied
twice or by a wake that did not act."""

from __future__ import annotations

from tests.multihost.invariants import LeaseSpan, Step, record_lease, step_violations, steps_of, wake_violations

LEASES = {1: LeaseSpan(1, "a", 100, 200), 2: LeaseSpan(2, "b", 250, 400)}
STEPS = [Step(10, 10, 1, 110), Step(12, 12, 1, 190), Step(15, 15, 2, 260), Step(20, 20, 2, 390)]


def test_a_legal_step_history_passes() -> None:
    assert step_violations(STEPS, LEASES) == []


def test_a_step_committed_twice_is_caught() -> None:
    found = step_violations([*STEPS[:2], Step(13, 12, 1, 195), *STEPS[2:]], LEASES)
    assert any("committed 2 times" in v for v in found), found


def test_a_stale_generation_after_its_successor_is_caught() -> None:
    found = step_violations([*STEPS[:3], Step(17, 17, 1, 199), STEPS[3]], LEASES)
    assert any("stale generation 1" in v for v in found), found


def test_a_step_outside_its_lease_or_of_an_unknown_generation_is_caught() -> None:
    assert any("outside" in v for v in step_violations([Step(10, 10, 1, 201)], LEASES))
    assert any("outside" in v for v in step_violations([Step(10, 10, 2, 240)], LEASES))
    assert any("never seen" in v for v in step_violations([Step(10, 10, 3, 300)], LEASES))
    assert any("no generation" in v for v in step_violations([Step(10, 10, None, 150)], LEASES))


def test_the_lease_history_keeps_each_generations_latest_expiry() -> None:
    history: dict[int, LeaseSpan] = {}
    for expires in (200, 300, 250):
        record_lease(history, 1, "a", 100, expires)
    assert history == {1: LeaseSpan(1, "a", 100, 300)}


def test_steps_are_read_from_the_log_in_order() -> None:
    events = [{"seq": 5, "event_type": "controller.step", "payload": {"position": 4, "generation": 2},
               "created_at_us": 9},
              {"seq": 3, "event_type": "controller.step", "payload": {"position": 2}, "created_at_us": 8},
              {"seq": 4, "event_type": "state.set", "payload": {}, "created_at_us": 8}]
    assert steps_of(events) == [Step(3, 2, None, 8), Step(5, 4, 2, 9)]


CAUSES: dict[str, str | None] = {"w1": "t1", "w2": "t2"}
RECEIPTS = [("w1", "acted"), ("w2", "conflict")]


def test_a_legal_wake_history_passes() -> None:
    assert wake_violations(["t1", "t2"], CAUSES, RECEIPTS, ["w1"]) == []


def test_a_lost_or_doubled_trigger_is_caught() -> None:
    assert wake_violations(["t1", "t2", "t3"], CAUSES, RECEIPTS, ["w1"]) == ["trigger t3 caused 0 wakes"]
    doubled = wake_violations(["t1", "t2"], {**CAUSES, "w3": "t1"}, [*RECEIPTS, ("w3", "conflict")], ["w1"])
    assert doubled == ["trigger t1 caused 2 wakes"]


def test_a_missing_or_second_receipt_is_caught() -> None:
    assert wake_violations(["t1", "t2"], CAUSES, RECEIPTS[:1], ["w1"]) == ["wake w2 has 0 receipts"]
    twice = wake_violations(["t1", "t2"], CAUSES, [*RECEIPTS, ("w2", "acted")], ["w1"])
    assert "wake w2 has 2 receipts" in twice


def test_an_effect_applied_twice_or_without_acting_is_caught() -> None:
    assert wake_violations(["t1", "t2"], CAUSES, RECEIPTS, ["w1", "w1"]) == [
        "wake w1 (acted) has 2 effects applied"]
    assert wake_violations(["t1", "t2"], CAUSES, RECEIPTS, ["w1", "w2"]) == [
        "wake w2 (not acted) has 1 effects applied"]
    assert wake_violations(["t1", "t2"], CAUSES, RECEIPTS, []) == ["wake w1 (acted) has 0 effects applied"]
    assert wake_violations(["t1", "t2"], CAUSES, RECEIPTS, ["w1", "w9"]) == [
        "a receipt or effect of unknown wake w9"]
