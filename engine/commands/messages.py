"""Channel messages: durable communication that never creates ownership."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from engine.commands.base import Command
from engine.commands.fields import Id, Payload, Text
from engine.models.channels import RecipientKind

_NAMED = (RecipientKind.AGENT, RecipientKind.ROLE, RecipientKind.PLATFORM)


class SendMessage(Command):
    """Post ``body`` on ``channel``: to one agent (``recipient_kind`` agent, ``recipient`` its id), to
    ``any`` agent (the first claim wins), to a role or platform pool (``recipient`` the role or platform;
    the first claim by a matching agent wins) or to ``all`` active agents except the sender (one delivery
    each)."""

    name = "send_message"
    events = ("message.posted",)
    agent_effect = True
    ref_field = "message.message_id"

    channel: Id
    recipient_kind: RecipientKind
    body: Text
    recipient: Id | None = Field(default=None, description=(
        "The agent, role or platform (for those kinds only)."))
    payload: Payload | None = None
    correlation_id: Id | None = None
    reply_to: Id | None = None

    @field_validator("recipient")
    @classmethod
    def _recipient_fits_kind(cls, value: str | None, info: ValidationInfo) -> str | None:
        kind = info.data.get("recipient_kind")
        if kind is not None and (kind in _NAMED) != (value is not None):
            raise ValueError(f"recipient_kind {RecipientKind(kind).value!r} "
                             + ("needs a recipient" if kind in _NAMED else "takes no recipient"))
        return value


class ClaimMessage(Command):
    """Take a delivery addressed to the caller (for ``any`` and pools the first claim wins; others get a
    conflict)."""

    name = "claim_message"
    events = ("message.claimed",)
    agent_effect = True
    ref_field = "delivery_id"

    delivery_id: Id


class AckMessage(Command):
    """Acknowledge a delivery the caller claimed."""

    name = "ack_message"
    events = ("message.acked",)
    agent_effect = True
    ref_field = "delivery_id"

    delivery_id: Id


__all__ = ["AckMessage", "ClaimMessage", "SendMessage"]
