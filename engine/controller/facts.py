"""What the controller's rules match on: the fact kinds, their fields, and the event fact.

Every fact is a flat JSON object with an explicit ``id`` (unique in its world), a ``kind`` and a ``key``
(the join key: rules join on ``key`` and other fields, never on ``id``, which durable_rules reserves).

* **World facts** mirror SQL rows and are supplied by the caller (rebuilt from SQL on start, kept in step
  with ``observe(..., upserts=, retracts=)``): ``task``, ``subscription``, ``member``, ``room``,
  ``handoff``, ``reviewer``, ``claim``, ``edge``, ``context``.
* **Controller facts** are written by the rules' actions and reported with each step so the caller can
  store them: ``woken`` (per-chain dedupe), ``cooldown`` (with the wake it follows, possibly a deferred
  one), ``budget``, ``contest``, ``conflict_room``.
  Those with an ``until`` (logical microseconds) are dead once ``until <= now``; rules compare ``until``
  and the controller retracts expired ones lazily.
* **Transient facts** live only during one call: ``event`` (the observed World event) and
  ``wake_candidate`` (a proposed wake, posted by targeting actions and consumed by the storm rules).

**Decision events** (``DECISION_EVENTS``: a conflict resolved, a review done) change what the controller
decides, so the controller checks them as its input, independently of the policy that let them into the
log: each must carry the appender's workspace role as the runtime recorded it (payload ``actor_role``)
and that role must be one the table allows for the type. A decision event that fails is **ignored as a
fact**: its event fact has ``type: refused``, the original type in ``refused`` and the reason in
``reason``, and no payload fields, so no rule keyed on the type (or its payload) fires; the world facts
it would have changed stay (:func:`decision_refusal`, used by ``engine.runloop.world_facts`` too).

Values are JSON scalars (string, integer, float, boolean); absent optional fields are left out, so a rule
tests them with ``exists``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.errors import InvalidInput
from engine.models.common import ID_PATTERN
from engine.policy.model import ACTOR_ROLE_FIELD, DECISION_EVENTS

log = logging.getLogger("pmw.controller")

Scalar = str | int | float | bool
Fact = dict[str, Any]

FACT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-/~]{0,255}$"
_FACT_ID = re.compile(FACT_ID_PATTERN)
_PAYLOAD_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_PAYLOAD_FIELDS = 100  # durable_rules stores at most 255 properties per message


class FactModel(BaseModel):
    """Base of the fact kinds: flat, strict about unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=FACT_ID_PATTERN)
    key: str = Field(min_length=1, max_length=256)


# -- world facts (mirrors of SQL rows) -----------------------------------------------------------------

class TaskFact(FactModel):
    kind: Literal["task"]
    owner: str | None = None
    status: str | None = None


class SubscriptionFact(FactModel):
    """``agent`` follows the subject ``key`` (a task, state key, room ...)."""

    kind: Literal["subscription"]
    agent: str


class MemberFact(FactModel):
    """``agent`` is a member of room ``key``."""

    kind: Literal["member"]
    agent: str


class RoomFact(FactModel):
    kind: Literal["room"]
    status: str | None = None
    topic: str | None = None


class HandoffFact(FactModel):
    kind: Literal["handoff"]
    task: str | None = None
    source: str | None = None
    target: str | None = None
    status: str | None = None


class ReviewerFact(FactModel):
    """``agent`` reviews ``scope`` (e.g. ``memory``)."""

    kind: Literal["reviewer"]
    agent: str
    scope: str


class ClaimFact(FactModel):
    """``agent`` claims ``value`` for term ``key``; ``claim`` is the claim's id (e.g. a state entry)."""

    kind: Literal["claim"]
    agent: str
    value: Scalar
    claim: str


class EdgeFact(FactModel):
    """A topology edge ``src`` -> ``dst`` of ``edge_type`` (info, control, authority, memory, room)."""

    kind: Literal["edge"]
    src: str
    dst: str
    edge_type: str


class ContextFact(FactModel):
    """``agent``'s working context (its last rehydrated projection) is valid until ``valid_until``."""

    kind: Literal["context"]
    agent: str
    valid_until: int


# -- controller facts (written by actions) -------------------------------------------------------------

class WokenFact(FactModel):
    """Chain ``chain`` woke ``agent``; remembered until ``until`` (per-chain dedupe)."""

    kind: Literal["woken"]
    chain: str
    agent: str
    until: int


class CooldownFact(FactModel):
    """``agent`` is not woken again before ``until``. The cooldown follows the wake with idempotency key
    ``wake_key`` that runs at ``wake_at``: a direct wake (``wake_at`` = its decision time, ``deferrals`` 0) or
    a deferred one (``wake_at`` = when it falls due, ``deferrals`` = how many deferrals in a row led to it).
    Facts stored before deferral existed carry only ``agent`` and ``until``: read with the defaults."""

    kind: Literal["cooldown"]
    agent: str
    until: int
    wake_at: int = 0
    deferrals: int = Field(default=0, ge=0)
    wake_key: str | None = None


class BudgetFact(FactModel):
    """``agent`` was woken ``used`` times in the window that ends at ``until``."""

    kind: Literal["budget"]
    agent: str
    used: int
    until: int


class ContestFact(FactModel):
    """Term ``key`` is contested between agents ``a`` and ``b``."""

    kind: Literal["contest"]
    a: str
    b: str
    status: str
    needs_decision: bool


class ConflictRoomFact(FactModel):
    """The controller proposed room ``room`` for the contest on term ``key``."""

    kind: Literal["conflict_room"]
    room: str
    a: str
    b: str


# -- transient facts -----------------------------------------------------------------------------------

class EventFact(FactModel):
    """An observed World event (``payload.<name>`` fields carry the payload's scalar values)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: Literal["event"]
    seq: int
    type: str
    actor: str
    subject: str
    subject_kind: str
    chain: str
    cause: str | None = None
    depth: int
    origin: int
    now: int
    refused: str | None = None  # a decision event the controller ignores: its type (``type`` is "refused")
    reason: str | None = None   # ... and why


class WakeCandidateFact(FactModel):
    """A proposed wake of ``target`` (``key`` is its idempotency key), judged by the storm rules."""

    kind: Literal["wake_candidate"]
    seq: int
    target: str
    cause: str
    source: str
    chain: str
    depth: int
    origin: int
    now: int
    age: int
    rule: str


WORLD_KINDS: dict[str, type[FactModel]] = {
    "task": TaskFact, "subscription": SubscriptionFact, "member": MemberFact, "room": RoomFact,
    "handoff": HandoffFact, "reviewer": ReviewerFact, "claim": ClaimFact, "edge": EdgeFact,
    "context": ContextFact,
}
CONTROLLER_KINDS: dict[str, type[FactModel]] = {
    "woken": WokenFact, "cooldown": CooldownFact, "budget": BudgetFact, "contest": ContestFact,
    "conflict_room": ConflictRoomFact,
}
TRANSIENT_KINDS: dict[str, type[FactModel]] = {"event": EventFact, "wake_candidate": WakeCandidateFact}
ALL_KINDS: dict[str, type[FactModel]] = {**WORLD_KINDS, **CONTROLLER_KINDS, **TRANSIENT_KINDS}
STORED_KINDS = frozenset(WORLD_KINDS) | frozenset(CONTROLLER_KINDS)
EXPIRING_KINDS = frozenset(k for k, m in CONTROLLER_KINDS.items() if "until" in m.model_fields)


def kind_fields(kind: str) -> frozenset[str] | None:
    """The fields a rule may test on facts of ``kind`` (``None``: unknown kind). ``id`` is never one."""
    model = ALL_KINDS.get(kind)
    if model is None:
        return None
    return frozenset(model.model_fields) - {"id"}


def field_allowed(kind: str, field: str) -> bool:
    """Whether a rule may test ``field`` on a fact of ``kind``; events also accept ``payload.<name>``."""
    fields = kind_fields(kind)
    if fields is None:
        return False
    if field in fields:
        return True
    return kind == "event" and field.startswith("payload.") and bool(_PAYLOAD_FIELD.match(field[8:]))


def validate_fact(fact: Mapping[str, Any]) -> Fact:
    """A caller-supplied world or controller fact, checked against its kind (``InvalidInput`` if bad).
    Returns a plain dict without ``None`` values."""
    kind = fact.get("kind")
    model = (WORLD_KINDS.get(kind) or CONTROLLER_KINDS.get(kind)) if isinstance(kind, str) else None
    if model is None:
        known = ", ".join(sorted(STORED_KINDS))
        raise InvalidInput("fact.kind", f"unknown fact kind {kind!r} (known: {known})")
    try:
        checked = model.model_validate(dict(fact))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "fact"
        raise InvalidInput(f"fact.{where}", f"{first['msg']} (fact {fact.get('id')!r})") from exc
    return checked.model_dump(exclude_none=True)


def fact_hash(fact_id: str) -> int:
    """durable_rules' message identity: 32-bit FNV-1a over the id's bytes, each byte taken as a C
    ``char`` (signed on x86, so bytes >= 0x80 are sign-extended before the xor)."""
    h = 0x811C9DC5
    data = fact_id.encode()
    if data.isascii():
        for byte in data:
            h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
        return h
    for byte in data:
        h ^= byte if byte < 0x80 else (byte - 0x100) & 0xFFFFFFFF
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


# -- the observed event --------------------------------------------------------------------------------

class ObservedEvent(BaseModel):
    """A World event as the controller reads it. Extra World fields are ignored.

    ``cascade_depth`` and ``chain_origin_us`` are added by the run loop: the depth of the wake the actor
    was serving plus one (0 when the event was not caused by a wake), and the time the chain began."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    seq: int = Field(ge=1)
    event_id: str | None = None
    event_type: str = Field(min_length=1, max_length=200)
    actor_id: str = Field(pattern=ID_PATTERN)
    subject_kind: str = Field(min_length=1, max_length=200)
    subject_id: str = Field(min_length=1, max_length=256)
    payload: dict[str, Any] = Field(default_factory=dict)
    causation_id: str | None = None
    correlation_id: str | None = None
    created_at_us: int = Field(ge=0)
    cascade_depth: int = Field(default=0, ge=0)
    chain_origin_us: int | None = Field(default=None, ge=0)

    @property
    def chain(self) -> str:
        """The wake chain: the correlation id, else the event itself."""
        return self.correlation_id or self.event_id or f"seq:{self.seq}"

    @property
    def origin(self) -> int:
        return self.created_at_us if self.chain_origin_us is None else self.chain_origin_us


def read_event(event: Mapping[str, Any]) -> ObservedEvent:
    """Validate an event dict (``InvalidInput`` naming the field if it is not usable)."""
    try:
        return ObservedEvent.model_validate(event)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "event"
        raise InvalidInput(f"event.{where}", str(first["msg"])) from exc


def decision_refusal(event_type: str, actor: str, payload: Mapping[str, Any]) -> str | None:
    """Why the controller must ignore this event as a decision (``None``: it is no decision event, or one
    appended by a role the table allows for its type)."""
    allowed = DECISION_EVENTS.get(event_type)
    if allowed is None:
        return None
    role = payload.get(ACTOR_ROLE_FIELD)
    if not isinstance(role, str) or not role:
        return f"{event_type} by {actor} carries no role recorded by the runtime"
    if role not in allowed:
        return f"{event_type} by {actor} (role {role}): only {', '.join(sorted(allowed))} may decide it"
    return None


def event_fact(event: ObservedEvent) -> Fact:
    """The transient ``event`` fact: normalised fields plus the payload's scalar top-level values as
    ``payload.<name>`` (other values, and names that are not identifiers, are left out). A decision event
    that :func:`decision_refusal` refuses becomes ``type: refused`` with ``refused`` (its type) and
    ``reason``, and carries no payload fields: it is ignored as a decision."""
    refusal = decision_refusal(event.event_type, event.actor_id, event.payload)
    fact: Fact = {
        "id": f"ev:{event.seq}", "kind": "event", "key": event.subject_id, "seq": event.seq,
        "type": event.event_type, "actor": event.actor_id, "subject": event.subject_id,
        "subject_kind": event.subject_kind, "chain": event.chain, "depth": event.cascade_depth,
        "origin": event.origin, "now": event.created_at_us,
    }
    if event.causation_id is not None:
        fact["cause"] = event.causation_id
    if refusal is not None:
        log.warning("controller ignores event %s as a decision: %s", event.seq, refusal)
        fact.update(type="refused", refused=event.event_type, reason=refusal)
        return fact
    added = 0
    for name, value in event.payload.items():
        if added == MAX_PAYLOAD_FIELDS:
            break
        if isinstance(value, str | int | float | bool) and _PAYLOAD_FIELD.match(name):
            fact[f"payload.{name}"] = value
            added += 1
    return fact


__all__ = [
    "ALL_KINDS",
    "CONTROLLER_KINDS",
    "EXPIRING_KINDS",
    "STORED_KINDS",
    "TRANSIENT_KINDS",
    "WORLD_KINDS",
    "Fact",
    "FactModel",
    "ObservedEvent",
    "Scalar",
    "decision_refusal",
    "event_fact",
    "fact_hash",
    "field_allowed",
    "kind_fields",
    "read_event",
    "validate_fact",
]
