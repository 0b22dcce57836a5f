"""Decision envelopes on the pull path, through the real PDP and gateway: each outcome decided by an external
agent (``ExternalAgents.decide``) has the receipt, ``payload.envelope`` and writes the same envelope has
through the run loop's ``EnvelopeWorker``; an envelope the runtime refuses is ``InvalidInput`` with nothing
recorded or written and the wake still leased (a corrected decide works); a retried decide replays; the
envelope's writes are still the agent's, decided by the PDP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.errors import InvalidInput, OperationConflict
from engine.models.approvals import ApprovalStatus
from engine.models.handoffs import HandoffStatus
from engine.models.receipts import Receipt
from engine.models.wakes import WakeStatus
from engine.protocol.adapters import AgentDecision
from engine.protocol.pull import ExternalAgents, pull_worker_id
from engine.protocol.worker import SimulatedCrash
from engine.runloop.envelope import DecisionEnvelope
from engine.runloop.worker import EnvelopeWorker
from engine.world import World
from tests.conftest import add_agent, book_of
from tests.envelope.support import DRAFT, PAYLOAD, Scripted

CAPS = ["memory.write", "state.write", "tool:publish", "wake.enqueue", "task.create", "handoff.create"]


@pytest.fixture
def team(pworld: World) -> World:
    add_agent(pworld, "inner", CAPS)  # run by the EnvelopeWorker
    add_agent(pworld, "outer", CAPS)  # external: pulls its own wakes
    add_agent(pworld, "plain", ["state.write"])  # external, no wake.enqueue: may not defer
    add_agent(pworld, "human", ["task.work"], role="reviewer")
    return pworld


def everything(world: World) -> dict[str, int]:
    return book_of(world).store.read.counts_and_versions()


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def wake(world: World, target: str, key: str, **payload: Any) -> str:
    return world.enqueue_wake("gov", target, "test", key, payload=payload).wake.wake_id


def through_worker(world: World, answer: dict[str, Any], **payload: Any) -> tuple[str, Receipt, dict[str, int]]:
    w = wake(world, "inner", "k-in", **payload)
    before = everything(world)
    (cycle,) = EnvelopeWorker(book_of(world), "worker-1", {"inner": Scripted(answer)}).run_until_idle()
    return w, cycle.receipt, delta(before, everything(world))


def through_pull(world: World, answer: dict[str, Any], agent: str = "outer",
                 **payload: Any) -> tuple[str, Receipt, dict[str, int]]:
    w = wake(world, agent, "k-out", **payload)
    before = everything(world)
    agents = ExternalAgents(book_of(world))
    pulled = agents.pull(agent)
    assert pulled is not None and pulled.wake.wake_id == w
    receipt = agents.decide(agent, w, json.loads(json.dumps(answer)))  # as a transport receives it
    return w, receipt, delta(before, everything(world))


def account(receipt: Receipt, wake_id: str, agent: str) -> Any:
    """The receipt's ``payload.envelope`` with the wake's and agent's ids made generic and the ids written
    replaced by how many of each role were written (they are new ids on each path)."""
    env = dict(receipt.payload["envelope"])
    written = {role: len(ids) for role, ids in env.pop("written", {}).items()}
    text = json.dumps(env, sort_keys=True).replace(wake_id, "<wake>").replace(f'"{agent}"', '"<agent>"')
    return json.loads(text), written


def same(world: World, answer: dict[str, Any], **payload: Any) -> tuple[tuple[str, Receipt], tuple[str, Receipt]]:
    """``answer`` through the worker (agent ``inner``) and the pull path (``outer``): the same receipt outcome,
    decision, reason, envelope account and writes (row counts and version sums of every table)."""
    w_in, inside, wrote_in = through_worker(world, answer, **payload)
    w_out, outside, wrote_out = through_pull(world, answer, **payload)
    assert (outside.outcome, outside.decision, outside.reason) == (inside.outcome, inside.decision, inside.reason)
    assert account(outside, w_out, "outer") == account(inside, w_in, "inner")
    assert len(outside.action_refs) == len(inside.action_refs)
    assert (outside.next_wake is None) == (inside.next_wake is None)
    assert set(outside.payload) == set(inside.payload)
    assert wrote_out == wrote_in
    recorded = book_of(world).recorded_decision(w_out)
    assert recorded is not None and recorded.decision == DecisionEnvelope.model_validate(answer).recorded()
    assert recorded.decision == book_of(world).recorded_decision(w_in).decision  # type: ignore[union-attr]
    return (w_in, inside), (w_out, outside)


def test_draft_through_decide_requests_the_approval_as_the_worker_does(team: World) -> None:
    (_, inside), (_, outside) = same(team, DRAFT)
    assert outside.outcome.value == "drafted"
    for r, agent in ((inside, "inner"), (outside, "outer")):
        (approval_id,) = r.payload["envelope"]["written"]["approval"]
        (memory_id,) = r.payload["envelope"]["written"]["draft"]
        approval = team.get_approval(approval_id, actor="gov")
        assert (approval.status, approval.object_id, approval.requested_by) == (ApprovalStatus.PENDING, "publish",
                                                                                agent)
        assert team.get_memory(agent, memory_id).content == "draft: release 1.2 notes"
    assert not [e for e in team.events(limit=1000, actor="gov") if e.event_type == "capability.invoked"]


def test_defer_through_decide_queues_the_continuation_wake_at_not_before(team: World) -> None:
    until = team.clock.now_us() + 60_000_000
    answer = {"outcome": "defer", "defer": {"reason": "the build is still running", "not_before_us": until}}
    (_, inside), (w_out, outside) = same(team, answer, task_id="t-build")
    assert outside.outcome.value == "deferred" and outside.payload["envelope"]["defer"]["until_us"] == until
    for r, agent in ((inside, "inner"), (outside, "outer")):
        assert r.next_wake is not None
        later = team.get_wake(r.next_wake, actor="gov")
        assert (later.status, later.not_before_us, later.target_agent) == (WakeStatus.PENDING, until, agent)
        assert later.payload["task_id"] == "t-build" and later.payload["deferred"]["reason"] == "agent"
    assert team.get_wake(outside.next_wake, actor="gov").payload["deferred"]["from_wake"] == w_out  # type: ignore[arg-type]


@pytest.mark.parametrize("target", [{"to_agent": "human"}, {"to_role": "reviewer"}])
def test_escalate_through_decide_hands_off_with_the_packet(team: World, target: dict[str, str]) -> None:
    answer = {"outcome": "escalate", "reason": "over my authority", "escalate": {
        **target, "goal": "decide whether 1.2 ships", "evidence_refs": ["state:k"], "constraints": {"deadline": "fri"}}}
    (w_in, inside), (w_out, outside) = same(team, answer)
    assert (outside.outcome.value, outside.decision.value) == ("escalated", "handoff")
    for (w, r, agent) in ((w_in, inside, "inner"), (w_out, outside, "outer")):
        (handoff_id,) = r.payload["envelope"]["written"]["handoff"]
        h = team.get_handoff(handoff_id, actor="gov")
        assert (h.target_agent, h.source_agent, h.status, h.task_id) == ("human", agent, HandoffStatus.PENDING,
                                                                         f"esc-{w}")
        assert h.constraints["escalation"]["from_wake"] == w and h.constraints["deadline"] == "fri"


@pytest.mark.parametrize("answer", [
    {"outcome": "refuse", "reason": "this would leak the customer list"},
    {"outcome": "idle", "reason": "nothing new"},
    {"outcome": "cancel", "reason": "the task was withdrawn"},
    {"outcome": "execute", "recovery": "set k back", "actions": [
        {"effect": "compare_and_set_state", "key": "k", "expected_version": 0, "value": 1},
        {"effect": "invoke", "kind": "tool", "ident": "publish", "side_effect": "S2", "payload": PAYLOAD}]},
])
def test_refuse_idle_cancel_and_execute_through_decide_are_the_worker_s(team: World, answer: dict[str, Any]) -> None:
    if answer["outcome"] == "execute":  # each path writes its own key
        w_in, inside, wrote_in = through_worker(team, answer)
        out_answer = json.loads(json.dumps(answer).replace('"key": "k"', '"key": "k2"'))
        w_out, outside, wrote_out = through_pull(team, out_answer)
        assert (outside.outcome, outside.payload["envelope"]["evidence"]) == (inside.outcome, "E2")
        assert account(outside, w_out, "outer") == account(inside, w_in, "inner")
        assert wrote_out == wrote_in and team.get_state("k2", actor="gov").value == 1
        return
    (_, inside), (_, outside) = same(team, answer)
    assert outside.outcome.value == {"refuse": "refused", "idle": "idle", "cancel": "cancelled"}[answer["outcome"]]
    assert outside.payload["envelope"]["outcome"] == answer["outcome"]


def test_an_envelope_s_writes_are_the_agent_s_decided_by_the_pdp(team: World) -> None:
    """plain may not enqueue wakes: its deferral is denied on the pull path as in the worker, nothing queued."""
    w, receipt, _ = through_pull(team, {"outcome": "defer", "defer": {"reason": "later", "delay_s": 5}}, agent="plain")
    assert receipt.outcome.value == "denied" and receipt.next_wake is None
    assert [x.wake_id for x in team.list_wakes(target_agent="plain", actor="gov")] == [w]
    assert receipt.payload["envelope"]["outcome"] == "defer"


@pytest.mark.parametrize("answer", [
    {"outcome": "defer", "defer": {"reason": "past", "not_before_us": 1}},          # not in the future
    {k: v for k, v in DRAFT.items() if k != "approval"},                            # a draft without approval
    {"outcome": "execute", "approval_state": "attached", "actions": [               # declared state is wrong
        {"effect": "compare_and_set_state", "key": "k", "expected_version": 0, "value": 1}]},
    {"outcome": "escalate", "escalate": {"to_role": "nobody-holds-it", "goal": "g"}},  # nobody holds the role
    {"outcome": "execute", "actions": [{"effect": "begin_action", "action": "no-such-contract"}]},
    {"outcome": "refuse"},                                                          # a refusal gives its reason
    {"outcome": "idle", "actions": [{"effect": "compare_and_set_state", "key": "k", "expected_version": 0,
                                     "value": 1}]},                                 # idle takes no actions
    {"outcome": "defer", "reads": ["never-shown"], "defer": {"reason": "r", "delay_s": 5}},  # a key not shown
    {"outcome": "teleport"},
])
def test_a_refused_envelope_is_invalid_input_with_nothing_recorded_and_the_wake_still_leased(
        team: World, answer: dict[str, Any]) -> None:
    w = wake(team, "outer", "k-out")
    agents = ExternalAgents(book_of(team))
    assert agents.pull("outer") is not None
    team.clock.advance(10)  # type: ignore[attr-defined]
    before = everything(team)
    with pytest.raises(InvalidInput) as refused:
        agents.decide("outer", w, answer)
    assert refused.value.field.startswith("decision")
    assert everything(team) == before
    assert book_of(team).recorded_decision(w) is None
    leased = team.get_wake(w, actor="gov")
    assert (leased.status, leased.lease_owner) == (WakeStatus.CLAIMED, pull_worker_id("outer"))
    fixed = agents.decide("outer", w, {"outcome": "idle", "reason": "fixed"})  # the agent decides again
    assert fixed.outcome.value == "idle" and fixed.payload["envelope"]["outcome"] == "idle"


def test_a_retried_envelope_decide_replays_and_writes_nothing_twice(team: World) -> None:
    w = wake(team, "outer", "k-out")
    agents = ExternalAgents(book_of(team))
    assert agents.pull("outer") is not None
    agents.protocol("outer").crash_before_ack = 1  # the server dies after the writes, before the ack
    with pytest.raises(SimulatedCrash):
        agents.decide("outer", w, DRAFT)
    receipt = agents.decide("outer", w, DecisionEnvelope.model_validate(DRAFT))  # the agent retries
    assert receipt.outcome.value == "drafted"
    before = everything(team)
    assert agents.decide("outer", w, DRAFT) == receipt  # the response was lost: asked again
    with pytest.raises(OperationConflict):
        agents.decide("outer", w, {"outcome": "idle"})
    with pytest.raises(OperationConflict):
        agents.decide("outer", w, AgentDecision(decision="no_action"))
    assert everything(team) == before
    assert [r.receipt_id for r in team.list_receipts(agent_id="outer", actor="gov")] == [receipt.receipt_id]
    assert before["approvals"] == 1
    assert len(receipt.payload["envelope"]["written"]["approval"]) == 1


def test_a_decided_envelope_whose_lease_ran_out_is_finished_by_the_next_pull_as_decided(team: World) -> None:
    first = wake(team, "outer", "k-1")
    agents = ExternalAgents(book_of(team))
    assert agents.pull("outer", lease_seconds=5) is not None
    agents.protocol("outer").crash_before_ack = 1
    answer = {"outcome": "defer", "defer": {"reason": "later", "delay_s": 3600}}
    with pytest.raises(SimulatedCrash):
        agents.decide("outer", first, answer)
    team.clock.advance(6)  # type: ignore[attr-defined]
    assert agents.pull("outer") is None  # finishes the first as recorded; its continuation is not due yet
    done = team.receipt_for_wake(first, actor="gov")
    assert done.outcome.value == "deferred" and done.next_wake is not None
    assert done.payload["envelope"]["written"]["next_wake"] == [done.next_wake]
    assert agents.decide("outer", first, answer) == done  # the agent's late retry: the one receipt
    assert {x.wake_id for x in team.list_wakes(target_agent="outer", actor="gov")} == {first, done.next_wake}


def test_today_s_decision_on_the_pull_path_is_recorded_and_answered_as_before(team: World) -> None:
    old = AgentDecision.model_validate({"decision": "act", "reason": "as ever", "effects": [
        {"effect": "compare_and_set_state", "key": "k", "expected_version": 0, "value": 1}]})
    w, receipt, _ = through_pull(team, old.model_dump(mode="json"))
    assert (receipt.outcome.value, receipt.decision.value, receipt.reason) == ("acted", "act", "as ever")
    assert "envelope" not in receipt.payload
    recorded = book_of(team).recorded_decision(w)
    assert recorded is not None and recorded.decision == old.model_dump(mode="json")
    assert set(recorded.decision) == {"decision", "effects", "reason"}
