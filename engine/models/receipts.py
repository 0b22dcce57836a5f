"""Decision receipts: every wake ends in exactly one, silence included as a typed outcome."""

from __future__ import annotations

from pydantic import Field

from engine.models.common import Id, Model, Payload, Refs, TimeUs
from engine.models.enums import Decision, Outcome


class ReceiptBody(Model):
    """What a receipt says: the agent's decision and its typed outcome, with the versions it saw."""

    agent_id: Id
    decision: Decision
    outcome: Outcome
    wake_id: Id | None = None
    task_id: Id | None = None
    reason: str | None = Field(default=None, max_length=4000)
    observed_state_version: int | None = None
    topology_version: int | None = None
    base_state_version: int | None = None
    resulting_state_version: int | None = None
    action_refs: Refs = Field(default_factory=list)
    artifact_refs: Refs = Field(default_factory=list)
    next_wake: Id | None = None
    policy_epoch: str | None = Field(default=None, max_length=100)
    payload: Payload = Field(default_factory=dict)


class Receipt(ReceiptBody):
    receipt_id: Id
    created_at_us: TimeUs


__all__ = ["Decision", "Outcome", "Receipt", "ReceiptBody"]
