"""Channel messages: communication, never ownership. Delivered to an agent, ``any``, a pool or ``all``."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

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


class Message(Model):
    message_id: Id
    channel: Id
    sender: Id
    recipient_kind: RecipientKind
    recipient: Id | None = None
    body: Text
    payload: Payload = Field(default_factory=dict)
    correlation_id: Id | None = None
    reply_to: Id | None = None
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


__all__ = ["DELIVERY_LIFECYCLE", "Delivery", "DeliveryStatus", "Inbox", "Message", "RecipientKind"]
