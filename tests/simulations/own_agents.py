"""Behaviours of one's own for the plug-in tests (``tests.simulations.own_agents:ATTR`` in a scenario): one
of each kind the contract takes, and things it must refuse."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.models.agents import Agent
from engine.models.receipts import Decision
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentDecision, SetState
from engine.world.projection import WorldView

TALLY_KEY = "tally:{agent}"


class Tally:
    """An adapter factory (a class): each run adds one to the agent's ``tally:<agent>`` entry, on the version
    its view shows; ``runs`` counts this conversation's runs (a new conversation starts at 0)."""

    def __init__(self) -> None:
        self.runs = 0

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision:
        self.runs += 1
        key = TALLY_KEY.format(agent=agent_state.agent_id)
        entry = next((e for e in world_view.state if e.key == key), None)
        count = int(entry.value["n"]) if entry is not None and isinstance(entry.value, dict) else 0
        return AgentDecision(decision=Decision.ACT, reason=f"tally {count + 1} (run {self.runs} of this conversation)",
                             effects=[SetState(key=key, expected_version=entry.version if entry else 0,
                                               value={"n": count + 1, "wake": event.wake_id})])


def decide(context: Mapping[str, Any]) -> Mapping[str, Any]:
    """A decision function (what an LLM call returns): JSON context in, JSON decision out."""
    agent = context["agent"]["agent_id"]
    return {"decision": "act", "reason": f"{agent} saw cause {context['wake']['cause']}",
            "effects": [{"effect": "append_event", "event_type": "own.noted", "subject_kind": "world",
                         "subject_id": agent, "payload": {"cause": context["wake"]["cause"]}}]}


def make_nothing() -> object:
    """A factory whose product is no adapter."""
    return object()


NOT_AN_ADAPTER = 42


def two_arguments(a: object, b: object) -> None:
    """Neither a factory nor a decision function."""
