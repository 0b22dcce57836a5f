"""Conformance: the wake queue (idempotency, due time, priority, leases) and receipts."""

from __future__ import annotations

import random

import pytest

from engine.errors import IllegalTransition, LeaseHeld, NotFound
from engine.models.receipts import Decision, Outcome
from engine.models.wakes import WakeStatus
from engine.sources import ManualClock
from engine.world import World


@pytest.fixture
def team(world: World) -> World:
    for name in ("a", "b"):
        world.register_agent(name, name.upper(), "worker", f"t-{name}")
    return world


def test_duplicate_wake_key_creates_one_wake(team: World) -> None:
    """MVP test 3: the same idempotency key delivered 10 times gives exactly one wake."""
    results = [team.enqueue_wake("ctl", "a", "task.created", "evt-1:a") for _ in range(10)]
    assert [r.created for r in results] == [True] + [False] * 9
    assert {r.wake.wake_id for r in results} == {results[0].wake.wake_id}
    assert len(team.list_wakes()) == 1
    assert sum(e.event_type == "wake.issued" for e in team.events(limit=1000)) == 1


def test_no_action_wake_has_a_receipt(team: World) -> None:
    """MVP test 15: a wake whose agent decides nothing still ends in a NO_ACTION receipt."""
    team.enqueue_wake("ctl", "a", "ping", "k1")
    wake = team.claim_wake("worker-1")
    assert wake is not None
    receipt = team.ack_wake("worker-1", wake.wake_id, "no_action")
    assert (receipt.decision, receipt.outcome) == (Decision.NO_ACTION, Outcome.NO_ACTION)
    assert team.receipt_for_wake(wake.wake_id) == receipt
    assert team.get_wake(wake.wake_id).status is WakeStatus.ACKED


def test_a_wake_gets_exactly_one_receipt(team: World) -> None:
    team.enqueue_wake("ctl", "a", "ping", "k1")
    wake = team.claim_wake("worker-1")
    assert wake is not None
    team.ack_wake("worker-1", wake.wake_id, "act")
    with pytest.raises(IllegalTransition):
        team.ack_wake("worker-1", wake.wake_id, "act")
    with pytest.raises(IllegalTransition):
        team.cancel_wake("ctl", wake.wake_id, "late")
    assert len(team.list_receipts()) == 1


def test_not_before_and_priority_order_claims(team: World, clock: ManualClock) -> None:
    team.enqueue_wake("ctl", "a", "later", "k-later", not_before_us=clock.now_us() + 10_000_000)
    team.enqueue_wake("ctl", "a", "low", "k-low", priority=1)
    team.enqueue_wake("ctl", "b", "high", "k-high", priority=5)
    first, second = team.claim_wake("w"), team.claim_wake("w")
    assert first is not None and second is not None
    assert (first.cause, second.cause) == ("high", "low")
    assert team.claim_wake("w") is None
    clock.advance(11)
    later = team.claim_wake("w")
    assert later is not None and later.cause == "later"


def test_an_expired_lease_is_claimable_again(team: World, clock: ManualClock) -> None:
    team.enqueue_wake("ctl", "a", "work", "k1")
    first = team.claim_wake("w1", lease_seconds=5)
    assert first is not None and team.claim_wake("w2") is None
    with pytest.raises(LeaseHeld):
        team.ack_wake("w2", first.wake_id, "act")
    clock.advance(6)
    again = team.claim_wake("w2")
    assert again is not None and (again.wake_id, again.lease_owner, again.attempts) == (first.wake_id, "w2", 2)
    with pytest.raises(LeaseHeld):
        team.ack_wake("w1", first.wake_id, "act")
    assert team.ack_wake("w2", first.wake_id, "act").outcome is Outcome.ACTED


def test_claim_for_one_agent_only(team: World) -> None:
    team.enqueue_wake("ctl", "a", "for a", "ka")
    team.enqueue_wake("ctl", "b", "for b", "kb")
    wake = team.claim_wake("w", agent_id="b")
    assert wake is not None and wake.target_agent == "b"


def test_cancelled_wake_gets_a_suppressed_receipt_with_reason(team: World) -> None:
    wake = team.enqueue_wake("ctl", "a", "storm", "k1").wake
    receipt = team.cancel_wake("ctl", wake.wake_id, "cascade depth 3 > 2")
    assert (receipt.outcome, receipt.reason) == (Outcome.SUPPRESSED, "cascade depth 3 > 2")
    assert team.claim_wake("w") is None


def test_wake_for_an_unknown_agent_is_refused(team: World) -> None:
    with pytest.raises(NotFound):
        team.enqueue_wake("ctl", "ghost", "x", "k")
    assert team.list_wakes() == []


@pytest.mark.parametrize("seed", range(3))
def test_claims_take_wakes_in_claim_order_among_pending_and_expired_leases(team: World, clock: ManualClock,
                                                                           seed: int) -> None:
    """The claim (one statement: the most urgent pending-and-due wake and the most urgent expired lease, the
    more urgent of the two) takes wakes in exactly (priority desc, not_before, wake id) order among the due
    pending wakes and the claimed ones whose lease ran out, for the agents asked; wakes not yet due, leases
    still running and other agents' wakes are never taken. Seeded mixes, on every backend."""
    rng = random.Random(f"claim-order/{seed}")
    now = clock.now_us()
    for n in range(40):
        team.enqueue_wake("ctl", rng.choice("ab"), f"c{n}", f"k{seed}-{n}", priority=rng.randint(-2, 2),
                          not_before_us=now + rng.choice((0, 0, -5, 3_000_000, 90_000_000)))
    leased = [w for w in (team.claim_wake(f"early-{n}", lease_seconds=rng.choice((1, 60))) for n in range(10)) if w]
    clock.advance(5)  # the 1-second leases ran out, the 60-second ones run; wakes due within 3 s are due now
    now = clock.now_us()
    expected = sorted((w for w in team.list_wakes() if w.target_agent == "a" and (
        (w.status is WakeStatus.PENDING and w.not_before_us <= now)
        or (w.status is WakeStatus.CLAIMED and (w.lease_until_us or 0) < now))),
        key=lambda w: (-w.priority, w.not_before_us, w.wake_id))
    assert leased and expected
    taken = [w.wake_id for w in iter(lambda: team.claim_wake("w", agent_ids=["a"]), None)]
    assert taken == [w.wake_id for w in expected]
    assert all(w.target_agent != "a" or w.status is not WakeStatus.PENDING or w.not_before_us > now
               for w in team.list_wakes())
