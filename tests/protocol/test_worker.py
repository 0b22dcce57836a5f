"""The protocol loop through the real PDP and gateway: every wake ends in exactly one typed receipt, and a
worker that dies between an effect and its ack never repeats the effect."""

from __future__ import annotations

from typing import Any

import pytest

from engine.models.agents import Agent
from engine.models.receipts import Outcome
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentDecision, CallableAdapter, RuleAgent, SetState
from engine.protocol.worker import SimulatedCrash, Worker
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import add_agent, book_of


def bump(key: str) -> RuleAgent:
    """A scripted agent that increments ``key`` once per wake."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        entry = next((s for s in view.state if s.key == key), None)
        version, value = (entry.version, entry.value) if entry else (0, 0)
        return AgentDecision(decision="act", effects=[SetState(key=key, expected_version=version, value=value + 1)])
    return RuleAgent([rule])


@pytest.fixture
def team(pworld: World) -> World:
    add_agent(pworld, "boss", ["wake.enqueue"])
    add_agent(pworld, "w", ["state.write"])
    add_agent(pworld, "idle", [])
    return pworld


def test_no_action_ends_in_a_no_action_receipt(team: World) -> None:
    """MVP test 15 through the run loop."""
    team.enqueue_wake("boss", "idle", "ping", "k-idle")
    cycle = Worker(book_of(team), "worker-1", {"idle": RuleAgent([])}).run_once()
    assert cycle is not None
    assert (cycle.receipt.outcome, cycle.receipt.decision.value) == (Outcome.NO_ACTION, "no_action")
    assert Worker(book_of(team), "worker-1", {}).run_once() is None


def test_an_effect_goes_through_the_policy_and_the_gateway(team: World) -> None:
    team.enqueue_wake("boss", "w", "count", "k1")
    cycle = Worker(book_of(team), "worker-1", {"w": bump("n")}).run_once()
    assert cycle is not None and cycle.receipt.outcome is Outcome.ACTED
    assert team.get_state("n", actor="w").value == 1
    event = [e for e in team.events(actor="gov", limit=1000) if e.event_type == "state.set"][-1]
    assert (event.correlation_id, event.policy_epoch is not None) == (cycle.wake.wake_id, True)


def test_a_denied_effect_is_a_denied_receipt(team: World) -> None:
    team.enqueue_wake("boss", "idle", "count", "k2")
    cycle = Worker(book_of(team), "worker-1", {"idle": bump("n")}).run_once()
    assert cycle is not None and cycle.receipt.outcome is Outcome.DENIED
    with pytest.raises(Exception, match="not found"):
        team.get_state("n", actor="gov")


def test_a_crash_between_effect_and_ack_never_repeats_the_effect(team: World, monkeypatch: Any) -> None:
    """MVP test 11: the first worker commits the effect and dies before its ack; after the lease expires a
    second worker replays the recorded decision, the effect's operation id returns the stored result, and
    the wake ends in exactly one receipt."""
    team.enqueue_wake("boss", "w", "count", "k3")
    first = Worker(book_of(team), "worker-1", {"w": bump("n")}, lease_seconds=5)
    first.crash_before_ack = 1  # effects committed (together), the ack not: as a pre-atomic worker died
    with pytest.raises(SimulatedCrash):
        first.run_once()
    assert team.get_state("n", actor="w").value == 1
    assert team.claim_wake("worker-2") is None  # still leased to worker-1
    team.clock.advance(6)  # type: ignore[attr-defined]
    cycles = Worker(book_of(team), "worker-2", {"w": bump("n")}).run_until_idle()
    assert len(cycles) == 1 and cycles[0].receipt.outcome is Outcome.ACTED
    assert team.get_state("n", actor="w").value == 1  # not 2
    assert len(team.list_receipts(actor="gov")) == 1


def test_model_replacement_continues_the_same_task(team: World) -> None:
    """MVP test 12: the agent's adapter (its model) is swapped between wakes; the work continues."""
    team.enqueue_wake("boss", "w", "count", "m1")
    Worker(book_of(team), "worker-1", {"w": bump("n")}).run_once()
    team.enqueue_wake("boss", "w", "count", "m2")
    llm = CallableAdapter(lambda ctx: {"decision": "act", "effects": [{
        "effect": "set_state", "key": "n", "value": 10 + len(ctx["view"]["state"]),
        "expected_version": next(s["version"] for s in ctx["view"]["state"] if s["key"] == "n")}]})
    cycle = Worker(book_of(team), "worker-1", {"w": llm}).run_once()
    assert cycle is not None and cycle.receipt.outcome is Outcome.ACTED
    entry = team.get_state("n", actor="w")
    assert (entry.version, entry.value) == (2, 11)  # the new model continued from the world, not a transcript
