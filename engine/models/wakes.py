"""The wake queue: idempotent wake-ups with a not-before time, priority and a claim lease."""

from __future__ import annotations

from pydantic import Field

from engine.models.common import Id, Model, Payload, Priority, Refs, TimeUs, Version
from engine.models.enums import WakeStatus
from engine.models.lifecycle import Lifecycle

WAKE_LIFECYCLE = Lifecycle("wake", {
    "claim": ({WakeStatus.PENDING, WakeStatus.CLAIMED}, WakeStatus.CLAIMED),  # CLAIMED only once leased out
    "ack": ({WakeStatus.CLAIMED}, WakeStatus.ACKED),
    "cancel": ({WakeStatus.PENDING, WakeStatus.CLAIMED}, WakeStatus.CANCELLED),
})


class Wake(Model):
    wake_id: Id
    target_agent: Id
    cause: str = Field(min_length=1, max_length=200)
    cause_event_id: Id | None = None
    status: WakeStatus
    priority: Priority = 0
    not_before_us: TimeUs
    payload: Payload = Field(default_factory=dict)
    payload_refs: Refs = Field(default_factory=list)
    base_state_version: int | None = None
    authority_scope: Payload = Field(default_factory=dict)
    idempotency_key: str = Field(min_length=1, max_length=256)
    lease_owner: Id | None = None
    lease_until_us: TimeUs | None = None
    attempts: int = Field(ge=0)
    created_at_us: TimeUs
    updated_at_us: TimeUs
    version: Version


class EnqueueResult(Model):
    """The wake, and whether this call created it or found it by its idempotency key."""

    wake: Wake
    created: bool


__all__ = ["WAKE_LIFECYCLE", "EnqueueResult", "Wake", "WakeStatus"]
