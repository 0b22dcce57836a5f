"""Every shipped scenario runs at its small size and gives the figures the seeds expect (each runs once per
session: the ``shipped`` fixture caches its result)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.settings import Settings
from simulations.run import Result, compare
from tests.simulations.conftest import SCENARIOS

SHIPPED = sorted(p.name for p in SCENARIOS.glob("*.yaml"))
Shipped = Callable[[str], Result]


def events(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (result.out / "events.jsonl").read_text().splitlines()]


def traces(result: Result) -> list[dict[str, Any]]:
    """Every run's trace (agent, refs it was shown), in log order."""
    return [c["values"] for e in events(result) if e["event_type"] == "wake.ack"
            for c in e["changes"] if c.get("table") == "traces"]


def memory_ids(result: Result, content: str) -> set[str]:
    return {c["values"]["memory_id"] for e in events(result) for c in e["changes"]
            if c.get("table") == "memory" and c.get("op") == "insert" and c["values"]["content"] == content}


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenario_meets_its_expectations(name: str, shipped: Shipped) -> None:
    result = shipped(name)
    assert result.scenario.expect, f"{name} states no expectation"
    assert result.expectations == dict.fromkeys(result.scenario.expect, True)
    assert result.metrics.checks == dict.fromkeys(result.metrics.checks, True)
    assert result.metrics.unauthorized_action_rate == 0.0
    assert result.metrics.counts["wakes_with_two_receipts"] == 0


def test_flagship_isolates_shares_joins_resolves_and_leaves(shipped: Shipped) -> None:
    result = shipped("flagship.yaml")
    m = result.metrics
    assert m.task_quality == 1.0
    assert m.counts["conflicts_opened"] == 1 and m.counts["conflicts_resolved"] == 1
    assert m.coordination_latency_s is not None and m.coordination_latency_s > 0
    assert m.checks["blind_answers_hidden_until_all_committed"]
    kinds = [e["event_type"] for e in events(result)]
    shared, opened, closed = kinds.index("topology.changed"), kinds.index("room.opened"), kinds.index("room.closed")
    assert shared < kinds.index("claim.contested") < opened < kinds.index("room.answered") < closed
    for png in ("topology", "wakes", "conflicts", "duplicates"):
        assert (result.out / f"{png}.png").stat().st_size > 5000
    assert "topology.png" in (result.out / "report.html").read_text()


def test_duplicate_wake_at_ten_deliveries_gives_one_wake_and_one_effect(shipped: Shipped) -> None:
    m = shipped("duplicate_wake.yaml").metrics
    assert m.counts["deliveries"] == 10
    assert m.counts["wakes"] == 1 and m.counts["receipts"] == 1
    assert m.counts["state_writes"] == 1 and m.duplicate_side_effect_rate == 0.0


def test_wake_storm_is_suppressed_within_depth(shipped: Shipped) -> None:
    m = shipped("wake_storm.yaml").metrics
    assert m.counts["suppressed_depth"] >= 1
    assert m.counts["wakes"] == 3  # depths 0, 1, 2 of A -> B -> C; the hop back to A is suppressed


def test_crashed_wake_is_rerun_once_without_repeating_its_effects(shipped: Shipped) -> None:
    m = shipped("crash_recovery.yaml").metrics
    assert m.counts["wakes_run_twice"] == 1
    assert m.counts["receipts"] == m.counts["wakes"]
    assert m.counts["state_writes"] == 2  # two steps, each written once although one wake ran twice
    assert m.recovery_success == 1.0


# -- seed 001 benchmark 1 and H3 ----------------------------------------------------------------------------

def test_sleep_wake_continues_every_long_task_from_the_world(shipped: Shipped) -> None:
    """Benchmark 1: runs separated by sleeps of random length; two conversations lost mid-task. Every step
    is done once, in order (Q = 1, D_R = 0), no write conflicts, both interrupted agents continue (F_C = 1)."""
    m = shipped("sleep_wake.yaml").metrics
    assert (m.task_quality, m.continuation_fidelity, m.duplicate_work_ratio, m.state_conflict_rate) == (1, 1, 0, 0)
    assert m.counts["tasks_completed"] == 8 and m.counts["work_units"] == 32 and m.counts["redone_units"] == 0
    assert m.counts["acted"] == 32 and m.counts["no_action"] == 8  # the wakes after a task's end decline
    assert m.counts["faults"] == 2


def test_event_driven_wakes_match_polling_quality_at_lower_cost(tmp_path: Path, sim_settings: Settings) -> None:
    """H3: the same work, Bo woken by the controller on each of Ada's steps vs every 30 s. Equal quality;
    event-driven wakes all act, polling's mostly do not, and polling shows agents more context in all."""
    event, poll = compare(SCENARIOS / "event_driven.yaml", SCENARIOS / "polling.yaml", tmp_path,
                          settings=sim_settings)
    e, p = event.metrics, poll.metrics
    assert e.task_quality == p.task_quality == 1.0
    assert (e.counts["wakes"], e.counts["acted"], e.wake_efficiency) == (10, 10, 1.0)
    assert (p.counts["wakes"], p.counts["acted"], p.counts["no_action"]) == (25, 10, 15)
    assert p.wake_efficiency == 0.4
    assert p.context_cost_bytes > 2 * e.context_cost_bytes
    table = (tmp_path / "compare.md").read_text()
    assert "| figure | event-driven | polling |" in table and "| wake_efficiency | 1 | 0.4 |" in table
    assert (tmp_path / "compare.png").stat().st_size > 5000


# -- MVP tests 5, 6, 8, 9, 15 ----------------------------------------------------------------------------------

def test_private_memory_is_never_shown_to_the_follower(shipped: Shipped) -> None:
    result = shipped("private_memory.yaml")
    (note,) = memory_ids(result, "the acquisition closes on Friday")
    shown = [(t["agent_id"], f"memory:{note}" in t["retrieved_refs"]) for t in traces(result)]
    assert ("ada", True) in shown                            # the owner sees her note ...
    assert [s for a, s in shown if a == "bo"] == [False] * 2  # ... Bo, woken on each of her two steps, never
    assert result.metrics.counts["private_memory_shown_to_others"] == 0


def test_candidate_memory_goes_to_its_reviewer_and_is_nobodys_shared_fact(shipped: Shipped) -> None:
    result = shipped("candidate_memory.yaml")
    (cand,) = memory_ids(result, "the API allows 100 requests/s")
    log = events(result)
    steps = [d for e in log if e["event_type"] == "controller.step" for d in e["payload"]["decisions"]]
    assert [(d["kind"], d["memory"], d["reviewer"]) for d in steps if d["kind"] == "route_review"] == [
        ("route_review", cand, "rita")]
    (promoted,) = [e for e in log if e["event_type"] == "memory.promote"]
    assert (promoted["actor_id"], promoted["subject_id"]) == ("rita", cand)  # the reviewer reviews
    seen = [(t["agent_id"], t["started_at_us"]) for t in traces(result) if f"memory:{cand}" in t["retrieved_refs"]]
    assert ("rita", promoted["created_at_us"] - 1_000_000) in seen  # shown it to review it (1 s of thinking)
    # nobody but its owner and its reviewer was shown it before the review made it a shared fact
    assert {a for a, at in seen if at < promoted["created_at_us"]} <= {"ada", "rita"}
    assert "bo" in {a for a, _ in seen}  # ... and Bo, afterwards, is shown the shared fact
    m = result.metrics
    assert m.counts["memory_candidates"] == 0 and m.counts["memories_promoted"] == 1
    assert m.counts["candidate_memory_shown_to_others"] == 0


def test_blind_answers_are_unseen_until_the_last_commit_reveals_all(shipped: Shipped) -> None:
    result = shipped("blind_then_join.yaml")
    answered = [e for e in events(result) if e["event_type"] == "room.answered"]
    assert [e["payload"]["revealed"] for e in answered] == [[], [], ["ann", "ben", "cy"]]
    answers = {c["values"]["memory_id"] for e in answered for c in e["changes"]
               if c.get("table") == "memory" and c.get("op") == "insert"}
    revealed_at = answered[-1]["created_at_us"]
    before = [t for t in traces(result) if t["started_at_us"] < revealed_at]
    assert sorted(t["agent_id"] for t in before) == ["ann", "ben", "cy"]  # each member answered blind ...
    for t in before:  # ... and no run before the reveal was shown any answer
        assert not answers & {r.removeprefix("memory:") for r in t["retrieved_refs"]}, t["agent_id"]
    # a room wake the cooldown deferred runs after the reveal, and may see the answers then
    queued = [c["values"] for e in events(result) for c in e["changes"]
              if c.get("table") == "wakes" and c.get("op") == "insert"]
    ran_blind = {t["trace_id"] for t in before}  # a trace is keyed by its wake
    assert all("deferred" in w["payload"] for w in queued if w["wake_id"] not in ran_blind)


def test_joining_a_room_shares_its_memory_but_no_secret_and_no_authority(shipped: Shipped) -> None:
    result = shipped("permission_join.yaml")
    plain, secret, private = (memory_ids(result, c).pop() for c in (
        "deploys happen at 17:00", "the HSM recovery code is in safe 2", "I think lo is new"))
    last = [t for t in traces(result) if t["agent_id"] == "lo"][-1]["retrieved_refs"]
    assert "room:ops" in last and f"memory:{plain}" in last
    assert f"memory:{secret}" not in last and f"memory:{private}" not in last
    grants = [e for e in events(result) if e["event_type"] == "agent.granted" and e["subject_id"] == "lo"]
    assert len(grants) == 1  # the join granted nothing
    assert result.metrics.counts["memory_shown_above_clearance"] == 0


def test_a_wake_with_nothing_to_do_ends_in_one_no_action_receipt(shipped: Shipped) -> None:
    m = shipped("no_action_receipt.yaml").metrics
    assert (m.counts["wakes"], m.counts["receipts"], m.counts["no_action"], m.counts["traced_runs"]) == (3, 3, 2, 3)


# -- faults: PDP outage and policy change ----------------------------------------------------------------------

def test_pdp_outage_fails_closed_and_work_resumes_and_a_policy_change_is_a_new_epoch(shipped: Shipped) -> None:
    result = shipped("policy_faults.yaml")
    m, log = result.metrics, events(result)
    fault_at = {e["payload"]["kind"]: e["seq"] for e in log if e["event_type"] == "sim.fault"}
    restored = next(e["seq"] for e in log if e["event_type"] == "sim.fault_result"
                    and e["payload"]["kind"] == "pdp_outage")
    assert [e["event_type"] for e in log if fault_at["pdp_outage"] < e["seq"] < restored] == []  # fail closed
    assert m.counts["runs_refused_by_pdp_outage"] >= 1 and m.counts["entries_deferred_by_pdp_outage"] == 1
    assert m.counts["wakes"] == m.counts["receipts"] == 8 and m.task_quality == 1.0  # and the work resumed
    epochs = [e["payload"].get("epoch") or e["subject_id"] for e in log if e["event_type"] == "policy.activated"]
    assert len(epochs) == 2 and epochs[0] != epochs[1]
    later = [e["policy_epoch"] for e in log if e["seq"] > fault_at["policy_change"] and e["policy_epoch"]
             and e["event_type"] != "policy.activated"]
    assert later and set(later) == {epochs[1]}


# -- MVP 13: artifact recovery from the registry alone ------------------------------------------------------------

def test_artifact_is_recovered_from_the_registry_and_revised_on_the_version_seen(shipped: Shipped) -> None:
    """MVP 13: Ada registers the report (v1); a new conversation of hers, which remembers nothing, revises the
    version its view shows (v2); Bo, handed the task with nothing but a pointer to its progress, finds the
    report in the registry and revises it on the version he saw: v3 by Bo based on v2, then v4 on v3. Every
    version reads back through the registry with its checksum: nothing is lost."""
    result = shipped("artifact_recovery.yaml")
    log = events(result)
    commits = [(e["subject_id"], e["actor_id"], e["base_version"], e["resulting_version"], e["op_id"])
               for e in log if e["event_type"] == "artifact.committed"]
    (art,) = {c[0] for c in commits}
    assert [c[1:4] for c in commits] == [("ada", None, 1), ("ada", 1, 2), ("bo", 2, 3), ("bo", 3, 4)]
    # Bo knew nothing but the task: the handoff named no artifact, and the run that accepted it (before the
    # task was his) was not shown one; his next run was shown the registry entry and revised what it showed.
    (packet,) = [c["values"] for e in log for c in e["changes"] if c.get("table") == "handoffs"
                 and c.get("op") == "insert"]
    assert packet["artifact_refs"] == [] and art not in packet["goal"]
    shown = [f"artifact:{art}" in t["retrieved_refs"] for t in traces(result) if t["agent_id"] == "bo"]
    assert shown[:2] == [False, True]
    wake = commits[2][4].split(":")[0]
    (decided,) = [e["payload"] for e in log if e["event_type"] == "agent.decided" and e["subject_id"] == wake]
    revise = [x for x in decided["effects"] if x["effect"] == "new_artifact_version"]
    assert revise == [{"effect": "new_artifact_version", "artifact_id": art, "expected_version": 2,
                       "content": "report of t1: step 3 of 4, by bo"}]
    # read back through the registry at the stop; the content on disk hashes to the registered checksum
    (read,) = [e["payload"] for e in log if e["event_type"] == "sim.artifacts_read"]
    assert read["heads"] == {art: 4}
    assert [(r["version"], r["created_by"], r["ok"]) for r in read["versions"]] == [
        (1, "ada", True), (2, "ada", True), (3, "bo", True), (4, "bo", True)]
    locations = {c["values"]["version"]: c["values"]["location"] for e in log for c in e["changes"]
                 if c.get("table") == "artifact_versions"}
    for r in read["versions"]:
        content = (result.out / "artifacts" / locations[r["version"]]).read_bytes()
        assert hashlib.sha256(content).hexdigest() == r["checksum"]
    m = result.metrics
    assert (m.counts["artifacts"], m.counts["artifact_versions"], m.counts["artifact_revisions"]) == (1, 4, 3)
    assert m.counts["artifact_revisions_on_seen_version"] == 3 and m.counts["artifact_revisions_blind"] == 0
    assert m.counts["artifact_revisions_by_another_agent"] == 1
    assert (m.counts["artifact_versions_read_back"], m.counts["artifact_versions_lost"]) == (4, 0)
    assert m.checks["no_artifact_version_lost"] and m.checks["artifact_revisions_on_the_version_seen"]
    assert (m.task_quality, m.continuation_fidelity, m.recovery_success) == (1.0, 1.0, 1.0)
