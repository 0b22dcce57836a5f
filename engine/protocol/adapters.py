"""Agent adapters: ``run(agent_state, world_view, event) -> AgentDecision``.

An adapter decides; it never writes. Its decision names typed effects, which the worker carries out
through the World (so through the PDP and the gateway), with operation ids derived from the wake.
A rule-based agent that scenarios script, and a callable adapter for LLM-backed agents, are provided.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import Field

from engine.models.agents import Agent
from engine.models.common import Id, JsonValue, Model, Payload
from engine.models.receipts import Decision
from engine.models.wakes import Wake
from engine.world.projection import WorldView


class SetState(Model):
    effect: Literal["set_state"] = "set_state"
    key: str
    expected_version: int = Field(ge=0)
    value: JsonValue


class CompleteTask(Model):
    effect: Literal["complete_task"] = "complete_task"
    task_id: Id
    result: Payload = Field(default_factory=dict)


class StoreMemory(Model):
    effect: Literal["store_memory"] = "store_memory"
    content: str = Field(min_length=1)
    epistemic_type: str = "observation"


class Handoff(Model):
    effect: Literal["handoff"] = "handoff"
    target_agent: Id
    task_id: Id
    goal: str = Field(min_length=1)


Effect = SetState | CompleteTask | StoreMemory | Handoff


class AgentDecision(Model):
    """What the agent decided (``NO_ACTION`` is a legal outcome) and the effects it wants."""

    decision: Decision
    effects: list[Effect] = Field(default_factory=list, max_length=64)
    reason: str | None = Field(default=None, max_length=4000)


class AgentAdapter(Protocol):
    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision: ...


Rule = Callable[[Agent, WorldView, Wake], AgentDecision | None]


class RuleAgent:
    """A scripted agent: the first rule that returns a decision wins; none matching means NO_ACTION."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = list(rules)

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision:
        for rule in self.rules:
            decided = rule(agent_state, world_view, event)
            if decided is not None:
                return decided
        return AgentDecision(decision=Decision.NO_ACTION, reason="no rule matched")


class CallableAdapter:
    """Wraps any function (an LLM call, in production) that maps a JSON context to a JSON decision. The
    context carries the agent, the projection and the wake, never a transcript."""

    def __init__(self, fn: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> None:
        self.fn = fn

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision:
        context = {"agent": agent_state.model_dump(mode="json"), "view": world_view.model_dump(mode="json"),
                   "wake": event.model_dump(mode="json")}
        return AgentDecision.model_validate(self.fn(context))


__all__ = ["AgentAdapter", "AgentDecision", "CallableAdapter", "CompleteTask", "Effect", "Handoff", "RuleAgent",
           "SetState", "StoreMemory"]
