"""What the shipped rules decide: wake targeting, topology, conflicts, memory review, epistemic lease."""

from __future__ import annotations

from engine.controller import (
    Contest,
    ForceRefresh,
    RouteReview,
    TopologyOp,
    TopologyProposal,
    WakeTarget,
)
from tests.controller.conftest import MakeController
from tests.controller.support import SECOND, T0, brief, event


def test_task_event_wakes_the_owner_but_not_the_actor(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": "task:t1", "kind": "task", "key": "t1", "owner": "B"}])
    [wake] = ctl.observe(event(1, "A", event_type="task.assign", subject="t1", subject_kind="task"))
    assert isinstance(wake, WakeTarget) and (wake.agent, wake.cause) == ("B", "task_owner")
    assert ctl.observe(event(2, "B", event_type="task.claim", subject="t1", subject_kind="task")) == []


def test_subscribers_are_woken_each_once(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": f"sub:s1:{a}", "kind": "subscription", "key": "s1", "agent": a} for a in "ABC"])
    decisions = ctl.observe(event(1, "A", subject="s1"))
    assert sorted(brief(decisions)) == [("wake", "B"), ("wake", "C")]
    assert [d.index for d in decisions] == [0, 1]


def test_an_agent_targeted_twice_by_one_event_is_woken_once(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": "task:t1", "kind": "task", "key": "t1", "owner": "B"},
                 {"id": "sub:t1:B", "kind": "subscription", "key": "t1", "agent": "B"}])
    decisions = ctl.observe(event(1, "A", subject="t1", subject_kind="task"))
    assert sorted(brief(decisions)) == [("suppress", "B", "dedupe"), ("wake", "B")]


def test_room_event_wakes_the_other_members(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": f"member:r1:{a}", "kind": "member", "key": "r1", "agent": a} for a in "AB"])
    assert brief(ctl.observe(event(1, "A", event_type="message.posted", subject="r1", subject_kind="room"))) == [
        ("wake", "B")]


def test_world_fact_changes_arrive_with_the_event(make_controller: MakeController) -> None:
    ctl = make_controller()
    task = {"id": "task:t1", "kind": "task", "key": "t1", "owner": "B"}
    step = ctl.observe_step(event(1, "A", event_type="task.created", subject="t1", subject_kind="task"),
                            upserts=[task])
    assert brief(list(step.decisions)) == [("wake", "B")]
    assert task in step.changes.upserted
    step = ctl.observe_step(event(2, "A", event_type="task.abort", subject="t1", subject_kind="task"),
                            retracts=["task:t1"])
    assert step.decisions == () and "task:t1" in step.changes.retracted


def test_independent_review_isolates_the_reviewer(make_controller: MakeController) -> None:
    ctl = make_controller()
    [iso] = ctl.observe(event(1, "A", event_type="review.requested", subject="art1",
                              payload={"reviewer": "R", "independent": True, "actor_role": "reviewer"}))
    assert isinstance(iso, TopologyProposal)
    assert (iso.op, iso.agents, iso.reason) == (TopologyOp.ISOLATE, ("R",), "independent review of art1")
    assert ctl.observe(event(2, "A", event_type="review.requested", subject="art2",
                             payload={"reviewer": "R", "independent": False, "actor_role": "reviewer"})) == []
    # a decision event: from a role the authority table does not name (or none recorded), it is ignored
    for role in ("worker", None):
        payload = {"reviewer": "R", "independent": True, **({"actor_role": role} if role else {})}
        assert ctl.observe(event(3 if role else 4, "A", event_type="review.requested", subject="art3",
                                 payload=payload)) == []


def test_useful_delta_shares_unless_an_info_edge_exists(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": "sub:s1:B", "kind": "subscription", "key": "s1", "agent": "B"}])
    shares = [d for d in ctl.observe(event(1, "A", payload={"relevance": 0.9})) if isinstance(d, TopologyProposal)]
    assert [(d.op, d.agents) for d in shares] == [(TopologyOp.SHARE, ("A", "B"))]
    later = T0 + 60 * SECOND
    assert not [d for d in ctl.observe(event(2, "A", payload={"relevance": 0.2}, now=later))
                if isinstance(d, TopologyProposal)]
    edge = {"id": "edge:A:B", "kind": "edge", "key": "A:B", "src": "A", "dst": "B", "edge_type": "info"}
    decisions = ctl.observe(event(3, "A", payload={"relevance": 0.95}, now=later + 60 * SECOND), upserts=[edge])
    assert not [d for d in decisions if isinstance(d, TopologyProposal)]


def test_contradicting_claims_are_contested_and_join_a_room(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": "claim:deadline:A", "kind": "claim", "key": "deadline", "agent": "A", "value": "friday",
                  "claim": "st_1"}])
    decisions = ctl.observe(event(1, "B", event_type="claim.asserted", subject="deadline",
                                  payload={"term": "deadline", "value": "monday", "claim": "st_2"}))
    contest = next(d for d in decisions if isinstance(d, Contest))
    assert (contest.term, contest.claims, contest.agents) == ("deadline", ("st_1", "st_2"), ("A", "B"))
    assert contest.reason == "A claims friday; B claims monday"
    [join] = [d for d in decisions if isinstance(d, TopologyProposal)]
    assert (join.op, join.agents, join.room) == (TopologyOp.JOIN, ("A", "B"), "conflict-deadline")
    assert {"contest:deadline", "conflict_room:deadline"} <= {f["id"] for f in ctl.facts()}


def test_an_agreeing_claim_is_not_contested(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": "claim:x:A", "kind": "claim", "key": "x", "agent": "A", "value": 3, "claim": "st_1"}])
    assert ctl.observe(event(1, "B", event_type="claim.asserted", subject="x",
                             payload={"term": "x", "value": 3, "claim": "st_2"})) == []


def test_resolution_leaves_and_closes_the_room_without_rejoining(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": "claim:x:A", "kind": "claim", "key": "x", "agent": "A", "value": 1, "claim": "st_1"}])
    ctl.observe(event(1, "B", event_type="claim.asserted", subject="x",
                      payload={"term": "x", "value": 2, "claim": "st_2"}))
    decisions = ctl.observe(event(2, "G", event_type="conflict.resolved", subject="x",
                                  payload={"term": "x", "actor_role": "governor"}))  # as the runtime records it
    [leave] = [d for d in decisions if isinstance(d, TopologyProposal)]
    assert (leave.op, leave.room, leave.close, leave.agents) == (TopologyOp.LEAVE, "conflict-x", True, ("A", "B"))
    assert not {"contest:x", "conflict_room:x"} & {f["id"] for f in ctl.facts()}


def test_memory_candidate_is_routed_to_a_reviewer_who_is_woken(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": "reviewer:R", "kind": "reviewer", "key": "R", "agent": "R", "scope": "memory"},
                 {"id": "reviewer:A", "kind": "reviewer", "key": "A", "agent": "A", "scope": "memory"}])
    decisions = ctl.observe(event(1, "A", event_type="memory.propose", subject="mem_1", subject_kind="memory"))
    [route] = [d for d in decisions if isinstance(d, RouteReview)]
    assert (route.memory, route.reviewer) == ("mem_1", "R")  # never the author
    [wake] = [d for d in decisions if isinstance(d, WakeTarget)]
    assert (wake.agent, wake.cause) == ("R", "memory_review")


def test_high_risk_action_on_an_expired_context_forces_a_refresh(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": "context:A", "kind": "context", "key": "A", "agent": "A", "valid_until": T0 + 5 * SECOND}])
    risky = {"risk": "high", "capability": "deploy"}
    assert ctl.observe(event(1, "A", event_type="capability.invoked", payload=risky, now=T0 + SECOND)) == []
    [refresh] = ctl.observe(event(2, "A", event_type="capability.invoked", payload=risky, now=T0 + 6 * SECOND))
    assert isinstance(refresh, ForceRefresh)
    assert (refresh.agent, refresh.reason) == ("A", "high-risk capability.invoked on an expired context")
    assert ctl.observe(event(3, "A", event_type="capability.invoked", payload={"risk": "low"},
                             now=T0 + 7 * SECOND)) == []


def test_high_risk_action_without_any_context_forces_a_refresh(make_controller: MakeController) -> None:
    ctl = make_controller()
    assert brief(ctl.observe(event(1, "Z", event_type="capability.invoked", payload={"risk": "critical"}))) == [
        ("force_refresh",)]
