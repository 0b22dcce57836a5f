"""Approvals: a governor's consent to one S3 action, bound to (approver, action hash, scope, epoch, expiry)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from engine.models.common import Id, Model, TimeUs, Version
from engine.models.lifecycle import Lifecycle


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    CONSUMED = "consumed"


APPROVAL_LIFECYCLE = Lifecycle("approval", {
    "approve": ({ApprovalStatus.PENDING}, ApprovalStatus.APPROVED),
    "reject": ({ApprovalStatus.PENDING}, ApprovalStatus.REJECTED),
    "consume": ({ApprovalStatus.APPROVED}, ApprovalStatus.CONSUMED),
})


class Approval(Model):
    approval_id: Id
    requested_by: Id
    kind: str
    object_id: str
    action: str
    action_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    side_effect: str = Field(pattern=r"^S[0-3]$")
    status: ApprovalStatus
    approver: Id | None = None
    policy_epoch: str | None = None
    expires_at_us: TimeUs | None = None
    created_at_us: TimeUs
    updated_at_us: TimeUs
    version: Version


__all__ = ["APPROVAL_LIFECYCLE", "Approval", "ApprovalStatus"]
