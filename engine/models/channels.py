"""Channel messages: communication, never ownership. Delivered to an agent, ``any``, a pool or ``all``."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from engine.models.common import Id, Model, Payload, Text, TimeUs, Version
from engine.models.lifecycle import Lifecycle


class RecipientKind(StrEnum):
    AGENT = "agent"        # one named agent
    ANY = "any"            # first claim by any active/attached agent wins
    ROLE = "role"          # first claim by an agent of that role wins
    PLATFORM = "platform"  # first claim by an agent on that platform wins
    ALL = "all"            # fan-out: one delivery per active agent, sender excluded


class DeliveryStatus(StrEnum):
    UNREAD = "unread"
    CLAIMED = "claimed"
    ACKED = "acked"


DELIVERY_LIFECYCLE = Lifecycle("delivery", {
    "claim": ({DeliveryStatus.UNREAD}, DeliveryStatus.CLAIMED),
    "ack": ({DeliveryStatus.CLAIMED}, DeliveryStatus.ACKED),
})


class MessageBody(Model):
    """What a sender writes: the channel, the addressee and the content."""

    channel: Id
    recipient_kind: RecipientKind
    recipient: Id | None = None
    body: Text
    payload: Payload = Field(default_factory=dict)
    correlation_id: Id | None = None
    reply_to: Id | None = None

    @model_validator(mode="after")
    def _recipient_fits_kind(self) -> MessageBody:
        needs = self.recipient_kind in (RecipientKind.AGENT, RecipientKind.ROLE, RecipientKind.PLATFORM)
        if needs != (self.recipient is not None):
            raise ValueError(f"recipient_kind {self.recipient_kind.value!r} "
                             + ("needs a recipient" if needs else "takes no recipient"))
        return self


class Message(MessageBody):
    message_id: Id
    sender: Id
    created_at_us: TimeUs


class Delivery(Model):
    delivery_id: Id
    message_id: Id
    recipient_kind: RecipientKind
    recipient: Id | None = None
    status: DeliveryStatus
    claimed_by: Id | None = None
    updated_at_us: TimeUs
    version: Version


class Inbox(Model):
    message: Message
    delivery: Delivery


__all__ = ["DELIVERY_LIFECYCLE", "Delivery", "DeliveryStatus", "Inbox", "Message", "MessageBody", "RecipientKind"]
