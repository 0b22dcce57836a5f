"""Handoff packets: pointers and delta, never the transcript."""

from __future__ import annotations

from pydantic import Field

from engine.models.common import Id, Model, Payload, Refs, Text, TimeUs, Version
from engine.models.enums import HandoffStatus
from engine.models.lifecycle import Lifecycle

HANDOFF_LIFECYCLE = Lifecycle("handoff", {
    "accept": ({HandoffStatus.PENDING}, HandoffStatus.ACCEPTED),
    "reject": ({HandoffStatus.PENDING}, HandoffStatus.REJECTED),
    "complete": ({HandoffStatus.ACCEPTED}, HandoffStatus.COMPLETED),
})


class HandoffPacket(Model):
    """What a handoff carries: pointers and a delta, never the transcript."""

    target_agent: Id
    task_id: Id
    goal: Text
    current_state_ref: str | None = Field(default=None, max_length=256)
    evidence_refs: Refs = Field(default_factory=list)
    artifact_refs: Refs = Field(default_factory=list)
    constraints: Payload = Field(default_factory=dict)
    authority_scope: Payload = Field(default_factory=dict)
    expected_output: str | None = Field(default=None, max_length=4000)
    return_route: Id | None = None


class Handoff(HandoffPacket):
    handoff_id: Id
    source_agent: Id
    status: HandoffStatus
    result: Payload | None = None
    reason: str | None = Field(default=None, max_length=4000)
    created_at_us: TimeUs
    updated_at_us: TimeUs
    version: Version


__all__ = ["HANDOFF_LIFECYCLE", "Handoff", "HandoffPacket", "HandoffStatus"]
