"""The layered wake through the worker, on the real PDP: a monitor-depth wake is only logged, a check-depth
wake asks the adapter's cheap check, a full run is today's cycle; the layer is on the receipt and the trace.
A low-importance wake never reaches a full run, a high-risk one always does."""

from __future__ import annotations

import random
from typing import Any

import pytest

from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.runloop import WakeCheck
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import add_agent
from tests.envelope.support import runner, wake

ACT = {"decision": "act", "effects": [{"effect": "append_event", "event_type": "note.added",
                                       "subject_kind": "note", "subject_id": "n1", "payload": {}}]}


class Counting:
    """Runs (the full layer) and checks counted; ``worth``: the check's answer."""

    def __init__(self, worth: bool = True) -> None:
        self.worth = worth
        self.runs: list[str] = []
        self.checks: list[str] = []

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> dict[str, Any]:
        self.runs.append(event.wake_id)
        return ACT

    def check(self, agent_state: Agent, event: Wake) -> WakeCheck:
        self.checks.append(event.wake_id)
        return WakeCheck(self.worth, "nothing new in it" if not self.worth else "a fresh deadline")


class NoCheck:
    """An adapter without the optional check."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> dict[str, Any]:
        self.runs.append(event.wake_id)
        return ACT


@pytest.fixture
def team(pworld: World) -> World:
    add_agent(pworld, "agent", ["state.write"])
    return pworld


LOW = {"importance": 0.1, "uncertainty": 0.1, "risk": 0.1, "novelty": 0.1}      # score 0.3: monitor
MID = {"importance": 0.3, "uncertainty": 0.4, "risk": 0.2, "novelty": 0.4}      # score 0.9: check
HIGH = {"importance": 0.9, "uncertainty": 0.2, "risk": 0.3, "novelty": 0.2}     # score 1.4: full


def test_a_monitor_depth_wake_is_only_logged(team: World) -> None:
    agent = Counting()
    r = runner(team, {"agent": agent})
    w = wake(team, "agent", "k1", signals=LOW)
    r.run_until_quiet(max_rounds=5)
    receipt = team.receipt_for_wake(w, actor="gov")
    assert (receipt.outcome.value, receipt.decision.value) == ("monitored", "no_action")
    layer = receipt.payload["wake_layer"]
    assert (layer["depth"], layer["layer"], layer["signals"]["importance"]) == ("monitor", 0, 0.1)
    assert agent.runs == [] and agent.checks == []
    trace = team.get_trace(w, actor="gov")
    assert trace.retrieved_refs == [] and trace.cost["context_bytes"] == 0
    assert trace.decisions[0]["wake_layer"]["depth"] == "monitor"


@pytest.mark.parametrize(("worth", "outcome", "reached"), [(False, "no_action", "check"), (True, "acted", "full")])
def test_a_check_depth_wake_asks_the_cheap_check_first(team: World, worth: bool, outcome: str,
                                                       reached: str) -> None:
    agent = Counting(worth)
    r = runner(team, {"agent": agent})
    w = wake(team, "agent", "k1", signals=MID)
    r.run_until_quiet(max_rounds=5)
    receipt = team.receipt_for_wake(w, actor="gov")
    layer = receipt.payload["wake_layer"]
    assert (receipt.outcome.value, layer["depth"], layer["reached"], layer["checked"]) == (
        outcome, "check", reached, True)
    assert agent.checks == [w] and agent.runs == ([w] if worth else [])
    if not worth:
        assert receipt.reason == "lightweight check: not worth acting: nothing new in it"


def test_an_adapter_without_a_check_gets_a_full_run(team: World) -> None:
    agent = NoCheck()
    r = runner(team, {"agent": agent})
    w = wake(team, "agent", "k1", signals=MID)
    r.run_until_quiet(max_rounds=5)
    receipt = team.receipt_for_wake(w, actor="gov")
    assert receipt.outcome.value == "acted" and agent.runs == [w]
    assert (receipt.payload["wake_layer"]["checked"], receipt.payload["wake_layer"]["reached"]) == (False, "full")


def test_a_wake_without_signals_is_today_s_full_run(team: World) -> None:
    agent = Counting(worth=False)
    r = runner(team, {"agent": agent})
    w = wake(team, "agent", "k1")
    r.run_until_quiet(max_rounds=5)
    receipt = team.receipt_for_wake(w, actor="gov")
    assert receipt.outcome.value == "acted" and "wake_layer" not in receipt.payload
    assert agent.runs == [w] and agent.checks == []


def test_bad_signals_fail_the_wake_and_run_nothing(team: World) -> None:
    agent = Counting()
    r = runner(team, {"agent": agent})
    w = wake(team, "agent", "k1", signals={"risk": 5})
    r.run_until_quiet(max_rounds=5)
    receipt = team.receipt_for_wake(w, actor="gov")
    assert receipt.outcome.value == "failed" and "payload.signals" in (receipt.reason or "")
    assert agent.runs == [] and agent.checks == []


def test_low_importance_never_reaches_a_full_run_and_high_risk_always_does(team: World) -> None:
    """40 seeded wakes of importance under 0.3 and risk under 0.7 (whatever else), a check that always says
    yes: none is run in full (nor checked). 20 wakes of risk 0.7 or more, a check that would say no: all run in
    full."""
    rng = random.Random(16)
    eager = Counting(worth=True)
    r = runner(team, {"agent": eager})
    low = [wake(team, "agent", f"low{n}", signals={
        "importance": rng.uniform(0, 0.299), "risk": rng.uniform(0, 0.699), "uncertainty": rng.random(),
        "novelty": rng.random()}) for n in range(40)]
    r.run_until_quiet(max_rounds=10)
    reached = [team.receipt_for_wake(w, actor="gov").payload["wake_layer"].get("reached", "monitor") for w in low]
    assert eager.runs == [] and eager.checks == [] and set(reached) == {"monitor"}
    assert {team.receipt_for_wake(w, actor="gov").outcome.value for w in low} == {"monitored"}

    reluctant = Counting(worth=False)
    r.adapters["agent"] = reluctant
    high = [wake(team, "agent", f"high{n}", signals={
        "importance": rng.random() * 0.1, "risk": rng.uniform(0.7, 1.0), "uncertainty": 0.0,
        "novelty": 0.0}) for n in range(20)]
    r.run_until_quiet(max_rounds=10)
    assert sorted(reluctant.runs) == sorted(high) and reluctant.checks == []
    assert {team.receipt_for_wake(w, actor="gov").payload["wake_layer"]["reached"] for w in high} == {"full"}


def test_a_full_run_with_an_envelope_records_both(team: World) -> None:
    class Refuser(Counting):
        def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> dict[str, Any]:
            self.runs.append(event.wake_id)
            return {"outcome": "refuse", "reason": "not mine to decide"}
    agent = Refuser()
    r = runner(team, {"agent": agent})
    w = wake(team, "agent", "k1", signals=HIGH)
    r.run_until_quiet(max_rounds=5)
    receipt = team.receipt_for_wake(w, actor="gov")
    assert receipt.outcome.value == "refused"
    assert (receipt.payload["wake_layer"]["depth"], receipt.payload["envelope"]["outcome"]) == ("full", "refuse")
