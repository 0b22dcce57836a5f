"""Agent adapters: ``run(agent_state, world_view, event) -> AgentDecision``.

An adapter decides; it never writes. Its decision names typed effects, which the worker carries out
through the World (so through the PDP and the gateway), with operation ids derived from the wake.
A rule-based agent that scenarios script, and a callable adapter for LLM-backed agents, are provided.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field

from engine.models.agents import Agent
from engine.models.common import Id, JsonValue, Model, Payload
from engine.models.handoffs import HandoffPacket
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


class Handoff(HandoffPacket):
    """Hand ``task_id`` to ``target_agent`` with the seed's full packet (goal, state ref, evidence and
    artifact refs, constraints, authority scope, expected output, return route): never a transcript."""

    effect: Literal["handoff"] = "handoff"


class AppendEvent(Model):
    """Record a fact about the work (e.g. ``claim.asserted`` {term, claim, value}, ``conflict.resolved``
    {term}, ``review.requested``) as an event; the controller's rules read it."""

    effect: Literal["append_event"] = "append_event"
    event_type: str = Field(min_length=1, max_length=100, pattern=r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
    payload: Payload = Field(default_factory=dict)
    subject_kind: str = Field(default="world", min_length=1, max_length=50)
    subject_id: str = Field(default="world", min_length=1, max_length=256)


class Subscribe(Model):
    effect: Literal["subscribe"] = "subscribe"
    subject_id: str = Field(min_length=1, max_length=256)
    active: bool = True


class JoinRoom(Model):
    effect: Literal["join_room"] = "join_room"
    room_id: Id


class LeaveRoom(Model):
    effect: Literal["leave_room"] = "leave_room"
    room_id: Id


class Discuss(Model):
    effect: Literal["discuss"] = "discuss"
    room_id: Id
    body: str = Field(min_length=1, max_length=8000)


class CommitAnswer(Model):
    """Blind-then-join: a private answer, revealed to the room once every member has committed."""

    effect: Literal["commit_answer"] = "commit_answer"
    room_id: Id
    content: str = Field(min_length=1, max_length=8000)


class ClaimTask(Model):
    effect: Literal["claim_task"] = "claim_task"
    task_id: Id


class ReviewMemory(Model):
    """Review a candidate (``promote``: and promote it to a stable shared fact; ``reject``: with a reason)."""

    effect: Literal["review_memory"] = "review_memory"
    memory_id: Id
    verdict: Literal["review", "promote", "reject"] = "review"
    reason: str | None = Field(default=None, max_length=2000)


class RegisterArtifact(Model):
    """Put content in the artifact registry as version 1 of a new artifact (for a task, if given)."""

    effect: Literal["register_artifact"] = "register_artifact"
    artifact_type: str = Field(min_length=1, max_length=100)
    content: str = Field(min_length=1, max_length=60_000)
    artifact_id: Id | None = None
    task_id: Id | None = None


class ReviseArtifact(Model):
    """Commit new content as the artifact's next version, on the version the agent saw."""

    effect: Literal["revise_artifact"] = "revise_artifact"
    artifact_id: Id
    content: str = Field(min_length=1, max_length=60_000)
    expected_version: int | None = Field(default=None, ge=1)


class ProposeMemory(Model):
    effect: Literal["propose_memory"] = "propose_memory"
    memory_id: Id


class AcceptHandoff(Model):
    effect: Literal["accept_handoff"] = "accept_handoff"
    handoff_id: Id


class CompleteHandoff(Model):
    effect: Literal["complete_handoff"] = "complete_handoff"
    handoff_id: Id
    result: Payload = Field(default_factory=dict)


Effect = (SetState | CompleteTask | StoreMemory | Handoff | AppendEvent | Subscribe | JoinRoom | LeaveRoom | Discuss
          | CommitAnswer | ProposeMemory | AcceptHandoff | CompleteHandoff | ClaimTask | ReviewMemory | RegisterArtifact
          | ReviseArtifact)


class AgentDecision(Model):
    """What the agent decided (``NO_ACTION`` is a legal outcome) and the effects it wants."""

    decision: Decision
    effects: list[Annotated[Effect, Field(discriminator="effect")]] = Field(default_factory=list, max_length=64)
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


class HumanProxy:
    """A human in the loop. The human decides from the CLI (``pmw human decide``: approve, override, assign,
    join ...), which queues a decision for the human's agent as ``instruction``s; on each wake the proxy
    takes the oldest instruction queued for it. With none queued it answers ``REQUEST`` (the human was
    asked, nothing else happened), never an invented decision."""

    def __init__(self, instructions: Callable[[str], AgentDecision | None]) -> None:
        self.instructions = instructions

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision:
        decided = self.instructions(agent_state.agent_id)
        if decided is not None:
            return decided
        return AgentDecision(decision=Decision.REQUEST, reason=f"waiting for {agent_state.agent_id} to decide")


class CallableAdapter:
    """Wraps any function (an LLM call, in production) that maps a JSON context to a JSON decision. The
    context carries the agent, the projection and the wake, never a transcript."""

    def __init__(self, fn: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> None:
        self.fn = fn

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision:
        context = {"agent": agent_state.model_dump(mode="json"), "view": world_view.model_dump(mode="json"),
                   "wake": event.model_dump(mode="json")}
        return AgentDecision.model_validate(self.fn(context))


__all__ = [
    "AcceptHandoff",
    "AgentAdapter",
    "AgentDecision",
    "AppendEvent",
    "CallableAdapter",
    "ClaimTask",
    "CommitAnswer",
    "CompleteHandoff",
    "CompleteTask",
    "Discuss",
    "Effect",
    "Handoff",
    "HumanProxy",
    "JoinRoom",
    "LeaveRoom",
    "ProposeMemory",
    "ReviewMemory",
    "RuleAgent",
    "SetState",
    "StoreMemory",
    "Subscribe",
]
