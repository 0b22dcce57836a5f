"""The record of one contracted action: its status and its action receipt (seed 003 §26).

An attempt is ``pending`` from before its external effect is tried until it is settled ``done`` or
``failed``; ``unknown`` is what a status query answers for a key nothing was recorded under. The receipt
fields of §26 are on the record itself: ``attempt_id`` (receipt id), ``trace_id``, ``action``, ``actor``,
``capability``, ``policy_epoch`` (policy version), ``approval_id`` (approval ref), ``requested_at_us``,
``settled_at_us`` (executed at), ``output`` (result), ``external_ref`` (external effect ref),
``idempotency_key``, and ``receipt_hash``: the sha256 of the other fields' canonical JSON, set when settled.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any

import orjson
from pydantic import Field

from engine.contracts.model import CompensationKind, EvidenceLevel, SideEffectClass
from engine.models.common import Id, Model, Payload, TimeUs


class AttemptStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"
    UNKNOWN = "unknown"


class ActionAttempt(Model):
    """One action under one idempotency key, as recorded. ``resumed``: this answer came from an earlier
    record (not stored: set on the way out), so the caller must not assume it began the effect itself."""

    attempt_id: Id
    idempotency_key: Id
    action: str
    actor: Id
    capability: str
    status: AttemptStatus
    side_effect: SideEffectClass
    evidence: EvidenceLevel
    compensation: CompensationKind
    input: Payload = Field(default_factory=dict)
    input_hash: str
    output: Payload | None = None
    external_ref: str | None = None
    reason: str | None = None
    approval_id: Id | None = None
    task_id: Id | None = None
    step: Id | None = None
    trace_id: Id | None = None
    policy_epoch: str | None = None
    settled_by: Id | None = None
    requested_at_us: TimeUs
    settled_at_us: TimeUs | None = None
    receipt_hash: str | None = None
    resumed: bool = False


RECEIPT_FIELDS = ("attempt_id", "trace_id", "action", "actor", "capability", "policy_epoch", "approval_id",
                  "requested_at_us", "settled_at_us", "status", "output", "external_ref", "idempotency_key",
                  "input_hash", "side_effect", "evidence", "compensation", "settled_by", "task_id", "step")

#: The receipt fields each evidence level requires to be present (§27, §31 Evidence Completeness).
REQUIRED_EVIDENCE: dict[EvidenceLevel, tuple[str, ...]] = {
    EvidenceLevel.E0: ("attempt_id", "action", "status"),
    EvidenceLevel.E1: ("attempt_id", "action", "actor", "status", "requested_at_us", "settled_at_us"),
    EvidenceLevel.E2: ("attempt_id", "action", "actor", "status", "requested_at_us", "settled_at_us",
                       "capability", "policy_epoch", "idempotency_key", "receipt_hash"),
    EvidenceLevel.E3: ("attempt_id", "action", "actor", "status", "requested_at_us", "settled_at_us",
                       "capability", "policy_epoch", "idempotency_key", "receipt_hash", "approval_id"),
}


def receipt_hash(attempt: ActionAttempt) -> str:
    """The sha256 of the attempt's receipt fields (canonical, sorted JSON)."""
    body: dict[str, Any] = {f: v for f, v in attempt.model_dump(mode="json").items() if f in RECEIPT_FIELDS}
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def evidence_completeness(attempt: ActionAttempt) -> tuple[int, int]:
    """(required fields present, required fields) of ``attempt`` at its contract's evidence level."""
    required = REQUIRED_EVIDENCE[attempt.evidence]
    values = attempt.model_dump(mode="json")
    return sum(1 for f in required if values.get(f) not in (None, "")), len(required)


__all__ = ["REQUIRED_EVIDENCE", "ActionAttempt", "AttemptStatus", "evidence_completeness", "receipt_hash"]
