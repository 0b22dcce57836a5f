"""Each outcome of the decision envelope end to end through the worker, on the real PDP: its writes, its
receipt (outcome, evidence level, approval state) and, where a part is denied, nothing of it committed."""

from __future__ import annotations

from typing import Any

import pytest

from engine.models.approvals import ApprovalStatus
from engine.models.handoffs import HandoffStatus
from engine.models.wakes import WakeStatus
from engine.protocol.adapters import AgentDecision, HumanProxy, SetState
from engine.runloop.envelope import MAX_DEFERRALS
from engine.world import World
from tests.conftest import add_agent, book_of
from tests.envelope.support import ACK_ONLY, DRAFT, PAYLOAD, Scripted, changed_tables, counts, runner, wake


@pytest.fixture
def team(pworld: World) -> World:
    add_agent(pworld, "writer", ["memory.write", "state.write", "tool:publish", "wake.enqueue", "task.create",
                              "handoff.create"])
    add_agent(pworld, "plain", ["state.write"])  # no wake.enqueue: may not defer
    return pworld


def _receipt(world: World, wake_id: str) -> Any:
    return world.receipt_for_wake(wake_id, actor="gov")


def test_today_s_decision_is_carried_out_and_recorded_as_before(team: World) -> None:
    old = AgentDecision(decision="act", reason="as ever", effects=[SetState(key="k", expected_version=0, value=1)])
    r = runner(team, {"writer": Scripted(old.model_dump(mode="json"))})
    w = wake(team, "writer", "k1")
    r.run_until_quiet(max_rounds=5)
    receipt = _receipt(team, w)
    assert (receipt.outcome.value, receipt.decision.value, receipt.reason) == ("acted", "act", "as ever")
    assert "envelope" not in receipt.payload and "wake_layer" not in receipt.payload
    recorded = book_of(team).recorded_decision(w)
    assert recorded is not None and set(recorded.decision) == {"decision", "effects", "reason"}
    assert team.get_state("k", actor="gov").value == 1


def test_execute_lists_side_effect_classes_evidence_and_approval_state(team: World) -> None:
    r = runner(team, {"writer": Scripted({"outcome": "execute", "recovery": "set k back to 0", "actions": [
        {"effect": "compare_and_set_state", "key": "k", "expected_version": 0, "value": 1},
        {"effect": "invoke", "kind": "tool", "ident": "publish", "side_effect": "S2", "payload": PAYLOAD}]})})
    w = wake(team, "writer", "k1")
    r.run_until_quiet(max_rounds=5)
    receipt = _receipt(team, w)
    env = receipt.payload["envelope"]
    assert (receipt.outcome.value, receipt.decision.value) == ("acted", "act")
    assert [(a["effect"], a["side_effect"]) for a in env["actions"]] == [("compare_and_set_state", "S1"),
                                                                         ("invoke", "S2")]
    assert (env["outcome"], env["approval_state"], env["evidence"]) == ("execute", "not_required", "E2")
    assert env["recovery"]["declared"] == "set k back to 0"


def test_draft_then_approval_then_execute(team: World) -> None:
    """draft: a memory and the approval request, no side effect; a governor approves; the next wake spends
    the approval on exactly the drafted action (evidence E3)."""
    agent = Scripted(DRAFT, {"outcome": "execute", "approval_state": "attached", "actions": [
        {"effect": "invoke", "kind": "tool", "ident": "publish", "side_effect": "S3", "payload": PAYLOAD,
         "approval_id": "__approval__"}]})
    r = runner(team, {"writer": agent})
    first = wake(team, "writer", "k1")
    r.run_until_quiet(max_rounds=5)
    drafted = _receipt(team, first)
    env = drafted.payload["envelope"]
    assert (drafted.outcome.value, drafted.decision.value) == ("drafted", "request")
    assert (env["approval_state"], env["evidence"]) == ("requested", "E2")
    (approval_id,) = env["written"]["approval"]
    (memory_id,) = env["written"]["draft"]
    assert set(drafted.action_refs) == {approval_id, memory_id}
    assert team.get_approval(approval_id, actor="gov").status is ApprovalStatus.PENDING
    assert team.get_memory("writer", memory_id).content == "draft: release 1.2 notes"
    assert not [e for e in team.events(limit=1000, actor="gov") if e.event_type == "capability.invoked"]

    team.approve("gov", approval_id, ttl_seconds=600)
    agent.answers[1]["actions"][0]["approval_id"] = approval_id
    second = wake(team, "writer", "k2")
    r.run_until_quiet(max_rounds=5)
    executed = _receipt(team, second)
    assert executed.outcome.value == "acted"
    assert (executed.payload["envelope"]["approval_state"], executed.payload["envelope"]["evidence"]) == (
        "attached", "E3")
    assert team.get_approval(approval_id, actor="gov").status is ApprovalStatus.CONSUMED


def test_a_draft_whose_approval_request_is_denied_writes_no_draft(team: World) -> None:
    """The agent lost memory.write: the draft memory is denied, so nothing of the draft is committed (not the
    approval request either); the receipt is denied and says what was asked."""
    add_agent(team, "quiet", ["memory.write"])
    r = runner(team, {"quiet": Scripted({**DRAFT, "approval": {"kind": "tool", "object_id": "publish",
                                                                "payload": PAYLOAD}})})
    w = wake(team, "quiet", "k1")
    book_of(team).world.grant("gov", "quiet", capabilities=[])  # memory.write gone: the draft memory is denied
    granted = counts(team)
    r.run_until_quiet(max_rounds=5)
    receipt = _receipt(team, w)
    assert receipt.outcome.value == "denied" and receipt.payload["envelope"]["outcome"] == "draft"
    assert changed_tables(granted, counts(team)) <= ACK_ONLY  # no memory, no approval
    assert [v["effect"] for v in receipt.payload["effects"]] == ["store_memory", "request_approval"]
    assert receipt.payload["effects"][0]["verdict"] == "denied"
    assert receipt.payload["effects"][1]["verdict"] in ("not_committed", "denied")


def test_defer_requeues_and_runs_again_after_not_before(team: World) -> None:
    agent = Scripted({"outcome": "defer", "defer": {"reason": "the build is still running", "delay_s": 60}},
                     {"decision": "act", "effects": [{"effect": "compare_and_set_state", "key": "done",
                                                      "expected_version": 0, "value": True}]})
    r = runner(team, {"writer": agent})
    w = wake(team, "writer", "k1", task_id="t-build")
    start = team.clock.now_us()
    r.run_until_quiet(max_rounds=5)
    deferred = _receipt(team, w)
    assert (deferred.outcome.value, deferred.decision.value) == ("deferred", "no_action")
    assert deferred.next_wake is not None and deferred.payload["envelope"]["defer"]["until_us"] == start + 60_000_000
    later = team.get_wake(deferred.next_wake, actor="gov")
    assert (later.status, later.not_before_us, later.target_agent) == (WakeStatus.PENDING, start + 60_000_000,
                                                                       "writer")
    assert later.payload["task_id"] == "t-build" and later.payload["deferred"]["detail"] == "the build is still running"
    assert len(agent.seen) == 1  # not run before not_before
    r.run_until_quiet(max_rounds=5, advance_clock=True)
    assert len(agent.seen) == 2 and agent.seen[1].wake_id == later.wake_id
    final = _receipt(team, later.wake_id)
    assert final.outcome.value == "acted" and final.payload["deferred"]["reason"] == "agent"
    assert team.get_state("done", actor="gov").value is True
    assert team.clock.now_us() >= start + 60_000_000


def test_defer_without_wake_enqueue_is_denied_and_queues_nothing(team: World) -> None:
    r = runner(team, {"plain": Scripted({"outcome": "defer", "defer": {"reason": "later", "delay_s": 5}})})
    w = wake(team, "plain", "k1")
    r.run_until_quiet(max_rounds=5)
    receipt = _receipt(team, w)
    assert receipt.outcome.value == "denied" and receipt.next_wake is None
    assert [x.wake_id for x in team.list_wakes(actor="gov")] == [w]


def test_deferrals_are_bounded(team: World) -> None:
    agent = Scripted({"outcome": "defer", "defer": {"reason": "not yet", "delay_s": 1}})
    r = runner(team, {"writer": agent})
    wake(team, "writer", "k1")
    stats = r.run_until_quiet(max_rounds=200, advance_clock=True)
    assert stats.outcomes["deferred"] == MAX_DEFERRALS and stats.outcomes["failed"] == 1
    last = max(team.list_receipts(actor="gov"), key=lambda x: x.created_at_us)
    assert last.outcome.value == "failed" and "deferred 20 times" in (last.reason or "")


@pytest.mark.parametrize("target", [{"to_agent": "human"}, {"to_role": "reviewer"}])
def test_escalate_hands_off_to_a_human_with_the_packet_and_the_human_gets_a_receipt(
        team: World, target: dict[str, str]) -> None:
    add_agent(team, "human", ["task.work"], role="reviewer")
    human = HumanProxy(lambda agent_id: None)  # the human has not decided yet: its receipt says it was asked
    r = runner(team, {"writer": Scripted({"outcome": "escalate", "reason": "over my authority", "escalate": {
        **target, "goal": "decide whether 1.2 ships", "evidence_refs": ["state:k"],
        "constraints": {"deadline": "friday"}}}), "human": human}, controller=True)
    w = wake(team, "writer", "k1")
    r.run_until_quiet(max_rounds=20)
    receipt = _receipt(team, w)
    env = receipt.payload["envelope"]
    assert (receipt.outcome.value, receipt.decision.value, env["evidence"]) == ("escalated", "handoff", "E2")
    (handoff_id,) = env["written"]["handoff"]
    h = team.get_handoff(handoff_id, actor="gov")
    assert (h.target_agent, h.source_agent, h.status, h.goal) == ("human", "writer", HandoffStatus.PENDING,
                                                                  "decide whether 1.2 ships")
    assert h.evidence_refs == ["state:k"] and h.constraints["deadline"] == "friday"
    assert h.constraints["escalation"]["from_wake"] == w and h.task_id == f"esc-{w}"
    human_receipts = team.list_receipts(agent_id="human", actor="gov")
    assert [x.decision.value for x in human_receipts] == ["request"]


@pytest.mark.parametrize(("answer", "outcome"), [
    ({"outcome": "refuse", "reason": "this would leak the customer list"}, "refused"),
    ({"outcome": "idle", "reason": "nothing new"}, "idle"),
    ({"outcome": "cancel", "reason": "the task was withdrawn"}, "cancelled"),
])
def test_refuse_idle_and_cancel_write_only_their_receipt(team: World, answer: dict[str, Any], outcome: str) -> None:
    r = runner(team, {"writer": Scripted(answer)})
    w = wake(team, "writer", "k1")
    before = counts(team)
    r.run_until_quiet(max_rounds=5)
    receipt = _receipt(team, w)
    assert (receipt.outcome.value, receipt.reason, receipt.decision.value) == (outcome, answer["reason"], "no_action")
    assert receipt.payload["envelope"]["outcome"] == answer["outcome"]
    assert changed_tables(before, counts(team)) <= ACK_ONLY


@pytest.mark.parametrize("answer", [
    {"outcome": "refuse"},                                                     # a refusal gives its reason
    {"outcome": "idle", "actions": [{"effect": "compare_and_set_state", "key": "k", "expected_version": 0,
                                     "value": 1}]},                            # idle takes no actions
    {"outcome": "execute", "approval_state": "attached", "actions": [          # declared state is wrong
        {"effect": "compare_and_set_state", "key": "k", "expected_version": 0, "value": 1}]},
    {"outcome": "defer", "defer": {"reason": "past", "not_before_us": 1}},     # not in the future
    {"outcome": "escalate", "escalate": {"to_role": "nobody-holds-it", "goal": "g"}},
    {"outcome": "teleport"},
])
def test_an_invalid_envelope_is_a_failed_receipt_and_nothing_else(team: World, answer: dict[str, Any]) -> None:
    r = runner(team, {"writer": Scripted(answer)})
    w = wake(team, "writer", "k1")
    team.clock.advance(10)  # type: ignore[attr-defined]
    before = counts(team)
    r.run_until_quiet(max_rounds=5)
    receipt = _receipt(team, w)
    assert receipt.outcome.value == "failed"
    assert (receipt.reason or "").startswith(("not a valid decision: ", "envelope refused: "))
    assert changed_tables(before, counts(team)) <= ACK_ONLY
