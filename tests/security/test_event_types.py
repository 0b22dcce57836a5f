"""Review finding 3 (issue 9): event types that are not decided steer the controller. Any ``state.write``
agent could append ``review.requested {independent: true, reviewer: X}`` and the controller cut X's info
edges; a hand-appended ``handoff.created`` woke any agent; any World-owned event type could be appended by
hand. Now ``append_event`` refuses the World's own event types (derived from the command registry and the
runtime book's calls), and every event type the rules react to that an agent may append is a decision
event the policy decides (``review.requested``: reviewers and governors) or the appender's own record."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.commands import COMMANDS, RUNTIME_CALLS
from engine.errors import InvalidInput, PolicyDenied
from engine.policy.model import DECISION_EVENTS
from engine.world import CONTROLLER_AGENT, World
from engine.world.event_types import (
    AGENT_RECORDS,
    CALLER_NAMED,
    CONTROLLER_EVENTS,
    RUNTIME_CALL_EVENTS,
    WORLD_EVENTS,
)
from tests.conftest import REPO, add_agent, book_of
from tests.mvp.support import GOV, all_events, runner_for

ALL = ["state.write", "room.open", "memory.write", "handoff.create", "task.create", "task.work", "topology.write"]


def _edges(world: World) -> set[tuple[str, str, bool]]:
    return {(e.source_agent, e.target_agent, e.active)
            for e in world.get_topology(actor=GOV, include_inactive=True).edges}


def test_no_world_event_type_is_appended_by_hand(pworld: World) -> None:
    add_agent(pworld, "mallory", ALL)
    before = book_of(pworld).store.read.last_seq()
    for event_type in sorted(WORLD_EVENTS):
        for actor in ("mallory", GOV):
            with pytest.raises(InvalidInput) as refused:
                pworld.append_event(actor, event_type, {"target_agent": "mallory"}, subject_kind="handoff",
                                    subject_id="h1")
            assert refused.value.field == "event_type", event_type
    for event_type in sorted(CONTROLLER_EVENTS):
        with pytest.raises(InvalidInput):
            pworld.append_event(GOV, event_type, {"agent": "mallory"})
    assert book_of(pworld).store.read.last_seq() == before  # nothing written, not even a denial
    assert pworld.append_event("mallory", "note.taken", {"x": 1}).event_type == "note.taken"


def test_the_refused_set_is_the_registry_and_the_runtime_books() -> None:
    assert {"handoff.created", "memory.propose", "room.opened", "wake.issued", "state.set"} <= WORLD_EVENTS
    assert {"policy.activated", "controller.step", "agent.decided", "governor.bootstrapped", "wake.revoked",
            "handoff.revoked", "policy.denied", "snapshot.taken", "memory.break_glass_read"} <= WORLD_EVENTS
    for cls in COMMANDS.values():
        assert set(cls.events) - {CALLER_NAMED} <= WORLD_EVENTS, cls.name
    assert set(RUNTIME_CALLS) <= set(RUNTIME_CALL_EVENTS)
    assert not WORLD_EVENTS & (set(DECISION_EVENTS) | set(AGENT_RECORDS) | CONTROLLER_EVENTS)


def _literal_event_types(path: Path) -> set[str]:
    """The event types a module names as literals where it writes: ``Plan("x.y", ...)``, ``event_type="x.y"``
    and ``<plan>.event_type = "x.y"``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Plan" and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            found.add(node.args[0].value)
        elif _names_event_type(node) and isinstance(value := getattr(node, "value", None), ast.Constant):
            found.add(str(value.value))
    return found


def _names_event_type(node: ast.AST) -> bool:
    if isinstance(node, ast.keyword):
        return node.arg == "event_type"
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "event_type"
                                                for t in node.targets)


def test_every_event_type_the_world_writes_is_refused_by_hand() -> None:
    written = set().union(*(_literal_event_types(p) for p in (REPO / "engine" / "world").glob("*.py")))
    assert {"room.discussed", "governor.bootstrapped", "policy.denied", "controller.step"} <= written
    assert written - WORLD_EVENTS == set()


def test_events_written_by_the_worlds_calls_are_all_in_the_refused_set(pworld: World) -> None:
    add_agent(pworld, "alice", ALL)
    add_agent(pworld, "bob", ALL)
    runner = runner_for(pworld, {})
    try:
        runner.run_until_quiet(max_rounds=10)
        for actor, value in (("alice", "A"), ("bob", "B")):
            pworld.append_event(actor, "claim.asserted", {"term": "t1", "claim": f"c-{actor}", "value": value})
        task = pworld.create_task("alice", "write it")
        pworld.claim_task("alice", task.task_id)
        pworld.create_handoff("alice", "bob", task.task_id, "review it", authority_scope={"capabilities": []})
        note = pworld.store_memory("alice", "a note", "observation")
        pworld.propose_memory("alice", note.memory_id)
        runner.run_until_quiet(max_rounds=20)
        pworld.append_event(GOV, "conflict.resolved", {"term": "t1", "value": "A"})
        runner.run_until_quiet(max_rounds=20)
        book_of(pworld).take_snapshot(GOV)
    finally:
        runner.close()
    events = all_events(pworld)
    assert {"controller.step", "room.opened", "handoff.created", "snapshot.taken"} <= {e.event_type for e in events}
    assert [(e.command, e.event_type) for e in events
            if e.command != "append_event" and e.event_type not in WORLD_EVENTS] == []


def _event_types_rules_react_to() -> set[str]:
    def types(pattern: Any) -> set[str]:
        if not isinstance(pattern, dict) or pattern.get("kind") != "event" or "type" not in pattern:
            return set()
        t = pattern["type"]
        return {t} if isinstance(t, str) else set(t.get("in", []))
    out: set[str] = set()
    for path in (REPO / "rules").glob("*.yaml"):
        for rule in yaml.safe_load(path.read_text()).get("rules", []):
            for pattern in (*(rule.get("when") or {}).values(), *(rule.get("unless") or {}).values()):
                out |= types(pattern)
    return out


def test_every_event_type_the_rules_react_to_is_the_worlds_a_decision_or_the_appenders_own() -> None:
    reacted = _event_types_rules_react_to()
    assert {"review.requested", "handoff.created", "memory.propose", "claim.asserted", "conflict.resolved"} <= reacted
    assert reacted - WORLD_EVENTS - set(DECISION_EVENTS) - set(AGENT_RECORDS) == set()
    assert "review.requested" in DECISION_EVENTS


def test_review_requested_is_a_reviewers_or_a_governors(pworld: World) -> None:
    for name in ("alice", "bob", "mallory"):
        add_agent(pworld, name, ["state.write"])
    add_agent(pworld, "rita", ["state.write"], role="reviewer")
    before = book_of(pworld).store.read.count("events")
    with pytest.raises(PolicyDenied):
        pworld.append_event("mallory", "review.requested", {"independent": True, "reviewer": "alice"})
    assert book_of(pworld).store.read.count("events") == before + 1  # the denial's audit record only
    for actor, reviewer in (("rita", "rita"), (GOV, "bob")):
        event = pworld.append_event(actor, "review.requested", {"independent": True, "reviewer": reviewer})
        assert event.event_type == "review.requested"


def test_a_review_request_by_a_worker_that_reaches_the_log_isolates_nobody(lax_world: World) -> None:
    """With a lax policy that lets any state.write agent append decision events, the controller's inputs
    still ignore a review request without an allowed role; a reviewer's request isolates its reviewer."""
    for name in ("alice", "bob", "mallory"):
        add_agent(lax_world, name, ["state.write"])
    add_agent(lax_world, "rita", ["state.write"], role="reviewer")
    lax_world.set_topology_edge(GOV, "alice", "bob", "info")
    lax_world.set_topology_edge(GOV, "bob", "alice", "info")
    runner = runner_for(lax_world, {})
    try:
        runner.run_until_quiet(max_rounds=10)
        lax_world.append_event("mallory", "review.requested", {"independent": True, "reviewer": "alice"})
        runner.run_until_quiet(max_rounds=10)
        assert _edges(lax_world) == {("alice", "bob", True), ("bob", "alice", True)}
        lax_world.append_event("rita", "review.requested", {"independent": True, "reviewer": "alice"})
        runner.run_until_quiet(max_rounds=10)
        assert _edges(lax_world) == {("alice", "bob", False), ("bob", "alice", False)}
    finally:
        runner.close()


def test_the_controller_appends_its_own_records(pworld: World) -> None:
    add_agent(pworld, "alice", ["state.write"])
    add_agent(pworld, "bob", ["state.write"])
    runner = runner_for(pworld, {})
    try:
        runner.run_until_quiet(max_rounds=10)
        for actor, value in (("alice", "A"), ("bob", "B")):
            pworld.append_event(actor, "claim.asserted", {"term": "t9", "claim": f"c-{actor}", "value": value})
        runner.run_until_quiet(max_rounds=10)
    finally:
        runner.close()
    assert [e.actor_id for e in all_events(pworld) if e.event_type == "claim.contested"] == [CONTROLLER_AGENT]
