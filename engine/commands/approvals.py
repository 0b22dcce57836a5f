"""Using capabilities, and approvals for S3 side effects (irreversible, external): a governor approves
one exact action (kind, object, action, payload) under one policy epoch until an expiry, and the
invocation it names spends it; or denies it for good."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.commands.base import Command
from engine.commands.fields import Id, Payload

MAX_KIND_CHARS = 50
MAX_OBJECT_ID_CHARS = 300
MAX_ACTION_CHARS = 50
MAX_APPROVAL_TTL_S = 7 * 86400.0
SIDE_EFFECT_PATTERN = r"^S[0-3]$"
# The kinds whose policy has an ``invoke`` action (engine.policy.model.ACTIONS; a test keeps them equal).
INVOKABLE_KINDS = ("state", "artifact", "memory", "tool")


class RequestApproval(Command):
    """Ask a governor to approve exactly this S3 action (``kind``, ``object_id``, ``action``, ``payload``);
    a changed payload is a different action."""

    name = "request_approval"
    events = ("approval.requested",)
    agent_effect = True
    ref_field = "approval_id"

    kind: str = Field(min_length=1, max_length=MAX_KIND_CHARS, description="The object's kind, e.g. tool.")
    object_id: str = Field(min_length=1, max_length=MAX_OBJECT_ID_CHARS)
    action: str = Field(default="invoke", min_length=1, max_length=MAX_ACTION_CHARS)
    payload: Payload | None = None


class Approve(Command):
    """A governor approves a pending approval: it binds the approver, the current policy epoch and an
    expiry ``ttl_seconds`` from now."""

    name = "approve"
    events = ("approval.approve",)
    agent_effect = True
    ref_field = "approval_id"

    approval_id: Id
    ttl_seconds: float = Field(default=3600, gt=0, le=MAX_APPROVAL_TTL_S)


class DenyApproval(Command):
    """A governor denies a pending approval: it is rejected for good (never approved, never spent), binding
    the governor who decided and the current policy epoch; the requester's invocation then fails."""

    name = "deny_approval"
    events = ("approval.reject",)
    agent_effect = True
    ref_field = "approval_id"

    approval_id: Id


class Invoke(Command):
    """Ask the policy before using a capability (a tool, or memory, state or an artifact as an input) and
    record the use. ``side_effect`` S3 needs an approval (``approval_id``) bound to exactly this invocation,
    which it spends."""

    name = "invoke"
    events = ("capability.invoked",)
    agent_effect = True

    kind: Literal["state", "artifact", "memory", "tool"] = Field(description="What is used.")
    ident: str = Field(min_length=1, max_length=MAX_OBJECT_ID_CHARS, description=(
        "The object used (the tool's name, for a tool)."))
    side_effect: str = Field(default="S0", pattern=SIDE_EFFECT_PATTERN, description=(
        "The side-effect class, S0 to S3; S3 (irreversible or external) needs an approval."))
    payload: Payload | None = None
    approval_id: Id | None = None

    def ref(self, result: object) -> str | None:
        return f"{self.kind}:{self.ident}"


__all__ = ["INVOKABLE_KINDS", "Approve", "DenyApproval", "Invoke", "RequestApproval"]
