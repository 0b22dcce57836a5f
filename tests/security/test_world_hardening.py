"""Attack findings on the World (session 5, items 8, 10, 11 and 5's last sentence), each decided by the real
PDP on the repository's policies:

- 8: a ``wake.enqueue`` holder cancelled another agent's wake (even one its target had claimed and was
  deciding) and was answered with that agent's receipt. Now the target and governors cancel, and the
  agent that enqueued a wake only while it is pending.
- 10: ``ack_wake`` stored the receipt's ``policy_epoch`` (and refs) the agent made up.
- 11: existence oracles (an unreadable object answered differently from a missing one).
- 5: ``events(limit=10**9)`` returned the whole log in one answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.errors import IllegalTransition, InvalidInput, NotFound, NotPermitted, PMWError, PolicyDenied
from engine.models.wakes import WakeStatus
from engine.world import World
from engine.world.list_limits import MAX_EVENTS, MAX_LISTED
from tests.conftest import add_agent

GOV = "gov"


@pytest.fixture
def wakes(pworld: World) -> World:
    add_agent(pworld, "alice")
    add_agent(pworld, "bob", ["wake.enqueue"])
    return pworld


def _claimed_wake_of_alice(world: World, key: str) -> str:
    world.enqueue_wake(GOV, "alice", "manual", key)
    wake = world.claim_wake("alice", agent_id="alice")
    assert wake is not None and wake.status is WakeStatus.CLAIMED
    return wake.wake_id


# ---- A (item 8): who may cancel a wake --------------------------------------------------------------------

def test_an_enqueue_holder_cannot_cancel_another_agents_leased_wake(wakes: World) -> None:
    wid = _claimed_wake_of_alice(wakes, "k-leased")  # the governor enqueued it
    with pytest.raises(NotPermitted):
        wakes.cancel_wake("bob", wid, "bob cancelled you")
    assert wakes.get_wake(wid, actor=GOV).status is WakeStatus.CLAIMED
    # alice's decision still lands: nobody took her wake from under her
    receipt = wakes.ack_wake("alice", wid, "no_action", reason="mine")
    assert receipt.agent_id == "alice" and receipt.reason == "mine"


def test_even_its_enqueuer_cannot_cancel_a_wake_once_its_target_leased_it(wakes: World) -> None:
    wakes.enqueue_wake("bob", "alice", "ping", "k-bob-leased")
    leased = wakes.claim_wake("alice", agent_id="alice")
    assert leased is not None
    with pytest.raises(PolicyDenied):
        wakes.cancel_wake("bob", leased.wake_id, "withdrawn too late")
    assert wakes.allowed_actions("bob", "wake", leased.wake_id).refused["cancel"] == "policy"
    assert wakes.get_wake(leased.wake_id, actor=GOV).status is WakeStatus.CLAIMED


def test_only_its_enqueuer_withdraws_a_pending_wake_of_another_agent(wakes: World) -> None:
    add_agent(wakes, "carol", ["wake.enqueue"])
    wid = wakes.enqueue_wake("bob", "alice", "ping", "k-bob").wake.wake_id
    with pytest.raises(NotPermitted):
        wakes.cancel_wake("carol", wid, "not mine to withdraw")
    assert wakes.allowed_actions("carol", "wake", wid).refused["cancel"] == "not_assignee"
    assert wakes.get_wake(wid, actor=GOV).status is WakeStatus.PENDING
    assert "cancel" in wakes.allowed_actions("bob", "wake", wid).allowed
    receipt = wakes.cancel_wake("bob", wid, "withdrawn")
    # the answer holds only what bob gave or knew: the wake, its target (bob named it), his reason
    assert (receipt.wake_id, receipt.agent_id, receipt.reason) == (wid, "alice", "withdrawn")
    assert (receipt.action_refs, receipt.artifact_refs, receipt.payload, receipt.task_id) == ([], [], {}, None)
    assert wakes.get_wake(wid, actor=GOV).status is WakeStatus.CANCELLED


def test_the_target_and_the_governor_cancel_and_read_what_they_are_answered(wakes: World) -> None:
    own = _claimed_wake_of_alice(wakes, "k-own")
    receipt = wakes.cancel_wake("alice", own, "not needed after all")
    assert receipt == wakes.get_receipt(receipt.receipt_id, actor="alice")
    assert wakes.get_wake(own, actor="alice").status is WakeStatus.CANCELLED
    other = _claimed_wake_of_alice(wakes, "k-gov")
    by_gov = wakes.cancel_wake(GOV, other, "governor stops it", outcome="cancelled")
    assert by_gov == wakes.get_receipt(by_gov.receipt_id, actor=GOV)
    with pytest.raises(IllegalTransition):
        wakes.cancel_wake(GOV, other, "twice")


# ---- B (item 10): what an ack may not make up -----------------------------------------------------------

def _claimed_own_wake(world: World, key: str) -> str:
    world.enqueue_wake(GOV, "bob", "manual", key)
    wake = world.claim_wake("bob", agent_id="bob")
    assert wake is not None
    return wake.wake_id


def test_an_ack_gets_the_epoch_it_is_decided_under_and_cannot_give_one(wakes: World) -> None:
    wid = _claimed_own_wake(wakes, "k-forge")
    with pytest.raises(InvalidInput) as refused:
        wakes.ack_wake("bob", wid, "act", outcome="acted", reason="did it", policy_epoch="p-forged")
    assert refused.value.field == "policy_epoch"
    assert wakes.get_wake(wid, actor="bob").status is WakeStatus.CLAIMED  # nothing written
    receipt = wakes.ack_wake("bob", wid, "act", outcome="acted", reason="did it")
    event = next(e for e in wakes.events(limit=1000, actor=GOV) if e.event_type == "wake.ack" and e.subject_id == wid)
    assert event.policy_epoch is not None and receipt.policy_epoch == event.policy_epoch
    assert wakes.get_receipt(receipt.receipt_id, actor="bob").policy_epoch == event.policy_epoch


def test_an_ack_cannot_claim_a_topology_version_the_world_has_not_reached(wakes: World) -> None:
    wid = _claimed_own_wake(wakes, "k-topo")
    with pytest.raises(InvalidInput) as refused:
        wakes.ack_wake("bob", wid, "no_action", topology_version=999)
    assert refused.value.field == "topology_version"
    assert wakes.ack_wake("bob", wid, "no_action", topology_version=0).topology_version == 0


# ---- C (item 11): an unreadable object is answered as a missing one ---------------------------------------

def test_supersede_with_another_agents_private_memory_is_answered_as_a_missing_one(pworld: World) -> None:
    add_agent(pworld, "alice", ["memory.write"])
    add_agent(pworld, "bob", ["memory.write"])
    secret = pworld.store_memory("alice", "alice-secret", "observation", scope="private").memory_id
    own = pworld.store_memory("bob", "bob own", "observation").memory_id
    missing = "mem_6619c5870000000000000000ff"
    answers = []
    for replacement in (secret, missing):
        with pytest.raises(PMWError) as refused:
            pworld.supersede_memory("bob", own, replacement)
        answers.append((type(refused.value), refused.value.code, str(refused.value).replace(replacement, "X")))
    assert answers[0] == answers[1] and answers[0][0] is NotFound



def test_acking_or_claiming_another_agents_delivery_is_answered_as_a_missing_one(pworld: World) -> None:
    add_agent(pworld, "alice", ["message.send"])
    add_agent(pworld, "bob")
    add_agent(pworld, "mallory")
    delivery = pworld.send_message("alice", "general", "agent", "for bob", recipient="bob").deliveries[0]
    missing = "dlv_6619c5870000000000000000ff"
    for call in (pworld.ack_message, pworld.claim_message):
        answers = []
        for ident in (delivery.delivery_id, missing):
            with pytest.raises(PMWError) as refused:
                call("mallory", ident)
            answers.append((type(refused.value), refused.value.code, str(refused.value).replace(ident, "X")))
        assert answers[0] == answers[1] and answers[0][0] is NotFound
    # allowed_actions answers as the calls do; bob, its recipient, still gets the lifecycle's answer
    assert pworld.allowed_actions("mallory", "message", delivery.delivery_id).refused["ack"] == "not_assignee"
    with pytest.raises(IllegalTransition):
        pworld.ack_message("bob", delivery.delivery_id)  # not claimed yet
    pworld.claim_message("bob", delivery.delivery_id)
    assert pworld.ack_message("bob", delivery.delivery_id).status.value == "acked"

# ---- D (item 5's last sentence): every list read's limit is bounded ---------------------------------------

LIMITED_READS: dict[str, tuple[int, Callable[[World, int], list[Any]]]] = {
    "events": (MAX_EVENTS, lambda w, n: w.events(limit=n, actor=GOV)),
    "list_tasks": (MAX_LISTED, lambda w, n: w.list_tasks(limit=n, actor=GOV)),
    "list_wakes": (MAX_LISTED, lambda w, n: w.list_wakes(limit=n, actor=GOV)),
    "list_receipts": (MAX_LISTED, lambda w, n: w.list_receipts(limit=n, actor=GOV)),
    "list_handoffs": (MAX_LISTED, lambda w, n: w.list_handoffs(limit=n, actor=GOV)),
    "list_artifacts": (MAX_LISTED, lambda w, n: w.list_artifacts(limit=n, actor=GOV)),
}


@pytest.mark.parametrize("read", sorted(LIMITED_READS))
def test_a_list_read_refuses_a_limit_past_its_bound_or_below_one(wakes: World, read: str) -> None:
    top, call = LIMITED_READS[read]
    for bad in (10**9, top + 1, 0, -1):
        with pytest.raises(InvalidInput) as refused:
            call(wakes, bad)
        assert refused.value.field == "limit"
    assert isinstance(call(wakes, top), list)


def test_events_pages_with_after_seq_within_the_bound(wakes: World) -> None:
    everything = wakes.events(limit=MAX_EVENTS, actor=GOV)
    first = wakes.events(limit=2, actor=GOV)
    rest = wakes.events(after_seq=first[-1].seq, limit=MAX_EVENTS, actor=GOV)
    assert [e.event_id for e in first + rest] == [e.event_id for e in everything] and len(first) == 2
