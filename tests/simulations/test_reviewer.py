"""The ``reviewer`` behaviour reviews: a candidate memory the controller routes to it is promoted
(``reviewer``) or rejected with a reason (``disagreeing_reviewer``) through the World's review commands, so
the log, the receipts and the metrics show the verdict."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.settings import Settings
from simulations.behaviours import REJECTION_REASON
from simulations.run import Result, run_scenario_file
from simulations.scenario import load_scenario
from tests.simulations.conftest import SCENARIOS

CONTENT = "the API allows 100 requests/s"


def log(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (result.out / "events.jsonl").read_text().splitlines()]


def candidate(events: list[dict[str, Any]]) -> str:
    (mid,) = {c["values"]["memory_id"] for e in events for c in e["changes"]
              if c.get("table") == "memory" and c.get("op") == "insert" and c["values"]["content"] == CONTENT}
    return str(mid)


def rita_receipts(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c["values"]["decision"], c["values"]["outcome"]) for e in events if e["event_type"] == "wake.ack"
            for c in e["changes"] if c.get("table") == "receipts" and c["values"]["agent_id"] == "rita"]


@pytest.fixture(scope="module")
def rejected(tmp_path_factory: pytest.TempPathFactory, sim_settings: Settings) -> Result:
    """candidate_memory.yaml with Rita on ``disagreeing_reviewer``."""
    scenario = load_scenario(SCENARIOS / "candidate_memory.yaml", {"agents.1.behaviour": "disagreeing_reviewer"})
    return run_scenario_file(scenario, tmp_path_factory.mktemp("rejected"), settings=sim_settings, plots=False)


def test_the_reviewer_promotes_the_candidate_routed_to_it(shipped: Callable[[str], Result]) -> None:
    result = shipped("candidate_memory.yaml")
    events = log(result)
    mid = candidate(events)
    (verdict,) = [e for e in events if e["event_type"] in ("memory.promote", "memory.reject")]
    assert (verdict["event_type"], verdict["actor_id"], verdict["subject_id"]) == ("memory.promote", "rita", mid)
    row = next(c["values"] for c in verdict["changes"] if c.get("table") == "memory")
    assert (row["status"], row["scope"], row["reviewer"]) == ("shared", "shared", "rita")
    assert rita_receipts(events) == [("verify", "acted")]
    assert result.metrics.counts["memories_promoted"] == 1 and result.metrics.counts["memory_candidates"] == 0


def test_the_disagreeing_reviewer_rejects_it_with_its_reason(rejected: Result) -> None:
    events = log(rejected)
    mid = candidate(events)
    (verdict,) = [e for e in events if e["event_type"] in ("memory.promote", "memory.reject")]
    assert (verdict["event_type"], verdict["actor_id"], verdict["subject_id"]) == ("memory.reject", "rita", mid)
    assert verdict["payload"]["reason"] == REJECTION_REASON
    assert rita_receipts(events) == [("verify", "acted")]
    counts = rejected.metrics.counts
    assert (counts["memories_rejected"], counts["memories_promoted"], counts["memory_candidates"]) == (1, 0, 0)
    shown = [t["agent_id"] for e in events if e["event_type"] == "wake.ack" for c in e["changes"]
             if c.get("table") == "traces" for t in [c["values"]] if f"memory:{mid}" in t["retrieved_refs"]]
    assert "bo" not in shown  # a rejected candidate is never anyone's shared fact


def test_a_review_wake_without_a_candidate_is_no_action(tmp_path: Path, sim_settings: Settings) -> None:
    """The reviewer never invents a verdict: with nothing routed to it, its review wake ends in no_action."""
    scenario = load_scenario(SCENARIOS / "candidate_memory.yaml", {
        "agents.0.params.note.propose": False, "timeline.2.target": "rita", "timeline.2.cause": "memory_review"})
    result = run_scenario_file(scenario, tmp_path, settings=sim_settings, plots=False)
    events = log(result)
    assert rita_receipts(events) == [("no_action", "no_action")]
    assert not [e for e in events if e["event_type"].startswith("memory.") and e["event_type"] != "memory.stored"]
    assert result.metrics.counts["memories_promoted"] == result.metrics.counts["memories_rejected"] == 0


def test_the_route_records_its_reviewer_on_the_memory(shipped: Callable[[str], Result]) -> None:
    """The controller's step sets the routed reviewer on the candidate (``Memory.reviewer``) before anyone
    reviews it: the routing is on the memory, not only in the step's decision record."""
    events = log(shipped("candidate_memory.yaml"))
    mid = candidate(events)
    (step,) = [e for e in events if e["event_type"] == "controller.step"
               and any(d["kind"] == "route_review" for d in e["payload"]["decisions"])]
    assigned = [c for c in step["changes"] if c.get("table") == "memory"]
    assert [(c["op"], c["key"]["memory_id"], c["values"]["reviewer"]) for c in assigned] == [("update", mid, "rita")]
    (verdict,) = [e for e in events if e["event_type"] == "memory.promote"]
    assert step["seq"] < verdict["seq"]


def test_only_the_routed_reviewer_reviews_when_two_could(tmp_path: Path, sim_settings: Settings) -> None:
    """Bo is a reviewer too, so the candidate is routed to both and both are woken; the first route is the
    one recorded on the memory, and only that reviewer gives the verdict: the other's review wake is
    no_action (before the fix both saw an unassigned candidate and raced for it)."""
    scenario = load_scenario(SCENARIOS / "candidate_memory.yaml", {
        "agents.2.role": "reviewer", "agents.2.capabilities": ["state.write", "memory.review"]})
    result = run_scenario_file(scenario, tmp_path, settings=sim_settings, plots=False)
    events = log(result)
    mid = candidate(events)
    steps = [d for e in events if e["event_type"] == "controller.step" for d in e["payload"]["decisions"]
             if d["kind"] == "route_review"]
    assert sorted(d["reviewer"] for d in steps) == ["bo", "rita"]
    first = steps[0]["reviewer"]
    (assigned,) = [c["values"]["reviewer"] for e in events if e["event_type"] == "controller.step"
                   for c in e["changes"] if c.get("table") == "memory"]
    assert assigned == first
    (verdict,) = [e for e in events if e["event_type"] in ("memory.promote", "memory.reject")]
    assert (verdict["event_type"], verdict["actor_id"], verdict["subject_id"]) == ("memory.promote", first, mid)
    assert not [e for e in events if e["event_type"].startswith("memory.") and e["actor_id"] not in ("ada", first)]
