"""MVP tests 4, 5 and 6 (seed 000 §103-117) end to end: workers, the controller on ``rules/`` and the real
PDP. Stale writes conflict, private memory stays private, and a candidate is not a shared fact."""

from __future__ import annotations

import threading

import pytest

from engine.errors import PolicyDenied
from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentDecision, ProposeMemory, RuleAgent, SetState, StoreMemory
from engine.protocol.worker import Worker
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import add_agent, book_of
from tests.mvp.support import (
    GOV,
    act,
    assert_every_wake_has_one_receipt,
    clock,
    controller_decisions,
    events_of,
    once,
    outcomes,
    runner_for,
    wakes_of,
)


def entry_of(view: WorldView, key: str) -> tuple[int, object]:
    entry = next((s for s in view.state if s.key == key), None)
    return (entry.version, entry.value) if entry else (0, None)


# -- MVP 4 ------------------------------------------------------------------------------------------------

def test_mvp04_a_stale_write_ends_in_a_conflict_receipt_and_overwrites_nothing(pworld: World) -> None:
    """MVP test 4 (stale state -> conflict detected): B is woken by a change to ``plan`` and decides from
    version 1. Meanwhile another worker runs A's wake and A writes version 2. B's write, still expecting
    version 1, is refused: B's wake ends in a ``conflict`` receipt and A's value stands. A's write wakes B
    again (it follows ``plan``); B re-reads and recomputes from version 2 (it never resends the stale
    write)."""
    add_agent(pworld, "a", ["state.write"])
    add_agent(pworld, "b", ["state.write"])
    pworld.subscribe("b", "plan")
    seen_by_b: list[int] = []

    def a_rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision:
        version, value = entry_of(view, "plan")
        assert isinstance(value, dict)
        return act(SetState(key="plan", expected_version=version, value={**value, "owner": "a", "steps": 5}))

    def b_rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision:
        version, value = entry_of(view, "plan")
        assert isinstance(value, dict)
        seen_by_b.append(version)
        if len(seen_by_b) == 1:  # while B decides (5 s), another worker (its own thread) runs A's wake to the end
            clock(pworld).advance(5)
            ran: list[object] = []

            def other_worker() -> None:
                pworld.enqueue_wake(GOV, "a", "revise the plan", "revise-a")
                ran.append(Worker(book_of(pworld), "worker-2", {"a": RuleAgent([a_rule])}).run_once(agent_id="a"))
            thread = threading.Thread(target=other_worker)
            thread.start()
            thread.join(60)
            assert ran and ran[0] is not None
        return act(SetState(key="plan", expected_version=version, value={**value, "reviewed_by": "b"}))
    runner = runner_for(pworld, {"a": RuleAgent([a_rule]), "b": RuleAgent([b_rule])})
    pworld.compare_and_set_state(GOV, "plan", 0, {"steps": 3})
    runner.run_until_quiet(max_rounds=20)

    assert seen_by_b == [1, 2]
    b_wakes = wakes_of(pworld, "b")
    assert outcomes(pworld, "b") == ["conflict", "acted"] and outcomes(pworld, "a") == ["acted"]
    stale = pworld.receipt_for_wake(b_wakes[0].wake_id, actor=GOV)
    assert stale.action_refs == [] and "version" in (stale.reason or "")
    writes = [(e.result["version"], e.actor_id, e.result["value"]) for e in events_of(pworld, "state.set")
              if e.subject_id == "plan"]
    assert writes == [(1, GOV, {"steps": 3}), (2, "a", {"steps": 5, "owner": "a"}),     # A's value stood,
                      (3, "b", {"steps": 5, "owner": "a", "reviewed_by": "b"})]          # B recomputed on it
    assert wakes_of(pworld, "b")[1].cause == "subscriber"
    trace = pworld.get_trace(b_wakes[0].wake_id, actor=GOV)
    assert (trace.outcome, trace.commits) == ("conflict", [])
    assert_every_wake_has_one_receipt(pworld)
    runner.close()


# -- MVP 5 ------------------------------------------------------------------------------------------------

def test_mvp05_private_memory_is_invisible_to_other_agents(pworld: World) -> None:
    """MVP test 5 (private memory invisible to others): Alice stores a private note and publishes a pointer to
    it in shared state. The controller wakes Bob (he follows that key). Bob's view does not contain the note,
    his trace never retrieved it, reading it is denied by the PDP, and acting on it (proposing it for
    review) is refused by the policy (a ``denied`` receipt saying so, naming no owner). Alice herself still sees it."""
    add_agent(pworld, "alice", ["state.write", "memory.write"])
    add_agent(pworld, "bob", ["state.write", "memory.write"])
    pworld.subscribe("bob", "alice-status")
    bob_saw: list[set[str]] = []
    alice_saw: list[set[str]] = []

    def alice_rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        alice_saw.append(view.memory_ids())
        mine = [m for m in view.working_memory if m.owner == "alice"]
        if not mine:
            return act(StoreMemory(content="the acquisition closes on Friday", epistemic_type="observation"))
        return act(SetState(key="alice-status", expected_version=0, value={"note": mine[0].memory_id}))

    def bob_rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        bob_saw.append(view.memory_ids())
        _, value = entry_of(view, "alice-status")
        assert isinstance(value, dict)
        return act(ProposeMemory(memory_id=value["note"]))
    runner = runner_for(pworld, {"alice": RuleAgent([alice_rule]), "bob": RuleAgent([bob_rule])})
    pworld.enqueue_wake(GOV, "alice", "note it", "alice-1")
    runner.run_until_quiet(max_rounds=20)
    pworld.enqueue_wake(GOV, "alice", "publish", "alice-2")
    runner.run_until_quiet(max_rounds=20)

    (note,) = [m for m in pworld.list_memory("alice") if m.owner == "alice"]
    assert (note.scope.value, note.status.value) == ("private", "private")
    assert alice_saw[1] == {note.memory_id}
    assert bob_saw == [set()]                                  # woken by the pointer, shown nothing private
    assert note.memory_id not in {m.memory_id for m in pworld.list_memory("bob")}
    with pytest.raises(PolicyDenied):
        pworld.get_memory("bob", note.memory_id)
    # refused by the PDP before the runtime's ownership check could speak (memory bob may not see tells him
    # nothing, not even its owner: docs/policy.md): a PolicyDenied, which the worker records as ``denied``
    assert outcomes(pworld, "bob") == ["denied"]
    (refusal,) = pworld.list_receipts(agent_id="bob", actor=GOV)
    assert (refusal.reason or "").startswith(f"'bob' may not propose memory '{note.memory_id}': denied by policy")
    assert "alice" not in (refusal.reason or "")
    (bob_wake,) = wakes_of(pworld, "bob")
    assert bob_wake.cause == "subscriber"
    assert f"memory:{note.memory_id}" not in pworld.get_trace(bob_wake.wake_id, actor=GOV).retrieved_refs
    assert pworld.get_memory("alice", note.memory_id).status.value == "private"  # still private, unproposed
    assert_every_wake_has_one_receipt(pworld)
    runner.close()


# -- MVP 6 ------------------------------------------------------------------------------------------------

def test_mvp06_a_candidate_memory_is_not_a_shared_fact_before_review(pworld: World) -> None:
    """MVP test 6 (candidate memory is not a stable shared fact before review): Alice stores an inference and
    proposes it. The controller's memory_review rule routes the candidate to the reviewer Rita (role
    ``reviewer``) and wakes her. Until Rita reviews and promotes it, the candidate is in nobody's shared
    facts: not Alice's, not Rita's (she sees it as working memory, to review), not Bob's (he does not see it
    at all). After promotion it is a shared fact in Bob's view."""
    add_agent(pworld, "alice", ["state.write", "memory.write"])
    add_agent(pworld, "bob", ["state.write"])
    add_agent(pworld, "rita", ["memory.review"])
    pworld.grant(GOV, "rita", role_id="reviewer")  # a privileged role: the governor grants it
    views: dict[str, list[WorldView]] = {"alice": [], "bob": [], "rita": []}

    def record(agent: Agent, view: WorldView, wake: Wake) -> None:
        views[agent.agent_id].append(view)

    def alice_draft(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        record(agent, view, wake)
        return act(StoreMemory(content="the API allows 100 requests/s", epistemic_type="inference"))

    def alice_propose(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        draft = next(m for m in view.working_memory if m.owner == "alice" and m.status.value == "private")
        return act(ProposeMemory(memory_id=draft.memory_id))

    def watch(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        record(agent, view, wake)
        return AgentDecision(decision="no_action", reason=f"looked ({wake.cause})")
    runner = runner_for(pworld, {"alice": RuleAgent([once(alice_draft), alice_propose]),
                                 "bob": RuleAgent([watch]), "rita": RuleAgent([watch])})
    pworld.enqueue_wake(GOV, "alice", "draft", "alice-draft")
    runner.run_until_quiet(max_rounds=20)
    pworld.enqueue_wake(GOV, "alice", "propose", "alice-propose")
    runner.run_until_quiet(max_rounds=20)
    (mem,) = [m for m in pworld.list_memory("alice") if m.owner == "alice"]
    pworld.enqueue_wake(GOV, "bob", "look", "bob-before")
    runner.run_until_quiet(max_rounds=20)

    routed = controller_decisions(pworld, "route_review")
    assert [(d["memory"], d["reviewer"], d["rule"]) for d in routed] == [
        (mem.memory_id, "rita", "memory_review/route_memory_candidate")]
    (rita_wake,) = wakes_of(pworld, "rita")
    assert rita_wake.cause == "memory_review"
    assert pworld.get_memory("alice", mem.memory_id).status.value == "candidate"
    (rita_view,) = views["rita"]
    assert mem.memory_id in {m.memory_id for m in rita_view.working_memory}
    for view in (*views["alice"], rita_view, *views["bob"]):
        assert mem.memory_id not in {m.memory_id for m in view.shared_facts}
    assert mem.memory_id not in views["bob"][0].memory_ids()

    pworld.review_memory("rita", mem.memory_id)      # the review itself (no worker effect exists for it)
    pworld.promote_memory("rita", mem.memory_id)
    clock(pworld).advance(5)
    pworld.enqueue_wake(GOV, "bob", "look again", "bob-after")
    runner.run_until_quiet(max_rounds=20)
    assert mem.memory_id in {m.memory_id for m in views["bob"][-1].shared_facts}
    assert outcomes(pworld, "rita") == ["no_action"] and outcomes(pworld, "bob") == ["no_action", "no_action"]
    assert outcomes(pworld, "alice") == ["acted", "acted"]
    assert_every_wake_has_one_receipt(pworld)
    runner.close()
