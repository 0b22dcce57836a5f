"""Decision events (issue 9, "The controller trusts event types"): a party to a conflict holding only
state.write cannot append ``conflict.resolved`` (the policy decides the event type), and if such an event
reaches the log anyway (a lax policy), the controller's inputs ignore it: the conflict room stays open
until a principal allowed to decide resolves it."""

from __future__ import annotations

from typing import Any

import pytest

from engine.controller import Controller
from engine.controller.decisions import TopologyOp, TopologyProposal
from engine.controller.facts import decision_refusal
from engine.errors import InvalidInput, PolicyDenied
from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentDecision, AppendEvent, Discuss, RuleAgent
from engine.runloop.world_facts import fact_changes
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import REPO, add_agent, book_of
from tests.controller.support import event
from tests.mvp.support import GOV, act, claim, events_of, outcomes, runner_for

TERM = "launch-date"
ROOM = f"conflict-{TERM}"


def self_resolve(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
    """A, a party to the conflict, tries to settle it its own way once the room is open."""
    if wake.cause != "room_member" or not any(r.room_id == ROOM and r.status.value == "open" for r in view.rooms):
        return None
    return act(AppendEvent(event_type="conflict.resolved", payload={"term": TERM, "value": "2026-03-03"}),
               Discuss(room_id=ROOM, body="settled: the 3rd"))


def conflict(world: World) -> Any:
    add_agent(world, "a", ["state.write"])
    add_agent(world, "b", ["state.write"])
    runner = runner_for(world, {"a": RuleAgent([claim(TERM, "2026-03-03"), self_resolve]),
                                "b": RuleAgent([claim(TERM, "2026-03-10")])})
    world.enqueue_wake(GOV, "a", "when is the launch?", "ask-a")
    world.enqueue_wake(GOV, "b", "when is the launch?", "ask-b")
    runner.run_until_quiet(max_rounds=30)
    return runner


def room_status(world: World) -> str:
    return world.get_room(ROOM, actor=GOV).status.value


def contested(world: World) -> bool:
    facts = book_of(world).controller_facts("main")
    return any(f["kind"] == "contest" and f["key"] == TERM for f in facts) and sum(
        f["kind"] == "claim" and f["key"] == TERM for f in facts) == 2


def test_a_party_to_a_conflict_cannot_resolve_it_end_to_end(pworld: World) -> None:
    runner = conflict(pworld)
    assert room_status(pworld) == "open"                       # the controller convened the room ...
    assert events_of(pworld, "conflict.resolved") == []        # ... and A's resolution never reached the log
    assert "denied" in outcomes(pworld, "a")
    with pytest.raises(PolicyDenied) as err:                   # nor does a direct call
        pworld.append_event("a", "conflict.resolved", {"term": TERM})
    assert (err.value.kind, err.value.id, err.value.action) == ("event", "conflict.resolved", "append")
    runner.run_until_quiet(max_rounds=10)
    assert room_status(pworld) == "open" and contested(pworld)
    # control: the governor resolves, and the controller closes the room
    pworld.append_event(GOV, "conflict.resolved", {"term": TERM, "value": "2026-03-10"})
    runner.run_until_quiet(max_rounds=10)
    assert room_status(pworld) == "closed" and not contested(pworld)
    runner.close()


def test_a_decision_event_that_reaches_the_log_without_an_allowed_role_is_ignored(lax_world: World) -> None:
    """Under a policy that lets any state.write holder append conflict.resolved, A's resolution is logged
    (with the role the runtime recorded: worker), and the controller ignores it as a decision."""
    runner = conflict(lax_world)
    (forged,) = events_of(lax_world, "conflict.resolved")
    assert (forged.actor_id, forged.payload["actor_role"]) == ("a", "worker")
    runner.run_until_quiet(max_rounds=10)
    assert room_status(lax_world) == "open" and contested(lax_world)
    # a moderator (a role the governor grants) may decide, and the controller acts on it
    add_agent(lax_world, "mo", ["state.write"])
    lax_world.grant(GOV, "mo", role_id="moderator")
    lax_world.append_event("mo", "conflict.resolved", {"term": TERM, "value": "2026-03-10"})
    runner.run_until_quiet(max_rounds=10)
    assert room_status(lax_world) == "closed" and not contested(lax_world)
    runner.close()


def test_an_agent_cannot_bring_its_own_recorded_role(pworld: World) -> None:
    add_agent(pworld, "mo", ["state.write"])
    pworld.grant(GOV, "mo", role_id="moderator")
    before = book_of(pworld).store.read.last_seq()
    with pytest.raises(InvalidInput) as err:
        pworld.append_event("mo", "conflict.resolved", {"term": TERM, "actor_role": "governor"})
    assert err.value.field == "payload.actor_role"
    assert book_of(pworld).store.read.last_seq() == before
    pworld.append_event("mo", "conflict.resolved", {"term": TERM})
    (logged,) = events_of(pworld, "conflict.resolved")
    assert logged.payload == {"term": TERM, "actor_role": "moderator"}


@pytest.mark.parametrize(("payload", "fires"), [
    ({"term": "x"}, False),                                   # no role recorded (a forged or old event)
    ({"term": "x", "actor_role": "worker"}, False),
    ({"term": "x", "actor_role": "reviewer"}, False),         # privileged, but not for this decision
    ({"term": "x", "actor_role": "moderator"}, True),
    ({"term": "x", "actor_role": "governor"}, True),
])
def test_the_controller_checks_the_resolver_of_a_conflict(payload: dict[str, Any], fires: bool) -> None:
    claims = [{"id": "claim:x:A", "kind": "claim", "key": "x", "agent": "A", "value": 1, "claim": "st_1"}]
    controller = Controller("w-sec", REPO / "rules")
    controller.load()
    try:
        controller.rebuild(claims)
        controller.observe(event(1, "B", event_type="claim.asserted", subject="x",
                                 payload={"term": "x", "value": 2, "claim": "st_2"}))
        resolved = event(2, "A", event_type="conflict.resolved", subject="x", payload=payload)
        known = {f["id"]: f for f in controller.facts()}
        _, retracts = fact_changes(resolved, known)
        decisions = controller.observe(resolved)
    finally:
        controller.close()
    leaves = [d for d in decisions if isinstance(d, TopologyProposal) and d.op is TopologyOp.LEAVE]
    assert bool(leaves) is fires
    assert ("claim:x:A" in retracts) is fires                 # the claims are retracted only by a decision
    refusal = decision_refusal("conflict.resolved", "A", payload)
    assert (refusal is None) is fires
    if not fires:
        assert refusal is not None and "A" in refusal
