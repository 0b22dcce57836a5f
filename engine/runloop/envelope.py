"""The decision envelope (seed 003 §2, §8-9, §35; issue 16 item 1): what an agent's decision says besides its
effects, and how the worker carries each outcome out.

An adapter's decision is a :class:`DecisionEnvelope`: its ``outcome`` (``execute | draft | defer | refuse |
escalate | idle | cancel``), its ``actions`` (the effects: registry commands tagged ``effect``, as before),
and what the runtime derives and checks from them (:func:`lower`): each action's side-effect class (from its
action contract where it names one: ``begin_action``; the class it declares: ``invoke``; S1, a reversible
local write, for any other world write), the approval state, the evidence level and the recovery path.

Backward compatible: today's decision JSON (``decision``, ``effects``, ``reason``; an ``AgentDecision``) is
an envelope without an ``outcome``, carried out exactly as before (``execute``), recorded in the same
spelling, with the same receipt.

Each outcome becomes writes of the World, made as the agent, through the PDP and the gateway, planned in the
wake's one batch with its receipt (all or nothing, as every cycle's effects are):

- **execute**: the actions; receipt ``acted`` (``no_action`` without actions).
- **draft**: the draft writes (``actions``: only ``store_memory``, ``propose_memory``, ``register_artifact``,
  ``new_artifact_version``; no external side effect) and the approval request (``approval``: the exact
  action a governor is asked to approve, ``request_approval``); receipt ``drafted`` with the approval id.
- **defer**: a continuation wake for the same agent (``enqueue_wake``, so the agent needs ``wake.enqueue``),
  due at ``defer.not_before_us`` (or ``defer.delay_s`` from now), keyed ``defer:<wake id>``, its payload the
  wake's plus ``deferred`` (``reason: agent``, ``detail``, ``until_us``, ``deferrals``, ``from_wake``);
  receipt ``deferred``, its ``next_wake`` the new wake. At most :data:`MAX_DEFERRALS` in a row.
- **escalate**: a handoff (``create_handoff``) of ``escalate.task_id`` (else the wake's ``payload.task_id``,
  else a task ``esc-<wake id>`` created for it, ``create_task``) to ``escalate.to_agent`` or to the first
  active agent holding ``escalate.to_role``, with the packet (goal, refs, constraints plus ``escalation``);
  receipt ``escalated``. The handoff wakes its target (the controller's ``wake_handoff_target`` rule).
- **refuse** (a reason is required), **idle**, **cancel**: no write but the receipt: ``refused``, ``idle``,
  ``cancelled``.

A denied, conflicting or failing write commits nothing of the cycle: the receipt is ``denied``, ``conflict``
or ``failed`` as for any effect, and its ``payload.envelope`` still says what was asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator

from engine.commands.approvals import RequestApproval
from engine.commands.wakes import EnqueueWake
from engine.contracts.model import ActionContract, EvidenceLevel
from engine.errors import InvalidInput, NotFound
from engine.models.common import Id, Model, Payload, Refs, TimeUs
from engine.models.receipts import Decision, Outcome
from engine.models.state import StateKey
from engine.models.wakes import Wake
from engine.protocol.adapters import EFFECTS, MAX_READS, AgentDecision, AgentEffect, Effect, upgrade_effect
from engine.validation import invalid_from
from store import Reader

MAX_ACTIONS = 64
MAX_DEFER_S = 30 * 86400.0
MAX_DEFERRALS = 20
MAX_REASON_CHARS = 4000
#: The effects a draft may write: memory and artifacts of the agent's own, no external side effect.
DRAFT_EFFECTS = frozenset({"store_memory", "propose_memory", "register_artifact", "new_artifact_version"})


class EnvelopeOutcome(StrEnum):
    """Seed 003 §9: what the runtime does with the decision."""

    EXECUTE = "execute"
    DRAFT = "draft"
    DEFER = "defer"
    REFUSE = "refuse"
    ESCALATE = "escalate"
    IDLE = "idle"
    CANCEL = "cancel"


class ApprovalState(StrEnum):
    """Seed 003 §35 ``approval_state``: none needed, needed and missing (the World will refuse the action),
    attached (an action spends an approval it names), or requested (a draft asks for one)."""

    NOT_REQUIRED = "not_required"
    REQUIRED = "required"
    ATTACHED = "attached"
    REQUESTED = "requested"


#: The receipt outcome of each envelope outcome carried out (execute: acted, or no_action).
RECEIPT_OUTCOME: Mapping[EnvelopeOutcome, Outcome] = {
    EnvelopeOutcome.DRAFT: Outcome.DRAFTED, EnvelopeOutcome.DEFER: Outcome.DEFERRED,
    EnvelopeOutcome.REFUSE: Outcome.REFUSED, EnvelopeOutcome.ESCALATE: Outcome.ESCALATED,
    EnvelopeOutcome.IDLE: Outcome.IDLE, EnvelopeOutcome.CANCEL: Outcome.CANCELLED,
}
#: The receipt's ``decision`` when the envelope names none.
DEFAULT_DECISION: Mapping[EnvelopeOutcome, Decision] = {
    EnvelopeOutcome.EXECUTE: Decision.ACT, EnvelopeOutcome.DRAFT: Decision.REQUEST,
    EnvelopeOutcome.ESCALATE: Decision.HANDOFF,
}


class Deferral(Model):
    """Not now: when to run again (``not_before_us``, world time, or ``delay_s`` from now) and why."""

    reason: str = Field(min_length=1, max_length=MAX_REASON_CHARS)
    not_before_us: TimeUs | None = None
    delay_s: float | None = Field(default=None, gt=0, le=MAX_DEFER_S)

    @model_validator(mode="after")
    def _one_time(self) -> Deferral:
        if (self.not_before_us is None) == (self.delay_s is None):
            raise ValueError("give not_before_us or delay_s (one of them)")
        return self


class Escalation(Model):
    """To a human or a higher authority, with the packet (seed 003 §18: pointers, never a transcript)."""

    to_agent: Id | None = None
    to_role: Id | None = None
    task_id: Id | None = None
    goal: str = Field(min_length=1, max_length=MAX_REASON_CHARS)
    current_state_ref: str | None = Field(default=None, max_length=256)
    evidence_refs: Refs = Field(default_factory=list)
    artifact_refs: Refs = Field(default_factory=list)
    constraints: Payload = Field(default_factory=dict)
    expected_output: str | None = Field(default=None, max_length=MAX_REASON_CHARS)

    @model_validator(mode="after")
    def _one_target(self) -> Escalation:
        if (self.to_agent is None) == (self.to_role is None):
            raise ValueError("give to_agent or to_role (one of them)")
        return self


_FIELDS_OF: Mapping[str, EnvelopeOutcome] = {"approval": EnvelopeOutcome.DRAFT, "defer": EnvelopeOutcome.DEFER,
                                             "escalate": EnvelopeOutcome.ESCALATE}


class DecisionEnvelope(Model):
    """An agent's decision (seed 003 §35). ``outcome`` absent and none of the envelope's own fields given:
    today's decision (``execute``), kept in today's spelling."""

    outcome: EnvelopeOutcome | None = None
    decision: Decision | None = None
    actions: list[Effect] = Field(default_factory=list, max_length=MAX_ACTIONS,
                                  validation_alias=AliasChoices("actions", "effects"))
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    reads: list[StateKey] | None = Field(default=None, max_length=MAX_READS, description=(
        "The state keys of the projection the decision rests on (AgentDecision.reads); absent: all shown."))
    approval_state: ApprovalState | None = Field(default=None, description=(
        "What the agent believes; checked against what the runtime derives (a mismatch is refused)."))
    evidence: EvidenceLevel | None = Field(default=None, description=(
        "The least evidence the agent asks for; the receipt's level is the higher of it and the derived one."))
    recovery: str | None = Field(default=None, max_length=2000, description="The agent's recovery path, in words.")
    approval: RequestApproval | None = None
    defer: Deferral | None = None
    escalate: Escalation | None = None

    @field_validator("actions", mode="before")
    @classmethod
    def _upgrade(cls, value: Any) -> Any:
        return [upgrade_effect(e) for e in value] if isinstance(value, list) else value

    @property
    def effective(self) -> EnvelopeOutcome:
        return self.outcome or EnvelopeOutcome.EXECUTE

    @property
    def legacy(self) -> bool:
        """Today's decision: no outcome and none of the envelope's own fields."""
        return self.outcome is None and not (self.model_fields_set - {"decision", "actions", "reason", "reads"})

    @model_validator(mode="after")
    def _consistent(self) -> DecisionEnvelope:
        out = self.effective
        if self.legacy and self.decision is None:
            raise ValueError("a decision needs its decision (or an outcome)")
        for name, owner in _FIELDS_OF.items():
            if getattr(self, name) is not None and out is not owner:
                raise ValueError(f"{name} belongs to outcome {owner.value}, not {out.value}")
        if out is not EnvelopeOutcome.EXECUTE and out is not EnvelopeOutcome.DRAFT and self.actions:
            raise ValueError(f"outcome {out.value} takes no actions")
        if out is EnvelopeOutcome.DRAFT:
            if self.approval is None:
                raise ValueError("a draft names the approval it asks for (approval)")
            if not self.actions:
                raise ValueError("a draft writes at least one draft (actions)")
            if bad := sorted({a.effect for a in self.actions} - DRAFT_EFFECTS):
                raise ValueError(f"a draft writes only memory or artifacts, not {', '.join(bad)}")
        if out is EnvelopeOutcome.DEFER and self.defer is None:
            raise ValueError("a deferral says when and why (defer)")
        if out is EnvelopeOutcome.ESCALATE and self.escalate is None:
            raise ValueError("an escalation names its target and goal (escalate)")
        if out is EnvelopeOutcome.REFUSE and not self.reason:
            raise ValueError("a refusal gives its reason")
        return self

    def receipt_decision(self) -> Decision:
        """The receipt's ``decision``: the one given, else the outcome's."""
        if self.decision is not None:
            return self.decision
        if self.effective is EnvelopeOutcome.EXECUTE and not self.actions:
            return Decision.NO_ACTION
        return DEFAULT_DECISION.get(self.effective, Decision.NO_ACTION)

    def as_agent_decision(self) -> AgentDecision:
        """Today's decision this envelope is (for a legacy one: exactly what the adapter said)."""
        said: dict[str, Any] = {"decision": self.receipt_decision().value, "reason": self.reason,
                                "effects": [a.model_dump(mode="json") for a in self.actions]}
        if self.reads is not None:
            said["reads"] = self.reads
        return AgentDecision.model_validate(said)

    def recorded(self) -> dict[str, Any]:
        """What the worker records before any effect: today's spelling for a legacy decision, else the whole
        envelope (its actions under ``actions``)."""
        if self.legacy:
            return self.as_agent_decision().model_dump(mode="json")
        return self.model_dump(mode="json", exclude_none=True)


def parse(value: object) -> DecisionEnvelope:
    """An adapter's answer (or a recorded decision) as an envelope: a :class:`DecisionEnvelope`, an
    ``AgentDecision`` (today's), or their JSON. Anything else, or an invalid one, is ``InvalidInput``."""
    if isinstance(value, DecisionEnvelope):
        return value
    if isinstance(value, AgentDecision):
        value = value.model_dump(mode="json")
    if not isinstance(value, Mapping):
        raise InvalidInput("decision", f"an adapter returns a decision, not {type(value).__name__}")
    try:
        return DecisionEnvelope.model_validate(dict(value))
    except ValidationError as exc:
        raise invalid_from(exc, "decision") from exc


# -- lowering: what the worker writes for an envelope ---------------------------------------------------


class DeferWakeEffect(EnqueueWake, AgentEffect):
    """The continuation wake of a deferral, as an effect the worker carries out (never an agent's own:
    ``enqueue_wake`` is not in the agent effect vocabulary, the worker writes it for a ``defer``)."""

    effect: Literal["enqueue_wake"] = "enqueue_wake"


DeferWakeEffect.__command__ = EnqueueWake


_RANK = {EvidenceLevel.E0: 0, EvidenceLevel.E1: 1, EvidenceLevel.E2: 2, EvidenceLevel.E3: 3}
_LEVELS = sorted(_RANK, key=_RANK.__getitem__)


def _at_least(*levels: EvidenceLevel) -> EvidenceLevel:
    return _LEVELS[max(_RANK[level] for level in levels)]


@dataclass
class ActionClass:
    """One action of an envelope as its receipt lists it."""

    effect: str
    side_effect: str
    contract: str | None = None
    evidence: EvidenceLevel = EvidenceLevel.E1
    compensation: str | None = None
    needs_approval: bool = False
    approval_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"effect": self.effect, "side_effect": self.side_effect}
        if self.contract is not None:
            out.update(contract=self.contract, compensation=self.compensation)
        if self.needs_approval:
            out["approval_id"] = self.approval_id
        return out


Contracts = Mapping[str, ActionContract]


def classify(effect: AgentEffect, contracts: Contracts) -> ActionClass:
    """An action's side-effect class, evidence level, compensation and approval need: its contract's for a
    ``begin_action`` (a contracted action; unknown: ``InvalidInput``), the declared class of an ``invoke``
    (S3 needs an approval), S1 for any other world write (versioned, reversible, local)."""
    name = effect.effect
    if name == "begin_action":
        action = str(getattr(effect, "action", ""))
        contract = contracts.get(action)
        if contract is None:
            raise InvalidInput("actions.action", f"{action!r} has no action contract")
        return ActionClass(name, contract.side_effect.value, action, contract.evidence,
                           contract.compensation.kind.value, contract.needs_approval,
                           getattr(effect, "approval_id", None))
    if name == "invoke":
        cls = str(getattr(effect, "side_effect", "S0"))
        evidence = {"S3": EvidenceLevel.E3, "S2": EvidenceLevel.E2}.get(cls, EvidenceLevel.E1)
        return ActionClass(name, cls, evidence=evidence, needs_approval=cls == "S3",
                           approval_id=getattr(effect, "approval_id", None))
    return ActionClass(name, "S1")


@dataclass
class Lowered:
    """What the worker carries out for an envelope: the writes (in order, op ids ``<wake>:<n>``), the
    receipt's decision and outcome on success, what each write is (``roles``), and the receipt's account."""

    writes: list[AgentEffect]
    decision: Decision
    outcome: Outcome | None  # None: execute (acted, or no_action without writes)
    roles: dict[int, str] = field(default_factory=dict)  # write index -> draft, approval, task, handoff, next_wake
    summary: dict[str, Any] = field(default_factory=dict)

    def agent_decision(self, reason: str | None, reads: list[str] | None = None) -> AgentDecision:
        """The decision the protocol carries out (its writes are the envelope's: not an agent's JSON), resting
        on ``reads`` (the envelope's)."""
        idle = not self.writes or (self.outcome is None and self.decision is Decision.NO_ACTION)  # as before
        return AgentDecision.model_construct(decision=Decision.NO_ACTION if idle else Decision.ACT,
                                             effects=self.writes, reason=reason, reads=reads)


def lower(env: DecisionEnvelope, wake: Wake, agent_id: str, now_us: int, contracts: Contracts,
          read: Reader) -> Lowered:
    """The writes, receipt outcome and account of ``env`` for ``wake`` of ``agent_id`` at ``now_us``. Refuses
    (``InvalidInput``, nothing written) a declared approval state the actions contradict, a deferral not in
    the future or beyond :data:`MAX_DEFERRALS`, an escalation to a role nobody holds."""
    out = env.effective
    classes = [classify(a, contracts) for a in env.actions]
    needing = [c for c in classes if c.needs_approval]
    if out is EnvelopeOutcome.DRAFT:
        approval = ApprovalState.REQUESTED
    elif needing:
        approval = ApprovalState.ATTACHED if all(c.approval_id for c in needing) else ApprovalState.REQUIRED
    else:
        approval = ApprovalState.NOT_REQUIRED
    if env.approval_state is not None and env.approval_state is not approval:
        raise InvalidInput("decision.approval_state", f"declared {env.approval_state.value}, but the actions "
                                                      f"make it {approval.value}")
    floor = EvidenceLevel.E2 if out in (EnvelopeOutcome.DRAFT, EnvelopeOutcome.ESCALATE) else EvidenceLevel.E1
    evidence = _at_least(floor, *(c.evidence for c in classes), *([env.evidence] if env.evidence else []),
                         *([EvidenceLevel.E3] if approval is ApprovalState.ATTACHED else []))
    compensations = sorted({c.compensation for c in classes if c.compensation})
    summary: dict[str, Any] = {
        "outcome": out.value, "actions": [c.as_json() for c in classes], "approval_state": approval.value,
        "evidence": evidence.value,
        "recovery": {"retry": "replay: the recorded decision, its writes answered by their operation ids",
                     "compensation": compensations or None, "declared": env.recovery},
    }
    writes: list[AgentEffect] = list(env.actions)
    roles: dict[int, str] = {}
    if out is EnvelopeOutcome.DRAFT and env.approval is not None:
        roles = dict.fromkeys(range(len(writes)), "draft")
        roles[len(writes)] = "approval"
        writes.append(EFFECTS["request_approval"].model_validate(
            {**env.approval.model_dump(mode="json", exclude_none=True), "effect": "request_approval"}))
    elif out is EnvelopeOutcome.DEFER and env.defer is not None:
        writes, roles = [_continuation(env.defer, wake, agent_id, now_us, summary)], {0: "next_wake"}
    elif out is EnvelopeOutcome.ESCALATE and env.escalate is not None:
        writes, roles = _escalation(env.escalate, env.reason, wake, agent_id, read, summary)
    return Lowered(writes=writes, decision=env.receipt_decision(), outcome=RECEIPT_OUTCOME.get(out),
                   roles=roles, summary=summary)


def _continuation(d: Deferral, wake: Wake, agent_id: str, now_us: int, summary: dict[str, Any]) -> AgentEffect:
    until = d.not_before_us if d.not_before_us is not None else now_us + round((d.delay_s or 0) * 1_000_000)
    if until <= now_us:
        raise InvalidInput("decision.defer.not_before_us", f"{until} is not after now ({now_us})")
    before = wake.payload.get("deferred")
    count = int(before.get("deferrals", 0)) if isinstance(before, dict) and before.get("reason") == "agent" else 0
    if count >= MAX_DEFERRALS:
        raise InvalidInput("decision.defer", f"deferred {count} times in a row already (at most {MAX_DEFERRALS})")
    deferred = {"reason": "agent", "detail": d.reason, "until_us": until, "deferrals": count + 1,
                "from_wake": wake.wake_id}
    summary["defer"] = {"until_us": until, "reason": d.reason, "deferrals": count + 1}
    return DeferWakeEffect.model_validate({
        "effect": "enqueue_wake", "target_agent": agent_id, "cause": wake.cause,
        "idempotency_key": f"defer:{wake.wake_id}", "not_before_us": until, "priority": wake.priority,
        "payload": {**wake.payload, "deferred": deferred}, "payload_refs": list(wake.payload_refs),
        "base_state_version": wake.base_state_version, "authority_scope": dict(wake.authority_scope),
        "cause_event_id": wake.cause_event_id})


def _escalation(e: Escalation, reason: str | None, wake: Wake, agent_id: str, read: Reader,
                summary: dict[str, Any]) -> tuple[list[AgentEffect], dict[int, str]]:
    target = e.to_agent or _holder_of(e.to_role or "", agent_id, read)
    writes: list[AgentEffect] = []
    roles: dict[int, str] = {}
    task_id = e.task_id or (wake.payload.get("task_id") if isinstance(wake.payload.get("task_id"), str) else None)
    if task_id is None:
        task_id = f"esc-{wake.wake_id}"
        roles[0] = "task"
        writes.append(EFFECTS["create_task"].model_validate(
            {"effect": "create_task", "task_id": task_id, "goal": e.goal}))
    roles[len(writes)] = "handoff"
    writes.append(EFFECTS["create_handoff"].model_validate({
        "effect": "create_handoff", "target_agent": target, "task_id": task_id, "goal": e.goal,
        "current_state_ref": e.current_state_ref, "evidence_refs": e.evidence_refs,
        "artifact_refs": e.artifact_refs, "expected_output": e.expected_output, "return_route": agent_id,
        "constraints": {**e.constraints, "escalation": {"from_wake": wake.wake_id, "from_agent": agent_id,
                                                        "reason": reason, "to_role": e.to_role}}}))
    summary["escalate"] = {"to_agent": target, "to_role": e.to_role, "task_id": task_id}
    return writes, roles


def _holder_of(role: str, agent_id: str, read: Reader) -> str:
    """The first active agent (by id) whose workspace role is ``role``, other than ``agent_id``."""
    rows = read.rows("agents", {"role_id": role}, order_by=("agent_id",), limit=1000)
    for row in rows:
        if row["status"] == "active" and row["agent_id"] != agent_id:
            return str(row["agent_id"])
    raise InvalidInput("decision.escalate.to_role", f"no active agent holds role {role!r}")


def contracts_of(get: Any, agent_id: str, env: DecisionEnvelope) -> dict[str, ActionContract]:
    """The contracts the envelope's ``begin_action`` actions name, through ``get(actor, action)`` (the World's
    ``action_contract``); an action without one is left out (:func:`classify` refuses it)."""
    found: dict[str, ActionContract] = {}
    for a in env.actions:
        if a.effect == "begin_action":
            name = str(getattr(a, "action", ""))
            with suppress(NotFound):
                found[name] = get(agent_id, name)
    return found


__all__ = ["DEFAULT_DECISION", "DRAFT_EFFECTS", "MAX_DEFERRALS", "RECEIPT_OUTCOME", "ActionClass", "ApprovalState",
           "DecisionEnvelope", "DeferWakeEffect", "Deferral", "EnvelopeOutcome", "Escalation", "Lowered",
           "classify", "contracts_of", "lower", "parse"]
