"""Agent adapters: ``run(agent_state, world_view, event) -> AgentDecision``.

An adapter decides; it never writes. Its decision names typed effects, which the worker carries out
through the World (so through the PDP and the gateway), with operation ids derived from the wake.
A rule-based agent that scenarios script, and a callable adapter for LLM-backed agents, are provided.

The effects are not declared here: each is a command of the registry (``engine.commands``) that agents may
use (``agent_effect``), generated as that command plus its tag ``effect`` (the command's name), with the
command's fields, limits, validators, description and JSON schema. ``EFFECTS`` maps names to the classes,
``Effect`` is their discriminated union, and each class is importable under its command class's name
(``CreateTask``, ``CloseRoom`` ...; ``SetState``, ``Handoff`` and ``ReviseArtifact`` keep their old names).
Decisions in the old JSON spelling (``set_state``, ``handoff``, ``revise_artifact``, ``review_memory`` with a
``verdict``) are read as the command they meant (:func:`upgrade_effect`, the one alias table).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, Union, cast

from pydantic import ConfigDict, Field, SerializerFunctionWrapHandler, create_model, field_validator, model_serializer

from engine.commands import Command
from engine.commands import artifacts as artifact_commands
from engine.commands import effects as effect_commands
from engine.commands import handoffs as handoff_commands
from engine.commands import memory as memory_commands
from engine.commands import rooms as room_commands
from engine.commands import state as state_commands
from engine.commands import subscriptions as subscription_commands
from engine.commands import tasks as task_commands
from engine.models.agents import Agent
from engine.models.common import Model
from engine.models.receipts import Decision
from engine.models.state import StateKey
from engine.models.wakes import Wake
from engine.world.projection import WorldView

# -- effects: the commands an agent may name, generated from the registry ---------------------------------


def _tag_first(schema: dict[str, Any], model: type[Any]) -> None:
    """Show the ``effect`` tag first in an effect's JSON schema, and as required (it selects the command)."""
    props = schema.get("properties", {})
    if "effect" in props:
        schema["properties"] = {"effect": props.pop("effect"), **props}
        schema["required"] = ["effect", *(r for r in schema.get("required", []) if r != "effect")]


class AgentEffect(Command):
    """An effect: a registered command tagged with its name (``effect``), which the worker carries out
    through ``world.execute`` as the agent, with an operation id derived from the wake."""

    model_config = ConfigDict(json_schema_extra=_tag_first)

    effect: str = ""  # each effect class fixes it to its command's name
    __command__: type[Command]

    def command(self) -> Command:
        """The command this effect names, without its tag (fields as validated)."""
        plain = type(self).__command__
        return plain.model_construct({f for f in self.model_fields_set if f != "effect"},
                                     **{f: getattr(self, f) for f in plain.model_fields})


def _effect_class(command: type[Command]) -> type[AgentEffect]:
    """``command`` plus the tag ``effect: <command.name>``: same fields, limits, validators and title."""
    tag: Any = Literal[command.name]  # a literal type built at run time
    effect = cast(type[AgentEffect], create_model(command.__name__, __base__=(command, AgentEffect),
                                                  __module__=__name__, __doc__=command.__doc__,
                                                  effect=(tag, command.name)))
    effect.__command__ = command
    return effect


EFFECTS: Mapping[str, type[AgentEffect]] = MappingProxyType({c.name: _effect_class(c) for c in effect_commands()})

# Effect names from before the command vocabulary, accepted in decisions (a recorded decision is replayed
# after an upgrade): the old name of the same command. ``review_memory`` with a ``verdict`` is rewritten by
# ``upgrade_effect`` to the review, promote or reject command it meant.
LEGACY_EFFECT_NAMES: Mapping[str, str] = MappingProxyType({
    "set_state": "compare_and_set_state", "handoff": "create_handoff", "revise_artifact": "new_artifact_version"})
_VERDICTS = {"review": "review_memory", "promote": "promote_memory", "reject": "reject_memory"}


def upgrade_effect(raw: Any) -> Any:
    """An effect in its old JSON spelling (``LEGACY_EFFECT_NAMES``, ``review_memory`` with ``verdict``) as the
    command it meant; anything else unchanged (and then validated as it is)."""
    if not isinstance(raw, dict):
        return raw
    name = raw.get("effect")
    if isinstance(name, str) and name in LEGACY_EFFECT_NAMES:
        return {**raw, "effect": LEGACY_EFFECT_NAMES[name]}
    verdict = raw.get("verdict")
    if name == "review_memory" and isinstance(verdict, str) and verdict in _VERDICTS:
        rest = {k: v for k, v in raw.items() if k not in ("verdict", "reason")}
        if verdict == "reject":
            rest["reason"] = raw.get("reason") or "rejected in review"
        elif raw.get("reason") is not None:
            return raw  # a reason only a rejection takes: refused as it is
        return {**rest, "effect": _VERDICTS[verdict]}
    return raw


_BY_CLASS_NAME = {cls.__name__: cls for cls in EFFECTS.values()}

if TYPE_CHECKING:
    Effect = AgentEffect

    # The effect classes under the names existing call sites use (their typing view: command plus tag).
    class SetState(state_commands.CompareAndSetState, AgentEffect): ...
    class AppendEvent(state_commands.AppendEvent, AgentEffect): ...
    class ClaimTask(task_commands.ClaimTask, AgentEffect): ...
    class CompleteTask(task_commands.CompleteTask, AgentEffect): ...
    class Handoff(handoff_commands.CreateHandoff, AgentEffect): ...
    class AcceptHandoff(handoff_commands.AcceptHandoff, AgentEffect): ...
    class CompleteHandoff(handoff_commands.CompleteHandoff, AgentEffect): ...
    class StoreMemory(memory_commands.StoreMemory, AgentEffect): ...
    class ProposeMemory(memory_commands.ProposeMemory, AgentEffect): ...
    class ReviewMemory(memory_commands.ReviewMemory, AgentEffect): ...
    class JoinRoom(room_commands.JoinRoom, AgentEffect): ...
    class LeaveRoom(room_commands.LeaveRoom, AgentEffect): ...
    class Discuss(room_commands.Discuss, AgentEffect): ...
    class CommitAnswer(room_commands.CommitAnswer, AgentEffect): ...
    class RegisterArtifact(artifact_commands.RegisterArtifact, AgentEffect): ...
    class ReviseArtifact(artifact_commands.NewArtifactVersion, AgentEffect): ...
    class Subscribe(subscription_commands.Subscribe, AgentEffect): ...
else:
    # The discriminated union of every effect, tagged by ``effect`` (the command's name).
    Effect = Annotated[Union[tuple(EFFECTS.values())], Field(discriminator="effect")]  # noqa: UP007

    SetState = EFFECTS["compare_and_set_state"]
    Handoff = EFFECTS["create_handoff"]
    ReviseArtifact = EFFECTS["new_artifact_version"]

    def __getattr__(name: str) -> type[AgentEffect]:
        """Every effect class under its command's class name (``CreateTask``, ``CloseRoom`` ...)."""
        try:
            return _BY_CLASS_NAME[name]
        except KeyError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


#: the most keys a decision may say it rests on (the most a read token holds: ``read_set.MAX_READ_SET``)
MAX_READS = 256


class AgentDecision(Model):
    """What the agent decided (``NO_ACTION`` is a legal outcome) and the effects it wants."""

    decision: Decision
    effects: list[Effect] = Field(default_factory=list, max_length=64)
    reason: str | None = Field(default=None, max_length=4000)
    #: The state keys of the projection this decision rests on: its effects commit only while each is still
    #: at the version the projection showed (``stale_read`` -> a ``conflict`` receipt otherwise). ``None``
    #: (the default): every key the projection showed, the safe choice for an agent that cannot say what it
    #: used; ``[]``: none (each effect is still checked against its own ``expected_version``). A key the
    #: projection did not show is refused (``InvalidInput`` on ``decision.reads``).
    reads: list[StateKey] | None = Field(default=None, max_length=MAX_READS)

    @field_validator("effects", mode="before")
    @classmethod
    def _upgrade(cls, value: Any) -> Any:
        return [upgrade_effect(e) for e in value] if isinstance(value, list) else value

    @model_serializer(mode="wrap")
    def _spelling(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without ``reads`` when it is not given: a decision is recorded (and shown) as it was before."""
        dumped: dict[str, Any] = handler(self)
        if dumped.get("reads", ()) is None:
            del dumped["reads"]
        return dumped


class AgentAdapter(Protocol):
    """Decides for a wake. An adapter may say ``record_first = False`` (default ``True``): asking it again
    for the same wake costs nothing and nothing outside the world remembers the first answer, so the worker
    records its decision in the transaction that commits the decision's effects instead of in a commit of its
    own before them (one transaction fewer a cycle; after a crash before that commit the agent is asked
    again). An LLM (cost, a possibly different answer) and a human's queue (an instruction taken) keep it."""

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision: ...


Rule = Callable[[Agent, WorldView, Wake], AgentDecision | None]


class RuleAgent:
    """A scripted agent: the first rule that returns a decision wins; none matching means NO_ACTION.

    Rules are functions of (agent, view, wake), so by default the agent may be asked again after a crash
    (``record_first = False``, :class:`AgentAdapter`); rules that remember their calls, or must not run twice
    for a wake, pass ``record_first=True``."""

    def __init__(self, rules: Sequence[Rule], *, record_first: bool = False) -> None:
        self.rules = list(rules)
        self.record_first = record_first

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
    "EFFECTS",
    "LEGACY_EFFECT_NAMES",
    "MAX_READS",
    "AcceptHandoff",
    "AgentAdapter",
    "AgentDecision",
    "AgentEffect",
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
    "RegisterArtifact",
    "ReviewMemory",
    "ReviseArtifact",
    "RuleAgent",
    "SetState",
    "StoreMemory",
    "Subscribe",
    "upgrade_effect",
]
