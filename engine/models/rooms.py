"""Rooms: a bounded place where agents join to resolve something, then leave."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from engine.models.common import Id, Model, Payload, Text, TimeUs, Version
from engine.models.lifecycle import Lifecycle


class RoomStatus(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


ROOM_LIFECYCLE = Lifecycle("room", {
    "join": ({RoomStatus.OPEN}, RoomStatus.OPEN),
    "leave": ({RoomStatus.OPEN}, RoomStatus.OPEN),
    "close": ({RoomStatus.OPEN}, RoomStatus.CLOSED),
})


class Room(Model):
    room_id: Id
    goal: Text
    status: RoomStatus
    opened_by: Id
    context_scope: Payload = Field(default_factory=dict)
    authority_scope: Payload = Field(default_factory=dict)
    stop_condition: str | None = Field(default=None, max_length=1000)
    created_at_us: TimeUs
    closed_at_us: TimeUs | None = None
    version: Version


class RoomMember(Model):
    room_id: Id
    agent_id: Id
    active: bool
    joined_at_us: TimeUs
    left_at_us: TimeUs | None = None
    version: Version


__all__ = ["ROOM_LIFECYCLE", "Room", "RoomMember", "RoomStatus"]
